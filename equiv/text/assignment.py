"""What a step written as Python assigns, as expressions :mod:`equiv.text.expression` can evaluate.

Qwen2.5-Coder, asked for steps, sometimes writes its arithmetic as Python: siblings of one tree
(GSM8K test problem 16, docs/results.md) assigned
``total_northward_distance = northward_first_day + northward_second_day`` on one side and
``... = (northward_first_day + northward_second_day) * 2`` on the other, and the judge merged them
three times. The LaTeX rules read no code, so this module reads the assignments: ``name = expr``
lines, the comment after ``#`` dropped, the last assignment of a name winning.

:func:`read` turns a right-hand side into the expression module's notation: each variable
name becomes a one-letter unknown (``a``, ``b``, ... in the sorted order of the side's names,
which it returns too) and ``**`` becomes ``^``. Anything but numbers, names,
``+ - * / **`` and parentheses (a call, a subscript, an attribute, a string, a comparison) gives
``None``: the guard rule then reads nothing, and the model decides as before.

Linear in the text: one line-anchored pattern with no nested repetition, and a right-hand side
longer than :data:`equiv.text.expression.MAX_CHARS` is not read.
"""

from __future__ import annotations

import re

from equiv.text.expression import MAX_CHARS

MAX_NAMES = 26
"""The most distinct names one right-hand side may use: one per unknown ``a``-``z``."""

_ASSIGNMENT = re.compile(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?!=)(.*)$", re.M)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?:\d+(?:_\d+)*(?:\.(?:\d+(?:_\d+)*)?)?|\.\d+(?:_\d+)*)")
_OPERAND = re.compile(r"[\w.]+")
_READABLE = re.compile(r"[\w \t.+\-*/()]*")
_CALL = re.compile(r"[\w)][ \t]*\(")
_ADJACENT_OPERANDS = re.compile(r"[\w.)][ \t]+[\w.(]")


def assignments(text: str) -> dict[str, str]:
    """Every ``name = expression`` line of ``text``: the name and its right-hand side (stripped, a
    trailing ``# comment`` dropped; the last assignment of a name wins). Augmented assignments
    (``x += 1``) and comparisons (``x == 1``) are not assignments of a value and are left out."""
    out: dict[str, str] = {}
    for name, right in _ASSIGNMENT.findall(text):
        right = right.split("#", 1)[0].strip()
        if right:
            out[name] = right
    return out


def names(right: str) -> tuple[str, ...] | None:
    """The variable names a right-hand side uses, sorted; ``None`` when it is not plain arithmetic
    (see the module docstring) or uses more than :data:`MAX_NAMES`."""
    if len(right) > MAX_CHARS or not _READABLE.fullmatch(right):
        return None
    if _CALL.search(right) or _ADJACENT_OPERANDS.search(right):
        return None  # round(x), (a)(b), "x if y": not arithmetic this module reads
    found: set[str] = set()
    for operand in _OPERAND.findall(right):
        if _NAME.fullmatch(operand):
            found.add(operand)
        elif not _NUMBER.fullmatch(operand):
            return None  # math.pi, 3e5, 2x: an attribute, an exponent or not Python
    return tuple(sorted(found)) if len(found) <= MAX_NAMES else None


def read(right: str) -> tuple[tuple[str, ...], str] | None:
    """The names ``right`` uses (sorted, as :func:`names` gives them) and ``right`` in
    :mod:`equiv.text.expression`'s notation, those names becoming ``a``, ``b``, ...: two sides
    with equal names are then in one notation and can be compared. ``None`` as for :func:`names`."""
    used = names(right)
    if used is None:
        return None
    letter = {name: chr(ord("a") + k) for k, name in enumerate(used)}
    right = _OPERAND.sub(lambda m: letter.get(m.group(0)) or m.group(0).replace("_", ""), right)
    return used, re.sub(r"[ \t]+", "", right.replace("**", "^"))
