"""Pair tokenisation and padding: one way to turn step pairs into a model batch.

Training (the DataModule's collator) and inference (:func:`equiv.judge.inference.score_pairs`)
must feed the classifier identical inputs, so both tokenise here: the two steps as one
sequence pair, the longer side truncated first, padded per batch to its own longest member
(to a multiple of the attention window for models that need it, such as Longformer), with the
words where the two steps differ marked when the judge was trained so, and with the problem's
question after the second step when the judge reads it (:func:`append_question`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence


if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

Pair = tuple[str, str]


def pad_multiple_for(config: Any) -> int | None:
    """The multiple a model config needs inputs padded to: its attention window (Longformer
    and friends), or None when any length works."""
    window = getattr(config, "attention_window", None)
    if window is None:
        return None
    if isinstance(window, (list, tuple)):
        window = max(window)
    return int(window)


def question_separator(tokenizer: "PreTrainedTokenizerBase") -> str:
    """What stands between the second step and the question: the tokenizer's own separator token
    (``[SEP]`` for BERT-style models, read as that one special token), else a line break."""
    return str(getattr(tokenizer, "sep_token", None) or "\n")


def append_question(second: str, question: str, separator: str) -> str:
    """The second segment of a question-reading judge: ``second <sep> question``.

    The question goes *last*, so truncation (longest side first, from the end) cuts the question
    before either step: the two steps keep the layout a step-only judge reads, and the question is
    context the judge may use to tell which claim of a step the problem cares about (a cost or a
    count, which day, which person). An empty question adds nothing.
    """
    question = " ".join(question.split())
    return f"{second} {separator} {question}" if question else second


def with_questions(tokenizer: "PreTrainedTokenizerBase", pairs: Sequence[Pair], questions: Sequence[str]) -> list[Pair]:
    """``pairs`` with each question appended to its second step (:func:`append_question`)."""
    if len(questions) != len(pairs):
        raise ValueError(f"{len(questions)} questions for {len(pairs)} pairs")
    separator = question_separator(tokenizer)
    return [(a, append_question(b, q, separator)) for (a, b), q in zip(pairs, questions)]


def tokenize_pairs(
    tokenizer: "PreTrainedTokenizerBase",
    pairs: Sequence[Pair],
    *,
    max_length: int,
    pad_to_multiple_of: int | None = None,
    questions: Sequence[str] | None = None,
) -> dict[str, "torch.Tensor"]:
    """Tokenise pairs as one padded batch, truncating the longer side first.

    ``questions`` (one per pair, for a judge trained with ``with_question``) are appended to the
    second step.
    """
    if questions is not None:
        pairs = with_questions(tokenizer, pairs, questions)
    return tokenizer(
        [a for a, _ in pairs],
        [b for _, b in pairs],
        truncation="longest_first",
        max_length=max_length,
        padding=True,
        pad_to_multiple_of=pad_to_multiple_of,
        return_tensors="pt",
    )


def length_order(tokenizer: "PreTrainedTokenizerBase", pairs: Sequence[Pair],
                 questions: Sequence[str] | None = None) -> list[int]:
    """Indices of ``pairs`` from longest to shortest (in tokens, with their questions when the
    judge reads them), so batches pad little."""
    if not pairs:
        return []
    if questions is not None:
        pairs = with_questions(tokenizer, pairs, questions)
    firsts = tokenizer([a for a, _ in pairs], add_special_tokens=False)["input_ids"]
    seconds = tokenizer([b for _, b in pairs], add_special_tokens=False)["input_ids"]
    lengths = [len(x) + len(y) for x, y in zip(firsts, seconds)]
    return sorted(range(len(pairs)), key=lambda i: -lengths[i])
