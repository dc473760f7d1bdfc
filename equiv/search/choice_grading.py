"""Multiple-choice grading (CommonsenseQA): the chosen letter against the answer key.

:func:`extract_choice` looks, in order, for the last ``\\boxed{...}`` holding a choice letter
(``\\boxed{B}``, ``\\boxed{(B)}``, ``\\boxed{B. bank}``), the last "answer is (B)" / "answer: B",
and a solution that is nothing but a letter (``"B"``, ``"(B)"``, ``"B."``). A capital letter
elsewhere in the text (the article "A") is not taken as a choice. Pure string handling.
"""

from __future__ import annotations

import re

LETTERS = "ABCDEFGHIJ"
_LETTER = rf"\(?([{LETTERS}])\)?(?![A-Za-z])"
# Each optional token takes the spaces after it, so no two runs of spaces stand side by side
# (r"\s*:?\s*" tries every split of a run: quadratic, worse for three; issue #53).
_BOXED = re.compile(r"\\boxed\s*\{\s*(?:\\text\{\s*)?" + _LETTER)
_ANSWER_IS = re.compile(r"(?i:answer\s*(?:is|:)\s*(?::\s*)?(?:option\s*|choice\s*)?)(?:\$\s*)?" + _LETTER)
_ALONE = re.compile(r"\s*" + _LETTER + r"\s*(?:[.)]\s*)?")


def extract_choice(text: str | None) -> str | None:
    """The chosen letter in ``text`` (module docstring for the order), or None."""
    if not text:
        return None
    for pattern in (_BOXED, _ANSWER_IS):
        found = pattern.findall(text)
        if found:
            return found[-1].upper()
    alone = _ALONE.fullmatch(text)
    return alone.group(1) if alone else None


def grade_choice(prediction: str | None, answer: str) -> bool:
    """Same letter (case and surrounding space ignored)."""
    if prediction is None:
        return False
    return prediction.strip().upper() == str(answer).strip().upper() != ""
