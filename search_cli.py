"""Search-side entry point: ``python search_cli.py {eval,compare,pairs,siblings,label,agreement,report,serve} ...``.

Thin on purpose: each subcommand lives in the package and is imported only when asked for, so
``pairs`` does not pay for importing vLLM and ``report`` does not import torch. Third-party chatter
(weight-loading bars, load reports, library deprecation warnings) is silenced before any subcommand
is imported (:mod:`equiv.quiet`); ``--verbose`` on any subcommand keeps it.
"""

from __future__ import annotations

import importlib
import sys

from equiv import quiet

COMMANDS = {
    "eval": ("equiv.search.cli", "eval_main", "run PRM-guided tree search on a benchmark"),
    "compare": ("equiv.search.cli", "compare_main", "paper-style table of several run directories"),
    "pairs": ("equiv.prune.cli", "pairs_main", "evaluate an equivalence strategy on labelled pairs"),
    "siblings": ("equiv.data.sibling_sets", "siblings_main", "sibling step pairs of saved search trees, to label"),
    "label": ("equiv.labelling.cli", "label_main", "label a pairs file with an LLM (OpenAI-compatible endpoint)"),
    "agreement": ("equiv.labelling.cli", "agreement_main", "agreement of two label files: levels, binary, kappa"),
    "report": ("equiv.report.cli", "report_main", "write an HTML report with plots and search trees"),
    "serve": ("equiv.serve.cli", "serve_main", "serve an exported judge over HTTP (LitServe)"),
}


def usage() -> str:
    lines = ["usage: search_cli.py COMMAND [--verbose] [options]   (COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "--verbose: also show the libraries' own logs, progress bars and warnings"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, (rest, verbose) = argv[0], quiet.take_verbose(argv[1:])
    quiet.configure(verbose)
    if name not in COMMANDS:
        print(f"error: unknown command {name!r}; choose from {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    return int(getattr(importlib.import_module(module), func)(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
