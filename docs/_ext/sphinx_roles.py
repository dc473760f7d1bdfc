"""A griffe extension for the API reference: Sphinx roles in docstrings as inline code.

The docstrings cross-reference with reStructuredText roles (``:class:`JudgeStats```,
``:func:`~equiv.prune.build_judge```), which Markdown would show verbatim. mkdocstrings renders
docstrings as Markdown, so each role becomes plain inline code with the target's name (the last
dotted part when the reference starts with ``~``, as Sphinx shows it).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


def _plain(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def strip_roles(text: str) -> str:
    """``:class:`~a.b.C``` -> ``C`` in backticks; ``:func:`f``` -> ``f`` in backticks."""
    return ROLE.sub(_plain, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = strip_roles(obj.docstring.value)
