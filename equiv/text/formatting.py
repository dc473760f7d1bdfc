"""Step text with its formatting removed: the key of the learned judges' free "same step" check.

The labelling rubric (MathEquiv's scale, ``../shared/data/gsm8k_equiv/RUBRIC.md``) says wording
and formatting do not matter, and names the cases: ``12`` vs ``12.0``, ``$12`` vs ``12 dollars``,
``3+4`` written with or without spaces. Two steps that differ *only* in such formatting are the
same step (level 4). The fine-tuned MiniLM does not always see that: on the calibration split it
scored some of these pairs below 0.1, because the training pairs that look nearly identical are
mostly one-number edits (level 1). :func:`format_key` removes exactly the formatting, so
``format_key(a) == format_key(b)`` can decide such pairs for free, before any model runs.

What is removed: runs of whitespace; thousands separators (``240,000``); currency signs
(``$``, ``€``, ``£``); trailing zeros after a decimal point (``12.50`` -> ``12.5``, ``12.0`` ->
``12``); spaces around arithmetic operators, with ``×`` and a ``x`` between numbers read as ``*``
and ``÷`` as ``/``; a final full stop; letter case. Nothing else: a changed number, word or
operator still makes the keys differ.
"""

from __future__ import annotations

import functools
import re

from equiv.text.normalize import normalise_whitespace, without_thousands_commas

_CURRENCY = re.compile(r"[$€£]")
_TIMES = re.compile(r"(?<=\d)\s*[x×]\s*(?=[\d.])")
_DECIMAL = re.compile(r"(?<![\d.])(\d*)\.(\d+)(?!\d)(?!\.\d)")
# Spaces before an operator are read from the start of their run only (removing "$" can leave a
# long run, and retrying it from each space is quadratic: issue #53); after a space, only an
# operator itself starts a match (one whose spaces before it an earlier match took).
_OPERATOR = re.compile(r"(?:(?<!\s)\s*|(?<=\s))([+\-*/=÷])\s*")


def _drop_trailing_zeros(match: re.Match[str]) -> str:
    whole, fraction = match.group(1), match.group(2).rstrip("0")
    if fraction:
        return f"{whole}.{fraction}"
    return whole or "0"


@functools.lru_cache(maxsize=1 << 16)
def format_key(text: str) -> str:
    """``text`` without its formatting (see the module docstring); equal keys mean the same step.
    Cached: the same-step shortcut asks it for every pair, so a step is asked once per sibling."""
    # the final stops and spaces: rstrip, not r"[.\s]+$", which retries from every dot (quadratic);
    # after normalise_whitespace a space is the only whitespace left
    s = normalise_whitespace(text).rstrip(". ")
    s = without_thousands_commas(s)  # commas only: a space may part two numbers
    s = _CURRENCY.sub("", s)
    s = _TIMES.sub("*", s).replace("×", "*").replace("÷", "/")
    s = _DECIMAL.sub(_drop_trailing_zeros, s)
    return _OPERATOR.sub(r"\1", s).lower()
