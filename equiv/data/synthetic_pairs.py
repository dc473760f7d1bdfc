"""Synthetic training pairs: one-claim edits (hard negatives) and meaning-preserving rewrites.

On real GSM8K step pairs the fine-tuned judge almost never misses an equivalent pair; its
errors are false merges of MathEquiv level 1 ("largely overlapping, but a computation,
quantity, intermediate result or conclusion differs"): two steps with the same calculator note
that *claim* different things -- "= 30 dollars" against "= 30 times", "$0.05 from the nickels"
against "$2.00 in nickels", "increase" against "decrease". A false merge in search can cut the
only correct path, so these are the errors that matter.

This module makes more examples of exactly that kind from pairs labelled equivalent: it copies
the pair and edits ``sentence2`` in one place so that its claim changes while most of the text,
and every calculator note, stays the same (a *claim edit*, labelled :data:`CLAIM_EDIT_LEVEL`):

- ``number``: a number written in the prose (outside ``<<...>>`` notes) is changed;
- ``antonym``: a direction word is swapped for its opposite (more/fewer, gave/received, ...);
- ``unit``: the word after the step's last number is replaced by a unit the problem's question
  uses after one of its numbers and the step does not ("30 dollars" -> "30 hours").

Near-identical negatives alone would teach "one word differs, so not equivalent", which is wrong
for restatements, so each chosen pair also yields a *rewrite* of ``sentence2`` that keeps its
meaning (labelled :data:`REWRITE_LEVEL`, exactly equivalent, as the rubric's "only
wording/format differs"):

- ``commute``: the operands of one prose ``a + b`` or ``a * b`` (outside notes) swapped;
- ``filler``: a leading "So"/"Thus"/"Therefore"/"Then" swapped or dropped, or one added.

Each copy gets an ``id`` ``<problem>-syn<k>`` (it stays with its problem in
:func:`equiv.data.records.problem_key`) and ``synthetic`` naming the edit. These pairs are
synthetic: for training only, made after the calibration split from training problems alone,
never mixed into a file that measures a judge.
Pure functions and a seeded :class:`random.Random`: the same records and seed give the same pairs.
"""

from __future__ import annotations

import random
import re
from typing import Callable, Sequence

from equiv.data.records import PairRecord, problem_key, question_of
from equiv.text.formula import CALCULATOR_NOTE

CLAIM_EDIT_LEVEL = 1
REWRITE_LEVEL = 4
CLAIM_EDITS = ("number", "antonym", "unit")
REWRITES = ("commute", "filler")

_NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
_WORD = re.compile(r"[A-Za-z]+")
# Direction words whose swap reverses a step's claim, each pair listed once and used both ways
# (a word in two pairs, such as "shorter" or "lost", maps back to its later partner).
_ANTONYM_PAIRS = (
    ("more", "fewer"), ("increase", "decrease"), ("increased", "decreased"), ("increases", "decreases"),
    ("gave", "received"), ("gives", "receives"), ("give", "receive"), ("bought", "sold"), ("buys", "sells"),
    ("buy", "sell"), ("gained", "lost"), ("gains", "loses"), ("added", "removed"), ("adds", "removes"),
    ("older", "younger"), ("taller", "shorter"), ("longer", "shorter"), ("before", "after"),
    ("earns", "spends"), ("earned", "spent"), ("profit", "loss"), ("faster", "slower"),
    ("first", "last"), ("won", "lost"), ("cheaper", "dearer"), ("less", "more"),
)
_ANTONYMS = {a: b for a, b in _ANTONYM_PAIRS} | {b: a for a, b in _ANTONYM_PAIRS if b not in {"more"}}
# Words that cannot stand for a quantity's unit (so a unit edit never produces "30 the").
_NOT_UNITS = frozenset(
    "a an the and or but of to in on at for with by from is are was were be been has have had he she "
    "it they we you i his her their its this that these those there then than so if how many much what "
    "which who whom each every all some any more less per total does do did will would can could".split()
)


def _outside_notes(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are not inside a ``<<...>>`` calculator note."""
    spans, start = [], 0
    for m in CALCULATOR_NOTE.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return spans


def _prose_numbers(text: str) -> list[re.Match[str]]:
    found = []
    for lo, hi in _outside_notes(text):
        found.extend(m for m in _NUMBER.finditer(text, lo, hi))
    return found


def _changed_number(token: str, rng: random.Random) -> str:
    value = float(token.replace(",", ""))
    options = [value + 1, value * 2, value + 10] + ([value - 1] if value >= 2 else [])
    new = rng.choice(options)
    decimals = len(token.split(".")[1]) if "." in token else 0
    return f"{new:.{decimals}f}" if decimals else str(int(new))


def edit_number(text: str, question: str, rng: random.Random) -> str | None:
    """Change one number written in the prose; the last one (the step's claim) half the time."""
    numbers = _prose_numbers(text)
    if not numbers:
        return None
    m = numbers[-1] if rng.random() < 0.5 else rng.choice(numbers)
    return text[: m.start()] + _changed_number(m.group(), rng) + text[m.end():]


def edit_antonym(text: str, question: str, rng: random.Random) -> str | None:
    """Swap one direction word (outside notes) for its opposite, keeping its capitalisation."""
    hits = []
    for lo, hi in _outside_notes(text):
        hits.extend(m for m in _WORD.finditer(text, lo, hi) if m.group().lower() in _ANTONYMS)
    if not hits:
        return None
    m = rng.choice(hits)
    word = _ANTONYMS[m.group().lower()]
    if m.group()[0].isupper():
        word = word[0].upper() + word[1:]
    return text[: m.start()] + word + text[m.end():]


_UNIT_AFTER_NUMBER = re.compile(r"\d(?:[\d,.]*\d)?%?\s+([A-Za-z]+)")


def edit_unit(text: str, question: str, rng: random.Random) -> str | None:
    """Replace the word after the step's last number with another unit the question uses."""
    numbers = _prose_numbers(text)
    if not numbers:
        return None
    after = _WORD.match(text, numbers[-1].end() + 1) if text[numbers[-1].end(): numbers[-1].end() + 1] == " " else None
    if after is None or after.group().lower() in _NOT_UNITS:
        return None
    used = {w.lower() for w in _WORD.findall(text)}
    candidates = sorted({w.lower() for w in _UNIT_AFTER_NUMBER.findall(question)} - used - _NOT_UNITS)
    if not candidates:
        return None
    return text[: after.start()] + rng.choice(candidates) + text[after.end():]


_PROSE_OPERATION = re.compile(r"(?<![\w.$])(\$?\d+(?:\.\d+)?)(\s*)([+*x×])(\s*)(\$?\d+(?:\.\d+)?)(?![\w.]|\s*[*/x×^])")


def rewrite_commute(text: str, question: str, rng: random.Random) -> str | None:
    """Swap the operands of one prose ``a + b`` / ``a * b`` (not preceded or followed by ``*``, ``/``)."""
    hits = []
    for lo, hi in _outside_notes(text):
        hits.extend(m for m in _PROSE_OPERATION.finditer(text, lo, hi)
                    if m.group(1) != m.group(5) and not text[:m.start()].rstrip().endswith(("-", "/", "*")))
    if not hits:
        return None
    m = rng.choice(hits)
    swapped = m.group(5) + m.group(2) + m.group(3) + m.group(4) + m.group(1)
    return text[: m.start()] + swapped + text[m.end():]


_FILLERS = ("So", "Thus", "Therefore", "Then")
_OPENERS = frozenset("the he she they there it this that in for if each a an we his her their she's he's "
                     "first next after since at on when one".split())
_LEADING_FILLER = re.compile(r"^(So|Thus|Therefore|Then|Hence),?\s+")


def rewrite_filler(text: str, question: str, rng: random.Random) -> str | None:
    """Swap or drop a leading filler word, or add one: wording only, the rubric's level 4."""
    m = _LEADING_FILLER.match(text)
    if m:
        rest = text[m.end():]
        choice = rng.choice([f for f in _FILLERS if f != m.group(1)] + [""])
        if not choice:
            return rest[:1].upper() + rest[1:]
        return f"{choice}, {rest}" if choice != "Then" else f"Then {rest}"
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    if not first[:1].isupper():
        return None
    # Lower-case only a common sentence opener; a name ("Karen earns") keeps its capital.
    opener = first.lower() in _OPENERS
    return f"{rng.choice(_FILLERS[:3])}, {text[:1].lower() if opener else text[:1]}{text[1:]}"


_EDITORS: dict[str, Callable[[str, str, random.Random], str | None]] = {
    "number": edit_number, "antonym": edit_antonym, "unit": edit_unit,
    "commute": rewrite_commute, "filler": rewrite_filler,
}


def _first_edit(record: PairRecord, names: Sequence[str], rng: random.Random) -> tuple[str, str] | None:
    """``(edit name, edited sentence2)`` for the first of ``names`` (in random order) that applies."""
    question = question_of(record)
    for name in rng.sample(list(names), len(names)):
        edited = _EDITORS[name](record.sentence2, question, rng)
        if edited is not None and edited != record.sentence2:
            return name, edited
    return None


def _synthetic_copy(record: PairRecord, k: str, name: str, sentence2: str, level: int) -> PairRecord:
    extra = dict(record.extra)
    rid = extra.get("id")
    if isinstance(rid, str) and "-" in rid:  # an id like the source's, with its problem key
        extra["id"] = f"{problem_key(record)}-syn{k}"
    extra["synthetic"] = name
    return PairRecord(record.sentence1, sentence2, level, record.reasoning_step, extra,
                      f"{record.source} (synthetic {name})")


def synthetic_pairs(
    records: Sequence[PairRecord],
    *,
    equivalent_levels: Sequence[int],
    fraction: float,
    seed: int = 0,
) -> list[PairRecord]:
    """A claim edit and a rewrite of ``fraction`` of the equivalent ``records`` (see the module doc).

    Each chosen pair yields at most one claim edit (level 1) and one rewrite (level 4), each drawn
    among the edits that apply to its ``sentence2``; pairs no edit applies to add nothing.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    rng = random.Random(seed)
    levels = set(equivalent_levels)
    equivalent = [r for r in records if r.result in levels]
    chosen = rng.sample(equivalent, round(len(equivalent) * fraction))
    out = []
    for k, record in enumerate(chosen):
        for names, level, tag in ((CLAIM_EDITS, CLAIM_EDIT_LEVEL, "e"), (REWRITES, REWRITE_LEVEL, "r")):
            found = _first_edit(record, names, rng)
            if found is not None:
                out.append(_synthetic_copy(record, f"{k}{tag}", found[0], found[1], level))
    return out
