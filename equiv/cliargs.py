"""One command-line stack for every command (``equiv <command>``, equiv.commands): jsonargparse
parsers that read ``--config`` files, show the same ``--help`` and refuse bad input in one line.

Why: ``eval`` was jsonargparse (config files, dotted groups) while ``pairs``, ``serve``,
``siblings`` and ``label`` were plain argparse, so the same setting had two spellings, two help
layouts, two kinds of error message, and only one command read config files. Each command now
builds its parser with :func:`command_parser` and parses with :func:`parse_or_refuse`. A short
name users like (``--model``, ``--data``) is an option string the parser itself declares
(:func:`add_short_names`, :func:`declare_data_file`), the same in every command; nothing rewrites
the command line before the parser reads it. Imports jsonargparse only when a parser is built
(light modules must not pay for it).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from equiv.errors import EXIT_BAD_INPUT, InputError, check_config_files, exit_on_input_error, one_line
from equiv.helptext import plain_formatter


def command_parser(prog: str, description: str) -> Any:
    """A jsonargparse parser with ``--config`` (YAML files of the command's options; later ones
    and later flags override earlier ones) that raises parse errors instead of exiting, so
    :func:`parse_or_refuse` prints them as one line. Every command has it, with that one meaning:
    a command that runs fits names the fit's own YAML ``--recipe`` (:func:`add_recipe`)."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(prog=typed_prog(prog), description=description, exit_on_error=False, default_meta=False,
                            formatter_class=plain_formatter(), allow_abbrev=False)
    parser.add_argument("--config", action=ActionConfigFile, help=CONFIG_HELP)
    return parser


CONFIG_HELP = "YAML file(s) of this command's options; later files and later flags override earlier ones"
"""What ``--config`` means in every command that reads its own options from YAML (docs/cli.md)."""

_doors: list[str] = []
"""The front door this process's command came through (``equiv``, ``python -m equiv``,
``search_cli.py``, ``equiv-search``, ...), innermost last; :func:`typed_prog` reads it."""


@contextmanager
def entered_through(door: str) -> Iterator[None]:
    """While a command runs, its usage lines and hints name ``door`` (:func:`typed_prog`)."""
    _doors.append(door)
    try:
        yield
    finally:
        _doors.pop()


TOOLS = {"python -m equiv.judge.ensemble": "ensemble", "python -m equiv.judge.untuned": "untuned",
         "python -m equiv.prune.crossval": "crossval", "python -m equiv.data.solution_pairs": "solution_pairs",
         "python -m equiv.data.demo": "demo_data"}
"""Each ``python -m`` tool's command name under ``equiv`` (equiv.commands.COMMANDS)."""


def typed_prog(prog: str) -> str:
    """``prog``, a command's older name (``search_cli.py pairs``, ``trainer_cli.py``, ``python -m
    equiv.judge.ensemble``), as the user reached the command: ``equiv pairs``, ``python -m equiv
    ensemble``, ``equiv-search pairs`` through that door (:func:`entered_through`), else unchanged.
    Why: usage lines and hints that name another command than the one typed send a user to a file
    they may not have (an installed package has no ``search_cli.py``)."""
    if not _doors:
        return prog
    script, _, rest = prog.partition(" ")
    command = TOOLS.get(prog, rest if script in ("search_cli.py", "trainer_cli.py") else prog)
    return f"{_doors[-1]} {command}".rstrip()


UNRECOGNIZED = re.compile(r"nrecognized arguments?:?(.*)", re.DOTALL)


def option_names(parser: Any) -> set[str]:
    """Every ``--long`` option string of ``parser`` and of its subcommands' parsers."""
    names = {name for name in parser._option_string_actions if name.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                names |= option_names(sub)
    return names


def did_you_mean(message: str, parser: Any) -> str:
    """``"; did you mean --trainer.max_epochs?"`` for each unrecognized option in ``message`` that
    is a near miss of one of ``parser``'s (``difflib``), else ``""``. Why: with prefix matching off
    (``allow_abbrev=False``, so ``--trainer.max_epoch`` no longer silently means ``max_epochs``),
    a typo should still lead to the right spelling in the one error line."""
    found = UNRECOGNIZED.search(message)
    if not found:
        return ""
    known = sorted(option_names(parser))
    hints: list[str] = []
    for name in re.findall(r"(?<![\w-])(--[A-Za-z0-9_][A-Za-z0-9_.\-]*)", found.group(1)):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        if close and close[0] not in hints:
            hints.append(close[0])
    return f"; did you mean {' or '.join(hints)}?" if hints else ""


def add_short_names(parser: Any, names: Mapping[str, Iterable[str]]) -> None:
    """Give the option whose destination is each key the other option strings listed
    (``{"pruner.model": ["--model"]}``): the parser itself declares them, as argparse records
    several option strings of one action, so they parse to the same setting and show beside it in
    ``--help``. Nothing rewrites the command line. (jsonargparse's class groups take no extra
    option strings of their own, so they are added to the built actions.)"""
    by_dest = {action.dest: action for action in parser._actions}
    for dest, spellings in names.items():
        action = by_dest[dest]
        for spelling in spellings:
            if spelling in parser._option_string_actions:
                raise ValueError(f"{spelling} already names another option")
            action.option_strings.append(spelling)
            parser._option_string_actions[spelling] = action


DATA_HELP = "the data file this command reads: the same as --data.path FILE (docs/cli.md)"


def declare_data_file(parser: Any) -> None:
    """``--data FILE`` in a parser with a ``data`` group that has a ``path``: the data file the
    command reads, the same setting as ``--data.path FILE`` (``eval``'s problems, ``pairs``'
    labelled pairs). The parser declares it itself: jsonargparse gives a group's bare name
    (``--data``) to an action that loads the group from a YAML file, and here that action sets
    ``data.path`` instead, so ``--data`` means one thing in every command (docs/cli.md); a YAML
    file of the group's settings is read by ``--config``."""
    from jsonargparse._actions import _ActionConfigLoad

    class DataFile(_ActionConfigLoad):  # a group loader, so jsonargparse looks "data" up as the group
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if not args:  # jsonargparse copies actions by calling them without arguments
                return super().__call__(*args, **kwargs)
            _parser, namespace, value = args[:3]
            namespace["data.path"] = value
            return None

    action = parser._option_string_actions["--data"]
    if not isinstance(action, _ActionConfigLoad) or "data.path" not in {a.dest for a in parser._actions}:
        raise ValueError("--data FILE needs a data group with a path")
    action.__class__ = DataFile
    action.metavar, action.help = "FILE", DATA_HELP


def as_lists(args: Any, *names: str) -> Any:
    """``args`` with each named repeatable or many-valued option a list: a config file may give one
    value as a scalar (``holdout: test.jsonl``, ``run_dirs: runs/x``), which argparse's ``nargs``
    and ``append`` leave a string -- and a string would be read one character at a time."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not isinstance(value, list):
            setattr(args, name, list(value) if isinstance(value, tuple) else [value])
    return args


class AppendAfterConfig(argparse._AppendAction):
    """A repeatable option (``action="append"``) that a ``--config`` file may also give as one
    value: ``data: x.jsonl`` and then ``--data y.jsonl`` is ``[x.jsonl, y.jsonl]``. Why: argparse
    appends to what the config left, and a string has no ``append`` (a traceback, not an error
    line); :func:`parse_or_refuse` gives every plain append action this class."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest, None)
        if current is not None and not isinstance(current, list):
            setattr(namespace, self.dest, list(current) if isinstance(current, tuple) else [current])
        super().__call__(parser, namespace, values, option_string)


def check_counts(args: Any, **counts: int) -> None:
    """Refuse a many-valued option that holds the wrong number of values (``--window LOW HIGH``
    from a config file as ``window: [0.5]``): argparse counts ``nargs`` on the command line only."""
    for name, count in counts.items():
        value = getattr(args, name)
        if value is not None and len(value) != count:
            raise InputError(f"takes {count} values, got {len(value)}: {value!r}", field=name)


def parse_or_refuse(parser: Any, argv: Sequence[str]) -> Any:
    """``parser.parse_args(argv)``; a config file that does not parse, an unknown option or a value
    of the wrong type is one ``error: ...`` line on stderr and exit status 2 (``SystemExit``), and
    so is a trainer recipe given to ``--config`` of a command that takes it as ``--recipe``
    (:func:`refuse_recipe_as_config`)."""
    argv = list(argv)
    with exit_on_input_error():
        check_config_files(argv)  # a YAML error names the file, not "<unicode string>"
        if RECIPE_OPTION in parser._option_string_actions:
            refuse_recipe_as_config(parser, argv)
    for action in parser._actions:
        if type(action) is argparse._AppendAction:
            action.__class__ = AppendAfterConfig
    try:
        args = parser.parse_args(argv)
    except argparse.ArgumentError as err:
        print(f"error: {one_line(err)}{did_you_mean(str(err), parser)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    with exit_on_input_error():
        check_switches(parser, args)
    return args


RECIPE_OPTION = "--recipe"
RECIPE_HELP = ("the trainer recipe: the YAML file `fit --config` takes (configs/gsm8k_equiv.yaml), {what}")

TRAINER_KEYS = ("model", "data", "trainer", "seed_everything", "optimizer", "lr_scheduler", "ckpt_path", "checkpoint",
                "export_dir", "overwrite", "threshold_from_val", "guard", "floor", "plan_floor", "plan_items",
                "predictions_out")
"""The top-level keys of a trainer recipe (``fit --config``: LightningCLI's groups and the options
``equiv.judge.cli`` adds): how :func:`refuse_recipe_as_config` tells a recipe from a file of a
command's own options."""


def add_recipe(parser: Any, what: str) -> None:
    """``--recipe FILE`` (required): the trainer recipe of a command that runs or reads fits
    (``ensemble``, ``crossval``), ``what`` saying what the command takes from it. Why its own
    name: ``--config`` is a YAML of the command's own options in every command (docs/cli.md); the
    recipe is one of those options, so a ``--config`` file may name it too (``recipe: FILE``)."""
    parser.add_argument(RECIPE_OPTION, required=True, metavar="FILE", help=RECIPE_HELP.format(what=what))


def config_values(argv: Sequence[str]) -> list[str]:
    """The values of every ``--config`` in ``argv`` (``--config FILE`` and ``--config=FILE``)."""
    found = []
    for index, arg in enumerate(argv):
        if arg == "--config" and index + 1 < len(argv):
            found.append(argv[index + 1])
        elif arg.startswith("--config="):
            found.append(arg.partition("=")[2])
    return found


def refuse_recipe_as_config(parser: Any, argv: Sequence[str]) -> None:
    """Refuse, in one line that says to use ``--recipe``, a ``--config`` file that is a trainer
    recipe: one with top-level keys of ``fit`` (:data:`TRAINER_KEYS`) that are not options of this
    command, or a settings group (``data: {train: ...}``) where this command's option of that
    name is no group. Why: ``ensemble`` and ``crossval`` took the recipe as ``--config`` until
    ``--config`` came to mean the command's own options everywhere (issue 67); an old command line
    must meet the fix, not a puzzling "unrecognized key" -- and it is never rewritten silently."""
    import yaml

    options = option_names(parser)
    for value in config_values(argv):
        if not Path(value).is_file():
            continue  # inline YAML or a missing file: the parser's own message
        try:
            settings = yaml.safe_load(Path(value).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue  # check_config_files has named it already
        if not isinstance(settings, dict):
            continue
        foreign = [key for key in TRAINER_KEYS if key in settings and (
            f"--{key}" not in options
            or isinstance(settings[key], dict) and not any(name.startswith(f"--{key}.") for name in options))]
        if foreign:
            keys = ", ".join(f"{key}:" for key in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise InputError(f"is a trainer recipe ({keys} are fit's settings), not a file of this command's options: "
                             f"give it as {RECIPE_OPTION} {value} (--config is a YAML of the command's own options, "
                             "docs/cli.md)", path=value, field="config")


def check_switches(parser: Any, args: Any) -> None:
    """Refuse a switch (``store_true``, such as ``--json``) that a config file set to anything but
    true or false: jsonargparse takes a config's ``json: maybe`` as it is, and it would read as true."""
    for action in parser._actions:
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            value = args.get(action.dest) if hasattr(args, "get") else getattr(args, action.dest, None)
            if not isinstance(value, bool):
                raise InputError(f"is a switch: true or false, got {value!r}", field=action.dest)
