"""Number and word normalisation for step text: the one owner of how ``equiv.text`` reads a number
or a word, so the claim guard (:mod:`equiv.text.guard`), the ``formula`` strategy
(:mod:`equiv.text.formula`) and the same-step key (:mod:`equiv.text.formatting`) cannot drift apart.

- **Calculator notes** (:data:`CALCULATOR_NOTE`, ``<<4*2=8>>``): one whole note, ``<<[^<>]*>>``.
  Its body holds no ``<`` or ``>``, so a step with an unclosed ``<<`` (a truncated sample) loses
  only the closed note after it, not the prose in between, as ``<<[^>]*>>`` would.
- **Boxed answers** (:data:`BOXED`, ``\\boxed{42}``): one box whose content holds no brace; the
  ``formula`` strategy reads its content as the formula, the restatement rule its number.
- **Thousands separators** (:data:`THOUSANDS_COMMA`, :data:`THOUSANDS`): a comma before each group
  of three digits (``1,200``); the guard, which reads the prose's numbers as values, also takes a
  space (``17 500``, as some GSM8K solutions write), while the same-step key keeps a space, which
  can also part two numbers ("2 100-page books").
- **Numbers** (:func:`number_value`, :func:`step_numbers`): read as exact decimals, ``$5`` = ``5``,
  ``12.0`` = ``12``, ``99.00000000000001`` = ``99`` (a calculator's float, rounded to
  :data:`DECIMAL_PLACES`), ``20%`` also as ``0.2``.
- **Words** (:func:`stem`, :func:`is_function_word`): lower case, a possessive ``'s`` and a plural
  ``s`` dropped; a function word is looked up both as written and as stemmed, so "this", "does"
  and "thus" (stemmed "thi", "doe", "thu") are function words too.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

_WS = re.compile(r"\s+")

CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")
# A LaTeX box whose content holds no brace (\boxed{\frac{1}{2}} is not one): one pass, no backtracking.
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")  # 1,200
THOUSANDS = re.compile(r"(?<=\d)[, ](?=\d{3}(?!\d))")      # 1,200 and 1 200


def without_thousands_commas(text: str) -> str:
    """``text`` with every thousands comma removed (``1,320`` -> ``1320``), nothing else changed: the
    text the learned judge reads (:func:`equiv.data.tokenize.tokenize_pairs`). A space between digits
    stays: it may part two numbers. Linear: one pass, a fixed look-around at each comma."""
    return THOUSANDS_COMMA.sub("", text)


def unescaped_dollars(text: str) -> str:
    """``text`` with each Markdown-escaped dollar sign read as the ``$`` it shows (``\\$70`` ->
    ``$70``), nothing else changed. Instruct models writing Markdown escape the sign so that a
    renderer does not open a math span at it (Qwen2.5-Coder: ``\\$70 + \\$50 = \\$120``); the
    readers of a step's arithmetic and conclusion look for ``$`` before a number, and a backslash
    there hid the computation from them."""
    return text.replace("\\$", "$")


# A number as the steps write it: thousands by a space ("17 500") or a comma, decimals.
DIGITS = r"\d{1,3}(?: \d{3})+(?!\d)|\d[\d,]*(?:\.\d+)?"
NUMBER = re.compile(rf"(?<![\w.])({DIGITS}|\.\d+)(\s*%)?")
# Six places: a calculator note's float error (1e-14) vanishes, and no GSM8K quantity needs more.
DECIMAL_PLACES = 6
_QUANTUM = Decimal(1).scaleb(-DECIMAL_PLACES)

# Numbers a question may give in words, which a step may restate as digits.
NUMBER_WORDS: dict[str, Decimal] = {
    w: Decimal(v) for w, v in {
        "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
        "ten": 10, "eleven": 11, "twelve": 12, "twice": 2, "double": 2, "triple": 3, "half": "0.5",
        "quarter": "0.25", "dozen": 12, "hundred": 100, "thousand": 1000}.items()}
ORDINAL_WORDS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
                 "eighth": 8, "ninth": 9, "tenth": 10, "last": -1}

WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|\d[\d,.]*")  # words and numbers: an alignment's units

# Words that carry no claim of their own: swapping one for another is rewording.
FUNCTION_WORDS = frozenset("""
a an the this that these those there here it its it's he she him her his hers they them their theirs
we us our you your i me my mine one ones each every all both some any another other such same
is are was were be been being am has have had having do does did done will would shall should can
could may might must get gets got
and or but so thus then therefore hence since because as if than also too now still yet just only
of to in on at by for with from into onto out up down over about after before per via
which who whom whose what when where how why
not no nor
total totally altogether overall together
""".split())


def normalise_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends (spacing is formatting)."""
    return _WS.sub(" ", text).strip()


def strip_notes(text: str, replacement: str = " ") -> str:
    """``text`` with its calculator notes replaced (they repeat the prose's computation)."""
    return CALCULATOR_NOTE.sub(replacement, text)


def quantize(value: Decimal) -> Decimal:
    """``value`` rounded to :data:`DECIMAL_PLACES` and without trailing zeros (``12.0`` -> ``12``)."""
    return value.quantize(_QUANTUM).normalize()


def number_value(digits: str) -> Decimal | None:
    """The value of a number as written (``"1,200"``, ``"17 500"``, ``"12.50"``), or ``None``."""
    try:
        value = Decimal(THOUSANDS.sub("", digits).rstrip(","))
        # quantize needs the digits to fit the context's precision (28): a run of 23+ digits
        # before the point (a weak model's "1000000000000000000000000") is not a number we read
        return quantize(value) if value.is_finite() else None
    except InvalidOperation:
        return None


@functools.lru_cache(maxsize=16384)
def step_numbers(text: str) -> frozenset[Decimal]:
    """The numbers a text states, as values (a percentage also as its fraction: ``20%`` -> 20, 0.2).
    Cached (a frozenset, so no caller can change what the next one reads): the guard reads each
    sibling's numbers once per pair it is in."""
    out: set[Decimal] = set()
    for digits, percent in NUMBER.findall(text):
        value = number_value(digits)
        if value is None:
            continue
        out.add(value)
        if percent:
            out.add((value / 100).normalize())
    return frozenset(out)


def stem(word: str) -> str:
    """Lower case, a possessive ``'s`` and a plural ``s`` dropped ("Tom's" -> "tom", "eggs" -> "egg")."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


# Stemmed too, so a stemmed word is looked up against its own form ("this" stems to "thi").
_FUNCTION_FORMS = FUNCTION_WORDS | {stem(w) for w in FUNCTION_WORDS}


def is_function_word(word: str) -> bool:
    """Whether ``word`` (as written or already stemmed) is a function word."""
    return word.lower() in _FUNCTION_FORMS
