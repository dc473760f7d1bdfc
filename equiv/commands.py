"""One command line: ``equiv <command> [options]`` (``python -m equiv``), in the litgpt manner.

Every command of the project is one entry of :data:`COMMANDS`: the judge's (``fit``,
``validate``, ``test``, ``predict``: LightningCLI, :mod:`equiv.judge.cli`; ``recipe``,
``ensemble``, ``untuned``, ``crossval``), the search's (``eval``, ``compare``, ``report``,
``serve``) and the data's (``pairs``, ``siblings``, ``label``, ``agreement``, ``solution_pairs``,
``demo_data``). Each is a jsonargparse parser of its own (``equiv.cliargs.command_parser``, or
LightningCLI's), with the same ``--config`` and ``--data`` (docs/cli.md), one-line errors with
exit status 2, and no prefix matching.

The older doors stay, as thin entry points into the same table, so every command in README and
the docs works as written: ``trainer_cli.py`` / ``equiv-train`` (the trainer's commands),
``search_cli.py`` / ``equiv-search`` (the search's and data's), and each ``python -m equiv.X``
tool. Nothing rewrites the command line on the way: a command's words reach its parser as typed.

Why a table and not one parser with every subcommand built: building a subcommand's parser
imports what it configures (LightningCLI imports torch and the model; ``eval`` its policies), so
``equiv report`` would pay for torch. Only the named command's module is imported. Third-party
chatter (weight-loading bars, Lightning's notices, deprecation warnings) is silenced before it is
(:mod:`equiv.quiet`); ``--verbose`` anywhere on the line keeps it.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from typing import NamedTuple, Sequence

from equiv import fastexit, quiet
from equiv.cliargs import entered_through


class Command(NamedTuple):
    """One command: where its main lives, one line of help, its group in ``equiv --help``, and the
    door it had before ``equiv`` (the usage line names that door when the command is reached through it)."""

    module: str
    function: str
    help: str
    group: str
    home: str


def _trainer(name: str, help_: str) -> Command:
    return Command("equiv.commands", "_lightning", help_, "judge", "trainer_cli.py")


COMMANDS: dict[str, Command] = {
    # the judge: LightningCLI (fit, validate, test, predict) and the tools built on it
    "fit": _trainer("fit", "train the judge, export its best epoch and print that epoch's validation metrics"),
    "validate": _trainer("validate", "score a judge or checkpoint on the validation split"),
    "test": _trainer("test", "score a judge or checkpoint on the test split"),
    "predict": _trainer("predict", "write each pair's verdict as JSON lines"),
    "recipe": Command("equiv.judge.recipe", "recipe_main", "build the recommended judge (two fits and their ensemble), "
                      "resumable", "judge", "trainer_cli.py"),
    "ensemble": Command("equiv.judge.ensemble", "main", "average exported judges into one and calibrate it", "judge",
                        "python -m equiv.judge.ensemble"),
    "untuned": Command("equiv.judge.untuned", "main", "export an untuned judge (pretrained encoder, seeded head)",
                       "judge", "python -m equiv.judge.untuned"),
    "adapt": Command("equiv.prune.adapt", "adapt_main", "set an exported judge's threshold and statement floor for "
                     "your policy's labelled siblings, to a precision you name (a new export)", "judge",
                     "equiv"),
    "crossval": Command("equiv.prune.crossval", "main", "cross-validate the judge recipe by problem (out-of-fold "
                        "verdicts)", "judge", "python -m equiv.prune.crossval"),
    # the search
    "eval": Command("equiv.search.cli", "eval_main", "run PRM-guided tree search on a benchmark", "search",
                    "search_cli.py"),
    "compare": Command("equiv.report.compare", "compare_main", "paper-style table of several run directories", "search",
                       "search_cli.py"),
    "report": Command("equiv.report.cli", "report_main", "write an HTML report with plots and search trees", "search",
                      "search_cli.py"),
    "serve": Command("equiv.serve.cli", "serve_main", "serve an exported judge over HTTP (LitServe)", "search",
                     "search_cli.py"),
    # the data: labelled pairs, their labelling and their scoring
    "pairs": Command("equiv.prune.cli", "pairs_main", "evaluate an equivalence strategy on labelled pairs", "data",
                     "search_cli.py"),
    "siblings": Command("equiv.data.sibling_sets", "siblings_main", "sibling step pairs of saved search trees, to "
                        "label", "data", "search_cli.py"),
    "label": Command("equiv.labelling.cli", "label_main", "label a pairs file with an LLM (OpenAI-compatible endpoint)",
                     "data", "search_cli.py"),
    "agreement": Command("equiv.labelling.cli", "agreement_main", "agreement of two label files: levels, binary, kappa",
                         "data", "search_cli.py"),
    "solution_pairs": Command("equiv.data.solution_pairs", "main", "step pairs of sampled solutions (training pairs "
                              "to label)", "data", "python -m equiv.data.solution_pairs"),
    "demo_data": Command("equiv.data.demo", "main", "write the synthetic demo pairs (train.jsonl, valid.jsonl)", "data",
                         "python -m equiv.data.demo"),
}
"""Every command: name -> :class:`Command`."""

TRAINER_COMMANDS = ("fit", "validate", "test", "predict", "recipe")
"""What ``trainer_cli.py`` / ``equiv-train`` reach (LightningCLI's four and ``recipe``)."""

SEARCH_COMMANDS = ("eval", "compare", "pairs", "siblings", "label", "agreement", "report", "serve")
"""What ``search_cli.py`` / ``equiv-search`` reach, in the order its help has always listed them."""

GROUPS = {"judge": "the judge", "search": "search", "data": "labelled pairs"}

FRONT = {"equiv": "equiv", "equiv-search": "equiv-search", "equiv-train": "equiv-train"}
"""The installed console scripts (pyproject.toml ``[project.scripts]``): a usage line names the
one the user typed."""


def _entered(default: str) -> str:
    """The front door's name: the console script typed (``sys.argv[0]``), else ``default``."""
    return FRONT.get(os.path.basename(sys.argv[0] or ""), default)


def usage(names: Sequence[str] = SEARCH_COMMANDS, door: str = "search_cli.py") -> str:
    """The overview of the commands behind a door (``equiv --help``, ``search_cli.py --help``)."""
    lines = [f"usage: {door} COMMAND [--verbose] [options]   (COMMAND --help for its options)"]
    groups = [g for g in GROUPS if any(COMMANDS[n].group == g for n in names)] if len(names) > 8 else [None]
    for group in groups:
        lines += ["", f"commands ({GROUPS[group]}):" if group else "commands:"]
        lines += [f"  {name:<15} {COMMANDS[name].help}" for name in names if group in (None, COMMANDS[name].group)]
    lines += ["", "--config FILE: a YAML file of the command's options (repeatable; later files and flags override "
              "earlier); --data: the data the command reads (docs/cli.md)",
              "--verbose: also show the libraries' own logs, progress bars and warnings"]
    return "\n".join(lines)


def run(name: str, argv: Sequence[str], names: Sequence[str], door: str) -> int:
    """Run command ``name`` with ``argv`` (its own words, as typed); ``names``: the commands this
    door reaches. An unknown name is one line (with the near miss, if any) and exit status 2."""
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        print(f"error: unknown command {name!r}; choose from {', '.join(names)}{hint}", file=sys.stderr)
        return 2
    rest, verbose = quiet.take_verbose(list(argv))
    quiet.configure(verbose)
    with entered_through(door):  # usage lines name the door and the command typed (cliargs.typed_prog)
        command = COMMANDS[name]
        if command.module == "equiv.commands":  # LightningCLI: it reads the subcommand itself
            return _lightning([name, *rest])
        return int(getattr(importlib.import_module(command.module), command.function)(rest) or 0)


def _lightning(argv: list[str]) -> int:
    """``fit``, ``validate``, ``test``, ``predict``: LightningCLI, the trainer Lightning users know."""
    from equiv.judge.cli import main as judge_main

    return int(judge_main(argv) or 0)


def _front(argv: Sequence[str] | None, names: Sequence[str], door: str) -> int:
    fastexit.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    words = [a for a in argv if a != "--verbose"]
    if not words or words[0] in ("-h", "--help"):
        print(usage(names, door))
        return 0
    at = argv.index(words[0])
    return run(words[0], argv[:at] + argv[at + 1:], names, door)


def main(argv: Sequence[str] | None = None) -> int:
    """``equiv`` / ``python -m equiv``: any command of :data:`COMMANDS`; returns the exit status."""
    return _front(argv, list(COMMANDS), _entered("python -m equiv"))


def search_main(argv: Sequence[str] | None = None) -> int:
    """``search_cli.py`` / ``equiv-search``: the search's and the data's older commands (:data:`SEARCH_COMMANDS`)."""
    return _front(argv, SEARCH_COMMANDS, _entered("search_cli.py"))


def train_main(argv: Sequence[str] | None = None) -> int:
    """``trainer_cli.py`` / ``equiv-train``: fit, validate, test or predict the judge (LightningCLI,
    :mod:`equiv.judge.cli`), or ``recipe gsm8k`` (:mod:`equiv.judge.recipe`); returns the exit
    status. Its ``--help`` is LightningCLI's own (the trainer's four subcommands, and recipe named)."""
    fastexit.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    words = [a for a in argv if a != "--verbose"]
    door = _entered("trainer_cli.py")
    if words and words[0] in TRAINER_COMMANDS:
        at = argv.index(words[0])
        return run(words[0], argv[:at] + argv[at + 1:], TRAINER_COMMANDS, door)
    rest, verbose = quiet.take_verbose(argv)  # --help, or a word LightningCLI refuses in its own words
    quiet.configure(verbose)
    with entered_through(door):
        return _lightning(rest)
