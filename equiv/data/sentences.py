"""A sentence splitter for math reasoning text that loses no characters.

EM refinement (``equiv.judge.em``) splits both steps of a pair into sentences, scores sentence
sub-pairs and removes the confidently equivalent ones. Two properties matter more than linguistic
finesse:

* **Exact recovery.** ``"".join(split_sentences(text)) == text`` for every string: whitespace after
  a sentence belongs to that sentence, so removing pieces and joining the rest never glues words
  together or loses a character of the kept ones.
* **Never inside math.** A boundary is never placed inside ``$...$``, ``$$...$$``, ``\\(...\\)``,
  ``\\[...\\]`` or ``\\begin{env}...\\end{env}`` (nested environments included), after a decimal
  point (``3.5``), after common abbreviations (``e.g.``, ``i.e.``, ``vs.``, ...) or after an
  enumerator at the start of a line (``1.``, ``a.``, ``iv.``).

Boundaries are ``.``/``!``/``?`` (optionally followed by closing quotes or brackets) followed by
whitespace and a next character that is not a lowercase letter, and line breaks.

Dollar signs are ambiguous in word problems (``$2 per egg``): inline ``$...$`` follows pandoc's
rule (the opening ``$`` is followed by a non-space, the closing one is preceded by a non-space and
not followed by a digit), and a ``$`` that starts a money amount followed by a word or the end of
a clause (``$80,000 and``, ``$4.00 per``, ``$3.``), or a GSM8K calculator note (``$<<2*3=6>>6``),
is currency, not math. An escaped ``\\$`` is never a delimiter. Unclosed delimiters protect
nothing (there is no math "inside" them to protect).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Iterator
from equiv.text.scan import MonotoneFinder

__all__ = ["ABBREVIATIONS", "SENTENCE_STARTERS", "protected_spans", "sentence_spans", "split_sentences"]

# Lowercased tokens (without the final period) after which a period never ends a sentence.
ABBREVIATIONS = frozenset(
    {
        "e.g", "i.e", "vs", "cf", "viz", "approx", "resp", "al", "fig", "figs", "eq", "eqs",
        "dr", "mr", "mrs", "ms", "prof", "thm", "lem", "incl", "w.r.t", "a.k.a", "s.t",
    }
)
# Left out on purpose: words that also end sentences in math text ("no", "p", "max", "min").

_BEGIN = re.compile(r"\\begin\{([^{}]*)\}")
_ENV_TAG = re.compile(r"\\(begin|end)\{([^{}]*)\}")
# A "$" that starts a money amount: digits (with thousands commas, optional cents) followed by
# whitespace and a word, or by clause punctuation and whitespace/end, or by the end of the text.
# (Possessive [\d,]*+: giving digits back never helps, and retrying the lookahead from each
# would be quadratic on "$1,,,,": issue #53.)
_CURRENCY = re.compile(r"\$(?:<<|\d[\d,]*+(?:\.\d+)?(?=\s+[^\W\d_]|[.,;:!?)]*\s|[.,;:!?)]*$))")
# (?<![.!?]): a run of stops is tried from its first; from each of its stops it is quadratic
_BOUNDARY = re.compile(r"(?<![.!?])[.!?]+[\"'\u201d\u2019)\]]*\s+|\n\s*")
_ENUMERATOR = re.compile(r"(?:\d{1,3}|[A-Za-z]|[ivxlcIVXLC]{1,6})")
# Capitalised words that start a sentence and almost never stand capitalised mid-sentence in
# solution text (names do, so names are not here). On gsm8k_equiv train these cut 176 of the 200
# joined two-line steps that have no punctuation between the lines, and none of 1837 one-line steps.
SENTENCE_STARTERS = (
    "He", "She", "They", "The", "So", "Then", "That", "This", "These", "Those", "There", "It", "We",
    "In", "If", "Therefore", "Thus", "Now", "Since", "After", "Adding", "Together", "Altogether",
    "Finally", "Next", "Also", "And", "But", "Her", "His", "Their", "Each", "Every", "For", "To",
    "When", "With", "At", "On", "Of", "From", "All", "Out", "Multiplying", "Subtracting", "Dividing",
)
_UNPUNCTUATED = re.compile(r"(?<=[0-9A-Za-z%)])[ \t]+(?=(?:" + "|".join(SENTENCE_STARTERS) + r")\b)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_LEADING_PUNCT = "([{\"'\u201c\u2018"


def _find_unescaped(text: str, needle: str, start: int) -> int:
    """Index of ``needle`` at or after ``start`` that is not preceded by an escaping backslash."""
    pos = start
    while True:
        pos = text.find(needle, pos)
        if pos < 0:
            return -1
        backslashes = 0
        k = pos - 1
        while k >= 0 and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return pos
        pos += 1


def _close_inline_dollar(text: str, start: int) -> int:
    """End (exclusive) of an inline ``$...$`` opened at ``start``, or -1 if it does not close.

    The first unescaped ``$`` after the opener decides: it closes when preceded by a non-space
    and not followed by a digit (pandoc's rule); otherwise the opener was not math. Inline math
    never spans a blank line.
    """
    n = len(text)
    j = start + 1
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "\n" and _BLANK_LINE.match(text, j):
            return -1
        if c == "$":
            closes = not text[j - 1].isspace() and not (j + 1 < n and text[j + 1].isdigit())
            return j + 1 if closes else -1
        j += 1
    return -1


def _environment_ends(text: str) -> dict[int, int]:
    """Each ``\\begin{name}``'s end (exclusive) at its matching ``\\end{name}``, honouring nesting,
    by start; an unclosed one is absent. One pass: a scan per opener is quadratic (issue #53)."""
    ends: dict[int, int] = {}
    open_: dict[str, list[int]] = {}
    for m in _ENV_TAG.finditer(text):
        if m.group(1) == "begin":
            open_.setdefault(m.group(2), []).append(m.start())
        elif open_.get(m.group(2)):
            ends[open_[m.group(2)].pop()] = m.end()
    return ends


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, disjoint ``(start, end)`` character ranges that no boundary may fall inside."""
    spans: list[tuple[int, int]] = []
    n = len(text)
    i = 0
    closers = MonotoneFinder(text)
    environment_ends: dict[int, int] | None = None
    while i < n:
        c = text[i]
        if c == "\\":
            nxt = text[i + 1 : i + 2]
            end = -1
            if nxt == "(":
                close = closers.find("\\)", i + 2)
                end = close + 2 if close >= 0 else -1
            elif nxt == "[":
                close = closers.find("\\]", i + 2)
                end = close + 2 if close >= 0 else -1
            elif _BEGIN.match(text, i):
                if environment_ends is None:
                    environment_ends = _environment_ends(text)
                end = environment_ends.get(i, -1)
            if end > 0:
                spans.append((i, end))
                i = end
            else:
                i += 2  # an escaped character (\$, \\, \{) or an unclosed opener
            continue
        if c == "$":
            if text.startswith("$$", i):
                close = _find_unescaped(text, "$$", i + 2)
                if close >= 0:
                    spans.append((i, close + 2))
                    i = close + 2
                else:
                    i += 2
                continue
            if i + 1 < n and not text[i + 1].isspace() and not _CURRENCY.match(text, i):
                end = _close_inline_dollar(text, i)
                if end > 0:
                    spans.append((i, end))
                    i = end
                    continue
        i += 1
    return spans


def _inside(spans: list[tuple[int, int]], starts: list[int], pos: int) -> bool:
    """Whether character index ``pos`` lies inside one of ``spans``."""
    k = bisect_right(starts, pos) - 1
    return k >= 0 and spans[k][0] <= pos < spans[k][1]


def _is_non_boundary_period(text: str, dot: int, sentence_start: int) -> bool:
    """A period after an abbreviation, or after an enumerator that opens its sentence or line
    (``1. First``), does not end a sentence; ``the answer is 5. Then`` does."""
    # what is before the period on its line in this sentence: read backwards from the period over
    # its last token only (splitting all of it for each period is quadratic: issue #53)
    start = max(text.rfind("\n", sentence_start, dot) + 1, sentence_start)
    token, alone = _last_token(text, start, dot)
    bare = token.lstrip(_LEADING_PUNCT)
    if bare.lower() in ABBREVIATIONS:
        return True
    # Enumerator: the only token of its sentence or line so far.
    return bool(bare) and alone and _ENUMERATOR.fullmatch(bare) is not None


def _last_token(text: str, start: int, end: int) -> tuple[str, bool]:
    """``text[start:end].split()[-1]`` (``""`` when there is none) and whether it is the only
    token, reading back from ``end`` over that token and the spaces around it."""
    stop = end
    while stop > start and text[stop - 1].isspace():
        stop -= 1
    begin = stop
    while begin > start and not text[begin - 1].isspace():
        begin -= 1
    before = begin
    while before > start and text[before - 1].isspace():
        before -= 1
    return text[begin:stop], before == start


def _unpunctuated_cuts(text: str) -> Iterator[tuple[int, int]]:
    """``(start, cut)`` of whitespace runs followed by a capitalised sentence starter, with no
    sentence punctuation before them (``... = 130,000 That means ...``)."""
    for m in _UNPUNCTUATED.finditer(text):
        yield m.start(), m.end()


def sentence_spans(text: str, *, unpunctuated: bool = False) -> list[tuple[int, int]]:
    """``(start, end)`` ranges of the sentences of ``text``; they tile the whole string.

    ``unpunctuated=True`` also cuts where a capitalised sentence starter (``He``, ``So``,
    ``Then``, ``The``, ... see ``SENTENCE_STARTERS``) follows a word, number or closing bracket
    with no punctuation in between -- how joined solution lines look in GSM8K-style data.
    """
    if not text:
        return []
    spans = protected_spans(text)
    starts = [s for s, _ in spans]
    candidates = [(m.end(), m.start(), m.group()) for m in _BOUNDARY.finditer(text)]
    if unpunctuated:
        candidates += [(cut, start, "") for start, cut in _unpunctuated_cuts(text)]
        candidates.sort()
    cuts = [0]
    for cut, start, group in candidates:
        if cut >= len(text) or cut <= cuts[-1]:
            continue
        if _inside(spans, starts, start) or _inside(spans, starts, cut - 1):
            continue
        if group and "\n" not in group:  # a line break always ends a sentence
            if text[cut].islower():
                continue
            punct = group.rstrip().rstrip("\"'\u201d\u2019)]")
            if punct == "." and _is_non_boundary_period(text, start, cuts[-1]):
                continue
        if text[cuts[-1] : cut].strip():
            cuts.append(cut)
    cuts.append(len(text))
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def split_sentences(text: str, *, unpunctuated: bool = False) -> list[str]:
    """Sentences of ``text`` with their trailing whitespace; ``"".join(result) == text``.

    Leading whitespace of the text stays with the first sentence. An empty string gives ``[]``.
    See :func:`sentence_spans` for ``unpunctuated``.
    """
    return [text[a:b] for a, b in sentence_spans(text, unpunctuated=unpunctuated)]
