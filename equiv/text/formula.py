"""The ``formula`` strategy: two steps are equivalent when they compute the same formulas.

A GSM8K step carries its computation in calculator notes (``<<4*2=8>>``); a MATH step in
``$...$``, ``\\(...\\)`` or ``\\[...\\]``. Per the equivalence rubric, the computation (same
operations on the same numbers, same results) is what makes two steps the same step, while
wording does not. So this strategy extracts the formulas of each step, normalises them, and
calls the pair equivalent when the two multisets of formulas are equal.

Normalisation (all of it on purpose, each a way two writers spell the same computation):
whitespace and ``$`` removed; ``\\times \\cdot × · x ∗`` -> ``*``; ``\\div ÷`` -> ``/``; unicode
minus -> ``-``; ``\\left``/``\\right`` and LaTeX spacing dropped; ``\\dfrac``/``\\tfrac`` ->
``\\frac`` and ``\\frac{a}{b}`` -> ``(a)/(b)``; thousands separators dropped (``1,000``);
``12.0``/``12.50`` -> ``12``/``12.5``; a side that is a flat sum (only ``+``) or flat product
(only ``*``) has its operands sorted, since commuted operands are the same computation.
A different procedure for the same number (``2*6`` vs ``6+6``) stays different, as the rubric
demands.

Where neither step has a formula, the pair falls back to whitespace-normalised exact equality
(there is nothing computed to compare); where only one has, they are not equivalent.
"""

from __future__ import annotations

import re
from collections import Counter

from equiv.text.normalize import CALCULATOR_NOTE, THOUSANDS_COMMA, normalise_whitespace

__all__ = ["CALCULATOR_NOTE", "extract_formulas", "formula_signature", "formulas_equivalent", "normalise_formula"]

# CALCULATOR_NOTE (one whole note, equiv.text.normalize) is what steps are stripped of, or edited
# around. extract_formulas reads the notes' contents with its own lazy, multi-line _CALC.
_CALC = re.compile(r"<<(.*?)>>", re.S)
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
# Bare arithmetic such as "4 x 2 = 8" when a step has no notation at all.
_BARE = re.compile(
    r"(?<![\w.])(\$?\d[\d,]*(?:\.\d+)?\s*(?:[-+*/x×÷]\s*\$?\d[\d,]*(?:\.\d+)?\s*)+=\s*\$?\d[\d,]*(?:\.\d+)?)"
)
_FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")
_NUMBER = re.compile(r"\d+\.\d+")
_TIMES_X = re.compile(r"(?<=[\d)])x(?=[\d(])")


def extract_formulas(text: str) -> list[str]:
    """The raw formulas of a step: calculator notes first, else math spans, else bare arithmetic."""
    notes = [m.strip() for m in _CALC.findall(text) if m.strip()]
    if notes:
        return notes
    spans = [next(g for g in m.groups() if g is not None).strip() for m in _MATH.finditer(text)]
    spans = [s for s in spans if s]
    if spans:
        return spans
    return [m.strip() for m in _BARE.findall(text)]


def _number(match: re.Match[str]) -> str:
    text = match.group(0).rstrip("0").rstrip(".")
    return text or "0"


def _sort_flat(side: str) -> str:
    """Sort the operands of a flat sum or a flat product (commuted operands are the same)."""
    if any(c in side for c in "()-/^{}\\"):
        return side
    if "+" in side and "*" not in side:
        return "+".join(sorted(side.split("+")))
    if "*" in side and "+" not in side:
        return "*".join(sorted(side.split("*")))
    return side


def normalise_formula(formula: str) -> str:
    """Canonical spelling of one formula (see the module docstring for each rule)."""
    f = formula.lower()
    for token in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\ ", "$"):
        f = f.replace(token, "")
    f = f.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    f = re.sub(r"\s+", "", f)
    for token in ("\\times", "\\cdot", "×", "·", "∗"):
        f = f.replace(token, "*")
    for token in ("\\div", "÷"):
        f = f.replace(token, "/")
    f = f.replace("−", "-").replace("–", "-")
    f = _TIMES_X.sub("*", f)
    previous = None
    while previous != f:  # nested \frac
        previous = f
        f = _FRAC.sub(r"(\1)/(\2)", f)
    f = THOUSANDS_COMMA.sub("", f)
    f = _NUMBER.sub(_number, f)
    f = f.rstrip(".")
    return "=".join(_sort_flat(side) for side in f.split("="))


def formula_signature(text: str) -> Counter[str]:
    """The multiset of normalised formulas of a step."""
    return Counter(normalise_formula(f) for f in extract_formulas(text))


def formulas_equivalent(a: str, b: str) -> bool:
    """True when both steps compute the same formulas (or, with none, are the same text)."""
    fa, fb = formula_signature(a), formula_signature(b)
    if not fa and not fb:
        return normalise_whitespace(a) == normalise_whitespace(b)
    return fa == fb
