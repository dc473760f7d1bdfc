"""Help text for people: Sphinx markup out, choices in.

Why: ``--help`` reads the settings' docstrings, which are written for the API reference
(``:data:`STRATEGIES```, ``:mod:`equiv.text.guard```, double back-quotes); on a terminal that
markup is noise. :func:`plain` turns it into plain words, :func:`plain_formatter` makes a
jsonargparse help formatter that applies it to every option's help and every group's
description, and :func:`show_choices` lists a free-text option's allowed values (a registry's
names, which can grow at run time, so they are not a fixed ``Literal`` type).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

ROLE = re.compile(r":(?:py:)?(?:data|mod|func|class|meth|attr|obj|exc|ref|doc):`~?([^`<]*?)(?:\s*<[^>]*>)?`")
LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` without reST roles (``:mod:`a.b``` -> ``a.b``, ``~`` paths shortened to their
    last part) and without double back-quotes."""
    def role(m: re.Match[str]) -> str:
        target = m.group(1).strip()
        return target.rsplit(".", 1)[-1] if m.group(0).split("`", 1)[1].startswith("~") else target

    return LITERAL.sub(r"\1", ROLE.sub(role, text))


def plain_formatter() -> type:
    """A jsonargparse ``DefaultHelpFormatter`` whose help and descriptions pass through :func:`plain`
    (imported here: light modules must not pay for jsonargparse)."""
    from jsonargparse import DefaultHelpFormatter

    class PlainHelpFormatter(DefaultHelpFormatter):
        def _get_help_string(self, action: Any) -> str | None:
            text = super()._get_help_string(action)
            return plain(text) if text else text

        def _format_text(self, text: str) -> str:
            return super()._format_text(plain(text))

        def start_section(self, heading: str | None) -> None:
            super().start_section(plain(heading) if heading else heading)

    return PlainHelpFormatter


def show_choices(parser: Any, choices: dict[str, Iterable[str]]) -> None:
    """Show each option's allowed values in its usage (``--search.prune_stage {after_prm,before_prm}``),
    as argparse shows a fixed set; validation stays with the settings' own checks."""
    for action in parser._actions:
        if action.dest in choices:
            action.metavar = "{" + ",".join(choices[action.dest]) + "}"
