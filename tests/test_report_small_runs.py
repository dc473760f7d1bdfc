"""The report on small or random runs (issue 68, item 5), on run directories shaped as the tour
leaves them: 3 GSM8K problems, both runs wrong on all 3, the tiny random-init policy and PRM of
``configs/search/demo_cpu.yaml`` and the demo judge named in ``config.yaml``.

The page must not read as a result: no Pearson r over 3 problems (and a sentence why), failure
counts that say the baseline failed too, a 0-100 % accuracy axis, every summary column explained,
a banner naming the tour's models, and a tree hint the CLI accepts (``--run.save_trees true``).
(The real tour's runs get the same checks in tests/test_report_cli.py's slow test.)
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import yaml

from tests.helpers.cli import search_cli
from tests.helpers.runs import write_run

TOUR_CONFIG = {
    "algo": "mcts",
    "data": {"dataset": "gsm8k", "path": "demo:gsm8k", "start": 0, "end": 3},
    "policy": {"backend": "transformers", "model": "tiny:runs/tiny/policy"},
    "reward": {"kind": "math_shepherd", "model": "tiny:runs/tiny/prm"},
}


def tour_runs(root: Path, *, trees: bool = True) -> list[Path]:
    """The tour's two runs as ``eval`` writes them: unpruned and pruned by the demo judge, 3
    problems, every answer wrong."""
    runs = []
    for name, pruner in (("demo_base", {"strategy": "none", "model": ""}),
                         ("demo_pruned", {"strategy": "model", "model": "outputs/demo/judge"})):
        run = write_run(root / name, pruned=pruner["strategy"] == "model", trees=trees, ids=(0, 1, 2),
                        tokens=(700, 500, 650))
        records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
        (run / "results.jsonl").write_text("".join(json.dumps(dict(r, correct=False, prediction="7")) + "\n"
                                                   for r in records))
        (run / "config.yaml").write_text(yaml.safe_dump(dict(TOUR_CONFIG, pruner=pruner)))
        runs.append(run)
    return runs


def test_the_report_on_the_tours_runs_says_what_they_are(tmp_path: Path) -> None:
    base, pruned = tour_runs(tmp_path)
    done = search_cli("report", base, pruned, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")

    # a banner names the tour's models, on the page and in what the command prints
    banner = re.search(r'<p class="banner" id="tour-banner">(.*?)</p>', page, re.S).group(1)
    assert "a random-init policy (tiny:runs/tiny/policy)" in banner and "a random-init PRM" in banner
    assert "the demo judge (outputs/demo/judge, trained on synthetic pairs)" in banner
    assert "not a result" in banner and "A real result on your CPU" in banner
    assert "note: These runs use the tour's models" in done.stdout

    # no statistics over 3 problems, and why; counts that match both runs (0/3 each)
    analysis = re.search(r'<section id="analysis">(.*?)</section>', page, re.S).group(1)
    assert '<table class="analysis">' not in analysis and "r (all)" not in analysis
    assert "Correlations left out: 3 problem(s) are fewer than 10." in analysis
    assert ("3 problem(s) against the baseline, 3 failure case(s) (pruned run wrong; the baseline wrong on 3 of "
            "them too, so pruning lost 0)") in analysis

    # every summary column explained
    head = re.search(r'<table class="summary" id="summary-table"><thead><tr>(.*?)</tr>', page, re.S).group(1)
    explained = re.findall(r"<dt>(.*?)</dt>", re.search(r'<dl [^>]*id="summary-columns">(.*?)</dl>', page,
                                                         re.S).group(1))
    columns = re.findall(r"<th>(.*?)</th>", head)
    assert set(columns) - {"run", "algo", "pruner"} == set(explained)


def test_the_accuracy_axis_spans_0_to_100_percent_when_both_runs_score_0(tmp_path: Path) -> None:
    """Two runs at 0 % drew an axis from -0.06 to 0.06 %; the axis is the whole percentage."""
    import matplotlib.image

    from equiv.report import plots
    from equiv.report.load import load_runs
    from equiv.report.stats import compare_rows

    rows = compare_rows(load_runs(tour_runs(tmp_path)))
    assert [row.accuracy for row in rows] == [0.0, 0.0]
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    original = plots._png

    def keep(fig: Figure) -> bytes:
        drawn.append(fig)
        return original(fig)

    plots._png = keep
    try:
        png = plots.accuracy_vs_tokens(rows)
    finally:
        plots._png = original
    assert matplotlib.image.imread(io.BytesIO(png)).shape[2] in (3, 4)  # a real PNG
    (ax,) = drawn[0].axes
    low, high = ax.get_ylim()
    assert low <= 0 and high >= 100
    assert ax.get_xlim()[0] == 0


def test_the_tree_hint_is_an_option_eval_accepts(tmp_path: Path) -> None:
    base, pruned = tour_runs(tmp_path, trees=False)
    done = search_cli("report", base, pruned, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "--run.save_trees true" in done.stdout and "--run.save_trees true" in page
    assert "with --save_trees" not in done.stdout and "<code>--save_trees" not in page


def test_no_banner_for_runs_with_real_models(tmp_path: Path) -> None:
    base, pruned = tour_runs(tmp_path)
    for run, pruner in ((base, {"strategy": "none"}), (pruned, {"strategy": "model",
                                                                "model": "outputs/gsm8k_equiv/ensemble"})):
        config = dict(TOUR_CONFIG, pruner=pruner, policy={"backend": "llamacpp",
                                                          "model": "bundled:qwen2.5-coder-1.5b-instruct"},
                      reward={"kind": "likelihood", "model": ""})
        (run / "config.yaml").write_text(yaml.safe_dump(config))
    done = search_cli("report", base, pruned, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    assert 'id="tour-banner"' not in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "note:" not in done.stdout
