"""``python search_cli.py report RUN_DIR [RUN_DIR ...] --out report/``.

Parsed like every search subcommand (:func:`equiv.cliargs.command_parser`: ``--config`` YAML
files, one-line ``error: ...`` + exit 2); jsonargparse is the only import it adds, nothing of
torch.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from equiv.cliargs import as_lists, command_parser, parse_or_refuse
from equiv.errors import exit_on_input_error
from equiv.report.build import build_report


def build_parser() -> Any:
    """``report``'s parser: the same flags as ever, and ``--config`` for a YAML file of them."""
    p = command_parser(
        "search_cli.py report",
        "Write a self-contained HTML report (summary table, plots, search trees) for "
        "one or more run directories made by `search_cli.py eval`. The first run is the baseline "
        "for token ratios; numbers are computed on the problems all runs share.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (first = baseline)")
    p.add_argument("--out", type=str, default="report", help="output directory: index.html and plots/*.png (default: report)")
    p.add_argument("--title", type=Optional[str], default=None, help="page title")
    p.add_argument("--problems", type=Optional[str], default=None,
                   help="comma-separated problem ids whose trees to embed (default: the ones with most merges)")
    p.add_argument("--max_trees", type=int, default=100,
                   help="embed at most this many problems' trees (default 100; keeps the page light)")
    p.add_argument("--max_mb", type=float, default=20.0,
                   help="stop adding trees once about this many MB of tree data are embedded (default 20)")
    p.add_argument("--collapse_depth", type=int, default=3,
                   help="tree nodes at this depth or deeper start collapsed, except on the chosen path (default 3)")
    return p


def report_main(argv: list[str]) -> int:
    """Entry point used by ``search_cli.py report``; returns the exit status (2 on bad input)."""
    try:
        args = as_lists(parse_or_refuse(build_parser(), argv), "runs")
        with exit_on_input_error():
            problems = [p.strip() for p in args.problems.split(",") if p.strip()] if args.problems else None
            files = build_report(args.runs, args.out, title=args.title, problems=problems,
                                 max_trees=args.max_trees, max_mb=args.max_mb, collapse_depth=args.collapse_depth)
    except SystemExit as exc:  # --help exits 0; input errors exit 2
        return int(exc.code or 0)
    if files.banner:
        print(f"note: {files.banner}")
    print(f"wrote {files.html}")
    for path in files.plots.values():
        print(f"wrote {path}")
    for name, why in files.skipped.items():
        print(f"skipped plot {name}: {why}")
    if files.trees_available:
        why = f" ({files.trees_over_budget} left out by --max_mb)" if files.trees_over_budget else ""
        print(f"embedded trees for {files.trees} of {files.trees_available} problem(s){why}")
    if files.trees_missing:
        print(f"missing tree files: {len(files.trees_missing)} named in results.jsonl do not exist "
              f"(e.g. {files.trees_missing[0]}); those problems are shown without a tree", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(report_main(sys.argv[1:]))
