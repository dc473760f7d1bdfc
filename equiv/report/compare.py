"""``search_cli.py compare``: the paper-style table of several run directories.

Accuracy, mean generated tokens and the token ratio against the first run, on the problems they
all share (:func:`equiv.rundir.compare_rows`, the same rows the report shows); ``--analysis``
adds the failure-mode correlations of :mod:`equiv.report.analysis` (paper Table 11). Moved here
from ``equiv.search.cli`` (issue 67): it reads run directories and prints, as the report does,
and runs no search.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from equiv.cliargs import as_lists, command_parser, parse_or_refuse
from equiv.errors import InputError, exit_on_input_error
from equiv.rundir import compare_rows as rundir_compare_rows
from equiv.rundir import load_records


def compare_rows(dirs: Sequence[str | Path]) -> tuple[list[dict[str, Any]], int]:
    """The compare table of run directories (:func:`equiv.rundir.compare_rows`), named by path."""
    return rundir_compare_rows([(str(d), load_records(d)) for d in dirs])


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ["run", "algo", "pruner", "problems", "accuracy %", "tokens", "ratio %", "PRM calls", "judge calls", "errors"]
    body = [
        [
            r["run"],
            r["algo"],
            r["pruner"],
            str(r["problems"]),
            f"{r['accuracy']:.2f}",
            f"{r['mean_generated_tokens']:.1f}",
            "-" if r["token_ratio"] is None else f"{r['token_ratio']:.2f}",
            f"{r['mean_prm_calls']:.1f}",
            f"{r['mean_judge_calls']:.1f}",
            str(r["errors"]),
        ]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        if r.get("aggregations"):  # several finished solutions per problem: every answer rule
            rules = ", ".join(f"{name} {acc:.2f}" for name, acc in r["aggregations"].items())
            lines.append(f"{r['run']}: accuracy % by answer aggregation: {rules}")
    return "\n".join(lines)


def compare_main(argv: Sequence[str]) -> int:
    """``search_cli.py compare``: parsed like every search subcommand (:func:`equiv.cliargs.command_parser`:
    ``--config`` YAML files, a bad option one line and exit 2)."""
    parser = command_parser(
        "search_cli.py compare",
        "Paper-style table: accuracy, mean generated tokens and token ratio vs the FIRST run, "
        "on the problems all runs share.",
    )
    parser.add_argument("runs", nargs="+", help="run directories (the first is the baseline)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument(
        "--analysis", action="store_true",
        help="failure-mode analysis (paper Table 11): for each run after the first, Pearson r and p-values "
        "between per-problem pruning rate, token saving vs the first run (same problem and seed), tree depth "
        "and generated tokens, overall and in failure cases",
    )
    args = as_lists(parse_or_refuse(parser, argv), "runs")
    with exit_on_input_error():
        rows, shared = compare_rows(args.runs)
        analyses = _analyses(args.runs) if args.analysis else []
    if args.json:
        out: dict[str, Any] = {"shared_problems": shared, "rows": rows}
        if args.analysis:
            out["analysis"] = [{"run": str(run), **data} for run, data, _ in analyses]
        print(json.dumps(out, indent=2))
    else:
        print(f"{shared} problems shared by all runs; ratio = tokens / tokens of the first run")
        print(format_table(rows))
        for _, _, text in analyses:
            print()
            print(text)
    return 0


def _analyses(dirs: Sequence[str]) -> list[tuple[str, dict[str, Any], str]]:
    """``(run, json, text)`` of the failure-mode analysis of each run against the first."""
    # imported when asked for: the statistics need scipy
    from equiv.report.analysis import analyse_runs, correlations_json, format_correlations

    if len(dirs) < 2:
        raise InputError("--analysis needs a baseline run and at least one pruned run")
    base = load_records(dirs[0])
    out = []
    for directory in dirs[1:]:
        pts, corr = analyse_runs(dirs[0], base, directory, load_records(directory))
        out.append((str(directory), correlations_json(pts, corr), format_correlations(str(directory), pts, corr)))
    return out
