"""The two commands, importable: ``equiv-train`` / ``trainer_cli.py`` and ``equiv-search`` /
``search_cli.py`` (``[project.scripts]`` in pyproject.toml).

Why here and not in the scripts: ``pip install`` makes console commands from functions of the
installed package, and the scripts at the repository root are not part of it. So the two mains
live in the package and both ways of starting a command run the same code; the scripts stay, as
the design's entry points, one call each.

Thin on purpose: each search subcommand lives in its own module and is imported only when asked
for, so ``pairs`` does not pay for importing vLLM and ``report`` does not import torch.
Third-party chatter (weight-loading bars, load reports, Lightning's notices, library deprecation
warnings) is silenced before any subcommand is imported (:mod:`equiv.quiet`); ``--verbose``
anywhere on the line keeps it.
"""

from __future__ import annotations

import importlib
import sys

from equiv import quiet

COMMANDS = {
    "eval": ("equiv.search.cli", "eval_main", "run PRM-guided tree search on a benchmark"),
    "compare": ("equiv.report.compare", "compare_main", "paper-style table of several run directories"),
    "pairs": ("equiv.prune.cli", "pairs_main", "evaluate an equivalence strategy on labelled pairs"),
    "siblings": ("equiv.data.sibling_sets", "siblings_main", "sibling step pairs of saved search trees, to label"),
    "label": ("equiv.labelling.cli", "label_main", "label a pairs file with an LLM (OpenAI-compatible endpoint)"),
    "agreement": ("equiv.labelling.cli", "agreement_main", "agreement of two label files: levels, binary, kappa"),
    "report": ("equiv.report.cli", "report_main", "write an HTML report with plots and search trees"),
    "serve": ("equiv.serve.cli", "serve_main", "serve an exported judge over HTTP (LitServe)"),
}
"""Search-side subcommand -> (module, function, one line of help)."""


def usage() -> str:
    """The search command's overview (``search_cli.py --help``)."""
    from equiv.cliargs import typed_prog

    lines = [f"usage: {typed_prog('search_cli.py')} COMMAND [--verbose] [options]   (COMMAND --help for its options)",
             "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "--verbose: also show the libraries' own logs, progress bars and warnings"]
    return "\n".join(lines)


def search_main(argv: list[str] | None = None) -> int:
    """``search_cli.py`` / ``equiv-search``: one of :data:`COMMANDS`; returns the exit status."""
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


def train_main(argv: list[str] | None = None) -> int:
    """``trainer_cli.py`` / ``equiv-train``: fit, validate, test or predict the judge
    (:mod:`equiv.judge.cli`), or build a recipe's judge (``recipe gsm8k``,
    :mod:`equiv.judge.recipe`); returns the exit status."""
    argv, verbose = quiet.take_verbose(sys.argv[1:] if argv is None else argv)
    quiet.configure(verbose)
    if argv and argv[0] == "recipe":  # the recommended judge in one command (equiv/judge/recipe.py)
        from equiv.judge.recipe import recipe_main

        return recipe_main(argv[1:])
    from equiv.judge.cli import main

    return int(main(argv) or 0)
