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
``12.0``/``12.50`` -> ``12``/``12.5``; a LaTeX label or unit (``\\text{ grams}``, ``\\mathrm{kg}``)
dropped, as the rubric counts ``$12`` and ``12 dollars`` as one number, and ``\\boxed{x}`` read as
``x`` (a small instruct model writes ``\\[ 3000 \\text{ grams} + 20 \\text{ grams} = 3020 \\]``
where a GSM8K solution writes ``<<3000+20=3020>>``); a side that is a flat sum (only ``+``) or flat product
(only ``*``) has its operands sorted, since commuted operands are the same computation.
A different procedure for the same number (``2*6`` vs ``6+6``) stays different, as the rubric
demands.

Where neither step has a formula, the pair falls back to whitespace-normalised exact equality
(there is nothing computed to compare); where only one has, they are not equivalent.
"""

from __future__ import annotations

import re
from collections import Counter

from equiv.text.normalize import BOXED, CALCULATOR_NOTE, normalise_whitespace, without_thousands_commas
from equiv.text.scan import MonotoneFinder

__all__ = ["CALCULATOR_NOTE", "extract_formulas", "formula_signature", "formulas_equivalent", "latex_math", "normalise_formula"]

# CALCULATOR_NOTE (one whole note, equiv.text.normalize) is what steps are stripped of, or edited
# around. extract_formulas reads the notes' contents as ``<<(.*?)>>`` (lazy, multi-line) would,
# and the math spans as _MATH would, both by str.find: the regular expressions rescan to the end
# of the text from every unclosed opener (quadratic; issue #53). _MATH, _BARE and _FRAC stay as
# the definitions the linear readers keep to (tests/test_linear_time.py compares them).
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)  # what _math_spans reads
# Bare arithmetic such as "4 x 2 = 8" when a step has no notation at all.
_AMOUNT = r"\$?\d[\d,]*(?:\.\d+)?"
_BARE = re.compile(rf"(?<![\w.])({_AMOUNT}\s*(?:[-+*/x×÷]\s*{_AMOUNT}\s*)+=\s*{_AMOUNT})")
_BARE_START = re.compile(r"(?<![\w.])\$?\d")  # where _BARE can match
# _BARE at one start, possessive: giving operations back never finds the "=" (the next character is
# then an operator), and re keeps what it could give back at a cost that grows faster than the chain
_BARE_AT = re.compile(rf"(?<![\w.])({_AMOUNT}\s*(?:[-+*/x×÷]\s*{_AMOUNT}\s*)++=\s*{_AMOUNT})")
_CHAIN = re.compile(rf"{_AMOUNT}\s*(?:[-+*/x×÷]\s*{_AMOUNT}\s*)*+")  # _BARE without its "= result"
_FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")  # what _expand_fracs rewrites, innermost first
_NUMBER = re.compile(r"(?<!\d)\d+\.\d+")  # (?<!\d): a run of digits is tried once, not from each digit
_TIMES_X = re.compile(r"(?<=[\d)])x(?=[\d(])")
# A LaTeX label or unit: \text{...} and its kin hold words, never the computation (no nested brace).
_LABEL = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|operatorname)\{[^{}]*\}")
_SPECIAL = re.compile(r"[$\\]")
# (opener, closer, least content): _MATH's alternatives in the order it tries them
_MATH_DELIMITERS = (("$$", "$$", 1), ("$", "$", 1), ("\\(", "\\)", 1), ("\\[", "\\]", 1))


def _calculator_notes(text: str) -> list[str]:
    """``re.findall(r"<<(.*?)>>", text, re.S)``, in linear time."""
    finder, out, pos = MonotoneFinder(text), [], 0
    while (start := finder.find("<<", pos)) >= 0:
        end = finder.find(">>", start + 2)
        if end < 0:
            break
        out.append(text[start + 2:end])
        pos = end + 2
    return out


def _math_spans(text: str, delimiters: tuple[tuple[str, str, int], ...] = _MATH_DELIMITERS,
                special: re.Pattern[str] = _SPECIAL) -> list[str]:
    """The contents of :data:`_MATH`'s matches (its ``finditer``), in linear time: at each ``$`` or
    backslash, the first of its alternatives whose closer follows (after at least one character).
    ``delimiters`` and ``special`` (where an opener can start) narrow it (:func:`latex_math`)."""
    finder, out, pos = MonotoneFinder(text), [], 0
    while (found := special.search(text, pos)) is not None:
        at = found.start()
        for opener, closer, least in delimiters:
            if text.startswith(opener, at):
                end = finder.find(closer, at + len(opener) + least)
                if end >= 0:
                    out.append(text[at + len(opener):end])
                    pos = end + len(closer)
                    break
        else:
            pos = at + 1
    return out


_LATEX_DELIMITERS = _MATH_DELIMITERS[2:]  # \( \) and \[ \]
_BACKSLASH = re.compile(r"\\")


def latex_math(text: str) -> list[str]:
    """The contents of the step's ``\\(...\\)`` and ``\\[...\\]`` spans, in order, in linear time.
    Unlike :func:`extract_formulas` it never reads ``$`` as a delimiter: in GSM8K prose ``$`` is
    currency ("$50 x $10 = $500" is not the formula "50 x"), and a policy that writes algebra
    writes it in these two."""
    return _math_spans(text, _LATEX_DELIMITERS, _BACKSLASH)


def _bare_arithmetic(text: str) -> list[str]:
    """``_BARE.findall(text)``, in linear time. A start that fails fails for every start up to the
    end of its chain of operations (they share the chain, and with it the missing ``= result``),
    so the search resumes there instead of rescanning the chain from each of its numbers."""
    out, pos = [], 0
    while (start := _BARE_START.search(text, pos)) is not None:
        found = _BARE_AT.match(text, start.start())
        if found is not None:
            out.append(found.group(1))
            pos = found.end()
        else:
            pos = _CHAIN.match(text, start.start()).end()  # type: ignore[union-attr]  # the start matched
    return out


def extract_formulas(text: str) -> list[str]:
    """The raw formulas of a step: calculator notes first, else math spans, else bare arithmetic."""
    notes = [m.strip() for m in _calculator_notes(text) if m.strip()]
    if notes:
        return notes
    spans = [s.strip() for s in _math_spans(text)]
    spans = [s for s in spans if s]
    if spans:
        return spans
    return [m.strip() for m in _bare_arithmetic(text)]


def _expand_fracs(f: str) -> str:
    """``_FRAC.sub(r"(\\1)/(\\2)", f)`` repeated until nothing changes (nested fractions), in one
    pass. A ``\\frac{a}{b}`` whose two groups hold no brace is rewritten as soon as its last brace
    is read; the rewrite holds no brace, so the fraction around it can then be rewritten in turn.
    Rewrites never overlap, so the order does not change the result (the loop it replaces took
    one pass over the text per level of nesting)."""
    if "\\frac{" not in f:
        return f
    pieces: list[str] = []
    braces: list[tuple[str, int, int]] = []  # (brace, index in pieces, index in f) of the braces kept
    pos = 0
    for brace in re.finditer(r"[{}]", f):
        at = brace.start()
        if at > pos:
            pieces.append(f[pos:at])
        pos = at + 1
        if (f[at] == "}" and len(braces) >= 3 and [b[0] for b in braces[-3:]] == ["{", "}", "{"]
                and braces[-2][2] == braces[-1][2] - 1 and braces[-3][2] >= 5
                and f.startswith("\\frac", braces[-3][2] - 5)):
            _, b_open, _ = braces.pop()
            _, a_close, _ = braces.pop()
            _, a_open, _ = braces.pop()
            pieces[a_open - 1] = pieces[a_open - 1][:-5]  # the "\\frac" before the first brace
            pieces[a_open], pieces[a_close], pieces[b_open] = "(", ")/", "("
            pieces.append(")")
            continue
        braces.append((f[at], len(pieces), at))
        pieces.append(f[at])
    pieces.append(f[pos:])
    return "".join(pieces)


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
    f = BOXED.sub(r"\1", _LABEL.sub("", formula.lower()))
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
    f = _expand_fracs(f)  # nested \frac too
    f = without_thousands_commas(f)
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
