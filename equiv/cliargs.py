"""One command-line stack for the search-side subcommands: jsonargparse parsers that read
``--config`` files, show the same ``--help`` and refuse bad input in one line.

Why: ``eval`` was jsonargparse (config files, dotted groups) while ``pairs``, ``serve``,
``siblings`` and ``label`` were plain argparse, so the same setting had two spellings, two help
layouts, two kinds of error message, and only one command read config files. Each command now
builds its parser with :func:`command_parser` and parses with :func:`parse_or_refuse`; a setting
that had an older spelling keeps it as an alias (:func:`add_aliases`), so every command line that
worked still does. Imports jsonargparse only when a parser is built (light modules must not pay
for it).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from typing import Any, Iterable, Mapping, Sequence

from equiv.errors import EXIT_BAD_INPUT, InputError, check_config_files, exit_on_input_error, one_line
from equiv.helptext import plain_formatter


def command_parser(prog: str, description: str, *, spelled: Mapping[str, str] | None = None,
                   config_files: bool = True) -> Any:
    """A jsonargparse parser with ``--config`` (YAML files; later ones and later flags override
    earlier ones) that raises parse errors instead of exiting, so :func:`parse_or_refuse` prints
    them as one line. ``spelled``: aliases its ``parse_args`` spells out first (:func:`spelled_out`).
    ``config_files=False``: no ``--config`` of the parser's own, for a command whose ``--config``
    has long named something else (``python -m equiv.judge.ensemble --config RECIPE``)."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    class CommandParser(ArgumentParser):
        def parse_args(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
            argv = list(sys.argv[1:] if args is None else args)
            return super().parse_args(spelled_out(argv, spelled or {}), *rest, **kwargs)

    parser = CommandParser(prog=typed_prog(prog), description=description, exit_on_error=False, default_meta=False,
                           formatter_class=plain_formatter(), allow_abbrev=False)
    if config_files:
        parser.add_argument("--config", action=ActionConfigFile, help="YAML file(s) of these options; later ones "
                            "and later flags override earlier")
    return parser


INSTALLED = {"search_cli.py": "equiv-search", "trainer_cli.py": "equiv-train"}
"""Each entry script and the console command ``pip install`` makes of it (pyproject.toml)."""


def typed_prog(prog: str) -> str:
    """``prog`` (``search_cli.py pairs``) as the user typed the command: ``equiv-search pairs``
    when this process was started as the installed console script, else unchanged. Why: usage
    lines and hints that name another command than the one typed send a user to a file they may
    not have (an installed package has no ``search_cli.py``)."""
    script, _, rest = prog.partition(" ")
    installed = INSTALLED.get(script)
    if installed and os.path.basename(sys.argv[0] or "") == installed:
        return f"{installed} {rest}".rstrip()
    return prog


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


def add_aliases(parser: Any, aliases: Mapping[str, Iterable[str]]) -> None:
    """Give the option whose destination is each key the extra spellings listed (``{"pruner.model":
    ["--model"]}``): they parse to the same setting and show beside it in ``--help``.

    jsonargparse's class groups take no aliases of their own, so they are added to the built
    actions, as argparse itself records the spellings of an option."""
    by_dest = {action.dest: action for action in parser._actions}
    for dest, spellings in aliases.items():
        action = by_dest[dest]
        for spelling in spellings:
            if spelling in parser._option_string_actions:
                raise ValueError(f"{spelling} already names another option")
            action.option_strings.append(spelling)
            parser._option_string_actions[spelling] = action


def spelled_out(argv: Sequence[str], aliases: Mapping[str, str]) -> list[str]:
    """``argv`` with each alias option (``--data FILE``, ``--data=FILE``) in its full spelling
    (``--data.path``): for an older spelling that jsonargparse keeps for something else, such as
    ``--data``, which loads the ``data`` group's own config file. (A value spelled exactly like
    an alias would be rewritten too; no file or setting of these commands is named ``--data``.)"""
    out: list[str] = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        out.append(aliases[name] + eq + value if name in aliases else arg)
    return out


def as_lists(args: Any, *names: str) -> Any:
    """``args`` with each named repeatable or many-valued option a list: a config file may give one
    value as a scalar (``holdout: test.jsonl``, ``run_dirs: runs/x``), which argparse's ``nargs``
    and ``append`` leave a string -- and a string would be read one character at a time."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not isinstance(value, list):
            setattr(args, name, list(value) if isinstance(value, tuple) else [value])
    return args


def check_counts(args: Any, **counts: int) -> None:
    """Refuse a many-valued option that holds the wrong number of values (``--window LOW HIGH``
    from a config file as ``window: [0.5]``): argparse counts ``nargs`` on the command line only."""
    for name, count in counts.items():
        value = getattr(args, name)
        if value is not None and len(value) != count:
            raise InputError(f"takes {count} values, got {len(value)}: {value!r}", field=name)


def parse_or_refuse(parser: Any, argv: Sequence[str]) -> Any:
    """``parser.parse_args(argv)``; a config file that does not parse, an unknown option or a value
    of the wrong type is one ``error: ...`` line on stderr and exit status 2 (``SystemExit``)."""
    argv = list(argv)
    with exit_on_input_error():
        check_config_files(argv)  # a YAML error names the file, not "<unicode string>"
    try:
        args = parser.parse_args(argv)
    except argparse.ArgumentError as err:
        print(f"error: {one_line(err)}{did_you_mean(str(err), parser)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    with exit_on_input_error():
        check_switches(parser, args)
    return args


def check_switches(parser: Any, args: Any) -> None:
    """Refuse a switch (``store_true``, such as ``--json``) that a config file set to anything but
    true or false: jsonargparse takes a config's ``json: maybe`` as it is, and it would read as true."""
    for action in parser._actions:
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            value = args.get(action.dest) if hasattr(args, "get") else getattr(args, action.dest, None)
            if not isinstance(value, bool):
                raise InputError(f"is a switch: true or false, got {value!r}", field=action.dest)
