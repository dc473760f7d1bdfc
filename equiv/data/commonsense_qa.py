"""CommonsenseQA (5-way multiple choice) through ``datasets.load_dataset`` or a local JSONL.

The hub schema (``tau/commonsense_qa``): ``id``, ``question``, ``question_concept``,
``choices: {"label": ["A".."E"], "text": [...]}``, ``answerKey``. The hub's test split has no
answers, so the default split is ``validation`` (1221 questions). Each row becomes a question
listing its choices as ``A. text`` lines and asking for the letter in ``\\boxed{}``; the reference
answer is the letter (graded by :mod:`equiv.search.choice_grading`).
"""

from __future__ import annotations

from typing import Any

from equiv.errors import InputError

DEFAULT_HUB_ID = "tau/commonsense_qa"
DEFAULT_SPLIT = "validation"
PROMPT = "{question}\n\n{choices}\n\nAnswer with the letter of the best choice, as \\boxed{{X}}."


def format_row(row: dict[str, Any], where: dict[str, Any]) -> tuple[str | None, str, str]:
    """``(id, question text with choices, answer letter)`` of one hub-schema row."""
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError("must be a non-empty string", field="question", **where)
    choices = row.get("choices")
    if not isinstance(choices, dict) or not isinstance(choices.get("label"), list) or not isinstance(choices.get("text"), list):
        raise InputError('must be {"label": [...], "text": [...]}', field="choices", **where)
    labels, texts = choices["label"], choices["text"]
    if not labels or len(labels) != len(texts):
        raise InputError(f"needs as many labels as texts (got {len(labels)} and {len(texts)})", field="choices", **where)
    if not all(isinstance(x, str) and len(x.strip()) == 1 for x in labels):
        raise InputError(f"labels must be single letters, got {labels!r}", field="choices.label", **where)
    answer = row.get("answerKey")
    if not isinstance(answer, str) or answer.strip() not in [x.strip() for x in labels]:
        raise InputError(
            f"must be one of the labels {labels!r}, got {answer!r} (the hub's test split has no answers)",
            field="answerKey", **where,
        )
    listed = "\n".join(f"{label.strip()}. {text}" for label, text in zip(labels, texts))
    text = PROMPT.format(question=question.strip(), choices=listed)
    pid = row.get("id")
    return (str(pid) if pid not in (None, "") else None), text, answer.strip()
