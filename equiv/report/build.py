"""Assemble a report: load runs, compute the table, draw plots, select trees, write files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from equiv.errors import InputError
from equiv.report import plots
from equiv.report.analysis import MIN_POINTS, analyse_runs, correlations_html, record_map
from equiv.report.banner import tour_banner
from equiv.report.html import render_page
from equiv.report.load import Run, load_runs
from equiv.report.stats import compare_rows
from equiv.report.tree_view import select_trees, tree_payload
from equiv.rundir import PAIRS as PAIRS_FILE
from equiv.rundir import read_pairs
from equiv.rundir.outputs import check_output

INDEX = "index.html"
PLOTS_DIR = "plots"


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`build_report` wrote (paths) and what it could not draw (plot -> reason)."""

    html: Path
    plots: dict[str, Path]
    skipped: dict[str, str]
    trees: int
    trees_available: int
    trees_over_budget: int = 0
    trees_missing: tuple[str, ...] = ()  # tree files that records name but that do not exist
    banner: str = ""  # the tour's models, when a run used them (equiv.report.banner)


def analysis_block(runs: Sequence[Run]) -> str:
    """Failure-mode correlations of each run against the first (paper Table 11); "" for one run."""
    base = record_map(runs[0].records)
    parts = []
    for run in runs[1:]:
        pts, corr = analyse_runs(runs[0].path, base, run.path, record_map(run.records))
        parts.append(correlations_html(run.name, pts, corr))
    if not parts:
        return ""
    return (
        "<p class=muted>Pearson r and two-sided p per pair, over the problems both runs finished without error "
        f"and over the failure cases, each where there are at least {MIN_POINTS}. pruning_rate = pruned / candidates; token_saving = 1 - tokens / baseline tokens "
        "(same problem and seed); depth = deepest tree node (else path length); tokens = generated tokens.</p>"
        + "".join(parts)
    )


def build_report(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    title: str | None = None,
    problems: Sequence[str] | None = None,
    max_trees: int = 100,
    max_mb: float = 20.0,
    collapse_depth: int = 3,
) -> ReportFiles:
    """Write ``out/index.html`` and ``out/plots/*.png`` for ``run_dirs`` (first = baseline)."""
    if not run_dirs:
        raise InputError("give at least one run directory")
    if max_trees < 0:
        raise InputError(f"must be >= 0, got {max_trees}", field="max_trees")
    if not max_mb > 0:
        raise InputError(f"must be > 0, got {max_mb}", field="max_mb")
    if collapse_depth < 0:
        raise InputError(f"must be >= 0, got {collapse_depth}", field="collapse_depth")
    out = check_output(out, option="--out", inputs=run_dirs, directory=True, files=(INDEX,))  # never over a run, before the work
    runs = load_runs(list(run_dirs))
    rows = compare_rows(runs)
    if rows[0].problems == 0:
        raise InputError("the runs share no problem id, so they cannot be compared; report them separately")

    images: dict[str, bytes | None] = {
        "tokens_per_problem": plots.tokens_per_problem(runs),
        "pruning_rate_by_depth": plots.pruning_rate_by_depth(runs),
        "accuracy_vs_tokens": plots.accuracy_vs_tokens(rows),
    }
    skipped: dict[str, str] = {}
    if images["pruning_rate_by_depth"] is None:
        skipped["pruning_rate_by_depth"] = (
            "No saved trees with expanded nodes, so no per-depth pruning rate. "
            "Run `search_cli.py eval` with --run.save_trees true to get it."
        )

    selection = select_trees(runs, problems, max_trees, max_mb)
    chosen = set(selection.ids)
    banner = tour_banner(runs)
    payloads = [
        {pid: tree_payload(tree, run.results.get(pid), pairs) for pid, tree in run.trees.items() if pid in chosen}
        for run, pairs in ((run, run_pairs(run)) for run in runs)
    ]
    page = render_page(
        title=title or ("Search report: " + " vs ".join(r.name for r in runs)),
        runs=runs, rows=rows, plots=images, plot_notes=skipped,
        selection=selection, trees=payloads, collapse_depth=collapse_depth,
        analysis=analysis_block(runs), banner=banner,
    )

    (out / PLOTS_DIR).mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, png in images.items():
        target = out / PLOTS_DIR / f"{name}.png"
        if png is None:
            target.unlink(missing_ok=True)  # never leave a stale plot from an earlier report
            continue
        target.write_bytes(png)
        written[name] = target
    html_path = out / INDEX
    html_path.write_text(page, encoding="utf-8")
    return ReportFiles(html=html_path, plots=written, skipped=skipped,
                       trees=len(selection.ids), trees_available=selection.available,
                       trees_over_budget=selection.over_budget,
                       trees_missing=tuple(path for run in runs for path in run.missing_trees), banner=banner)


def run_pairs(run: Run) -> list[dict]:
    """The run's ``judge_pairs.jsonl`` rows (none when it has no such file): the merge reasons."""
    path = Path(run.path) / PAIRS_FILE
    return read_pairs(path)[0] if path.is_file() else []
