"""Mark where two steps differ, so a small cross-encoder reads the difference and not the sameness.

Most pairs a judge meets during search share almost all their words: siblings restate the same
calculation and differ in one number, one unit or one direction word ("… = 30 dollars" against
"… = 30 times"). Such a one-claim change is what decides "not equivalent", and it is what the
fine-tuned 6-layer MiniLM missed most on the calibration split: false merges of pairs that
compute the same thing but claim different things. :func:`mark_differences` wraps each run of
words that the other step does not share in ``«`` ``»`` (and puts an empty ``«»`` where the
other step has words this one lacks), so the difference is visible in the input itself.

Words are compared after light normalisation (case; thousands separators and trailing decimal
zeros in numbers), so ``240,000`` against ``240000`` is not marked. The markers are absent from
the GSM8K step pairs and are single tokens in the BERT vocabulary the bundled MiniLM uses. A
judge trained on marked pairs must be served marked pairs: the flag travels with the exported
judge (``mark_differences`` in its ``equiv`` settings) and :func:`equiv.data.tokenize.tokenize_pairs`
applies it for training and inference alike.
"""

from __future__ import annotations

import difflib
import re

OPEN, CLOSE = "«", "»"
EMPTY = f" {OPEN}{CLOSE} "

# A number (digits with optional grouping commas and decimals), a word, or one other character.
_WORD = re.compile(r"\d[\d,]*(?:\.\d+)?|\w+|[^\w\s]")


def _compare_form(word: str) -> str:
    """The form two words are compared in: lower case; numbers without grouping or trailing zeros."""
    w = word.lower()
    if w[:1].isdigit():
        w = w.replace(",", "")
        if "." in w:
            w = w.rstrip("0").rstrip(".")
    return w


def _wrap(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each (start, end) character span wrapped in markers; an empty span gets ``«»``."""
    out: list[str] = []
    last = 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(f"{OPEN} {text[start:end]} {CLOSE}" if start != end else EMPTY)
        last = end
    out.append(text[last:])
    return "".join(out)


def mark_differences(first: str, second: str) -> tuple[str, str]:
    """Both steps with the words they do not share wrapped in ``«`` ``»`` (see the module docstring).

    Identical steps (after normalisation) come back unchanged; so does everything outside the
    marked runs, spacing included.
    """
    words_a = list(_WORD.finditer(first))
    words_b = list(_WORD.finditer(second))
    matcher = difflib.SequenceMatcher(
        None, [_compare_form(m.group()) for m in words_a], [_compare_form(m.group()) for m in words_b], autojunk=False
    )
    spans_a: list[tuple[int, int]] = []
    spans_b: list[tuple[int, int]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            spans_a.append(_char_span(words_a, i1, i2, len(first)))
            spans_b.append(_char_span(words_b, j1, j2, len(second)))
    return _wrap(first, spans_a), _wrap(second, spans_b)


def _char_span(words: list[re.Match[str]], start: int, end: int, text_length: int) -> tuple[int, int]:
    """Characters covered by words[start:end]; where the run is empty, the point it would start at."""
    if start < end:
        return words[start].start(), words[end - 1].end()
    position = words[start].start() if start < len(words) else text_length
    return position, position
