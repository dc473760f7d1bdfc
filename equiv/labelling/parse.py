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


def _dictionaries(text: str) -> list[dict[str, Any]]:
    """Every top-level dictionary of ``text``: one that starts at a ``{`` outside any dictionary
    already read and parses as JSON or a Python literal. A dictionary quoted inside another's
    strings (a reasoning that cites ``{'result': 4}``) is part of that one, never an answer."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    covered = -1  # the end of the last dictionary read
    for start in [i for i, ch in enumerate(text) if ch == "{"]:
        if start < covered:
            continue
        obj, end_at = None, start
        try:
            obj, end_at = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            end = text.find("}", start)
            while end != -1 and obj is None:  # a Python dict: the shortest literal that parses
                try:
                    obj = ast.literal_eval(text[start:end + 1])
                    end_at = end + 1
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    end = text.find("}", end + 1)
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
