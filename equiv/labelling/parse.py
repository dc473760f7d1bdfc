"""Reading the labeller's answer: the dictionary ``{"reasoning_step": "...", "result": <int>}``.

Models asked to "explain, reflect, then answer" often write prose or a code fence around the
dictionary, or a Python dict with single quotes. The *last* dictionary in the text that has a
``result`` is the answer (an explanation may quote an earlier one); ``result`` must be a level
0-4 (an integer, or a string or float holding one). Anything else is a :class:`MalformedAnswer`
with a short reason, which the run records with the raw text and retries.

A server's structured output (JSON schema) makes the whole text the dictionary; with a choice of
levels it is a bare digit, read when ``bare_level`` is set.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass
from typing import Any

LEVELS = (0, 1, 2, 3, 4)
_FENCE = re.compile(r"```(?:json|python)?", re.IGNORECASE)


class MalformedAnswer(ValueError):
    """The answer held no usable dictionary; ``str()`` is a short reason for the record."""


@dataclass(frozen=True)
class Answer:
    """A parsed answer: the level and the model's explanation ("" when it gave none)."""

    result: int
    reasoning: str


def _level(value: Any) -> int:
    if isinstance(value, bool):
        raise MalformedAnswer(f"'result' is {value!r}, not a level 0-4")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value not in LEVELS:
        raise MalformedAnswer(f"'result' is {value!r}, not a level 0-4")
    return value


MAX_DEPTH = 200
"""Deepest nesting of braces read as an answer (Python's parser refuses more; no answer needs it)."""

_EVENT = re.compile(r"[{}'\"#]")  # what the brace scanner stops at
_NEWLINE = re.compile(r"[\r\n]")


class _Braces:
    """Where each ``{`` of a text closes, read as Python reads a literal (strings with their
    escapes, triple quotes and comments hide braces), and how deeply it nests: in time linear in
    the text over all its braces (issue #53).

    A scan starts afresh at each ``{``, outside any string, as ``ast.literal_eval`` of a slice
    from it would. What a scan finds from a position it reads outside strings depends on that
    position only, so every such position is remembered with the ``}`` that closes its level (and
    the nesting to it); a later scan that reaches one (a ``{`` inside a string of an earlier scan
    is a start of its own) stops there. Where a string ends depends on its opening quote only.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._close: dict[int, int] = {}  # a position read outside strings -> the "}" of its level, -1: none
        self._depth: dict[int, int] = {}  # ... -> how deeply braces nest from it to that "}"
        # the quotes that end a string: those after an even run of backslashes
        self._enders: dict[str, list[int]] = {"'": [], '"': [], "'''": [], '"""': []}
        for quote in re.finditer(r"['\"]", text):
            at, backslashes = quote.start(), 0
            while at - backslashes > 0 and text[at - backslashes - 1] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                self._enders[text[at]].append(at)
                if text.startswith(text[at] * 3, at):
                    self._enders[text[at] * 3].append(at)
        self._newlines = [m.start() for m in _NEWLINE.finditer(text)]

    def _after(self, positions: list[int], start: int) -> int:
        k = bisect.bisect_left(positions, start)
        return positions[k] if k < len(positions) else -1

    def _string_end(self, at: int) -> int:
        """The index of the last quote of the string opened at ``at``, or -1 (never closed)."""
        quote = self.text[at] * 3 if self.text.startswith(self.text[at] * 3, at) else self.text[at]
        end = self._after(self._enders[quote], at + len(quote))
        return end + len(quote) - 1 if end >= 0 else -1

    def close(self, opening: int) -> tuple[int, int]:
        """``(index of the "}" that closes the "{" at opening or -1, depth of its braces)``."""
        if opening + 1 in self._close:
            return self._close[opening + 1], 1 + self._depth[opening + 1]
        # per open level, in order: the positions read at it, and the depth of each brace closed in it
        levels: list[list[tuple[int, int]]] = [[(opening + 1, -1)]]  # (position, -1) or (-1, depth)
        x = opening + 1
        while True:
            closed, depth = self._close.get(x), self._depth.get(x, 0)
            if closed is None:
                event = _EVENT.search(self.text, x)
                at = event.start() if event else -1
                char = self.text[at] if event else ""
                if char == "{":
                    x = at + 1
                    levels.append([(x, -1)])
                    continue
                if char in ("'", '"', "#"):
                    end = self._string_end(at) if char != "#" else self._after(self._newlines, at)
                    if end >= 0:
                        x = end + 1
                        levels[-1].append((x, -1))
                        continue
                closed = at if char == "}" else -1  # "}" closes the level; else nothing ever does
            for position, nested in reversed(levels.pop()):  # the deepest nesting from each position on
                depth = max(depth, nested)
                if position >= 0:
                    self._close[position], self._depth[position] = closed, depth
            if closed < 0:
                for level in levels:
                    for position, _ in level:
                        if position >= 0:
                            self._close[position], self._depth[position] = -1, 0
                return -1, 0
            if not levels:
                return closed, 1 + depth
            x = closed + 1
            levels[-1] += [(-1, 1 + depth), (x, -1)]


def _dictionaries(text: str) -> list[dict[str, Any]]:
    """Every top-level dictionary of ``text``: one that starts at a ``{`` outside any dictionary
    already read and parses as JSON or a Python literal. A dictionary quoted inside another's
    strings (a reasoning that cites ``{'result': 4}``) is part of that one, never an answer.

    From each ``{`` only the slice to the ``}`` that closes it (:class:`_Braces`) is tried: a
    shorter one is unbalanced, and a longer one holds it whole, so neither parses where it does
    not. (Trying every ``}`` after every ``{`` took cubic time: issue #53.) Braces nested deeper
    than :data:`MAX_DEPTH` are no answer."""
    decoder = json.JSONDecoder()
    braces = _Braces(text)
    found: list[dict[str, Any]] = []
    covered = -1  # the end of the last dictionary read
    for start in [i for i, ch in enumerate(text) if ch == "{"]:
        if start < covered:
            continue
        end, depth = braces.close(start)
        if end < 0 or depth > MAX_DEPTH:
            continue
        obj, end_at = None, end + 1
        try:
            obj, end_at = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
            try:
                obj = ast.literal_eval(text[start:end + 1])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass  # TypeError: "{{}}" (a dict in a set)
        if isinstance(obj, dict):
            found.append(obj)
            covered = end_at
    return found


def parse_answer(text: str, *, bare_level: bool = False) -> Answer:
    """The answer in ``text`` (module docstring), or :class:`MalformedAnswer` saying why not."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedAnswer("empty answer")
    if bare_level and text.strip() in {str(level) for level in LEVELS}:
        return Answer(int(text.strip()), "")
    dictionaries = [d for d in _dictionaries(_FENCE.sub("", text)) if "result" in d]
    if not dictionaries:
        raise MalformedAnswer("no dictionary with a 'result' in the answer")
    chosen = dictionaries[-1]
    reasoning = chosen.get("reasoning_step", "")
    if not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning, ensure_ascii=False)
    return Answer(_level(chosen["result"]), reasoning)
