"""Pair tokenisation and padding: one way to turn step pairs into a model batch.

Training (the DataModule's collator) and inference (:func:`equiv.judge.inference.score_pairs`)
must feed the classifier identical inputs, so both tokenise here: the two steps as one
sequence pair, the longer side truncated first, padded per batch to its own longest member
(to a multiple of the attention window for models that need it, such as Longformer). The two
steps are all the classifier reads: the problem's question is the claim guard's to read
(:mod:`equiv.text.guard`), not the model's input (``with_question`` was measured and removed,
docs/experiments/2026-11-27-removed-levers.md).

A pair is *scored* as written but without thousands commas (``1,500 - 180 = 1,320`` as
``1500 - 180 = 1320``; :func:`equiv.text.normalize.without_thousands_commas`): every scorer of an
export (:func:`equiv.judge.inference.score_pairs`: search, ``pairs``, the ensemble's calibration,
EM's E-step) and the evaluation loaders (validation, test, predict) read it so, while training
batches keep the files' text, as they keep the files' order. The rubric calls a thousands comma
formatting, but the tokenizer makes ``1,320`` three tokens and ``1320`` one, and the training pairs
hardly ever pair the two writings: the model read them as different numbers. On the bundled 1.5B's
width-10 development siblings every equivalent pair with a comma on one side only (60) was below
the threshold, most under 0.1; scored without commas, the shipped judge merged 27 more of that
file's equivalent pairs (36 over the development files) and no other pair. Training on the text without commas as well was
measured once (the recipe rebuilt) and not adopted: it lost recall on the development siblings
(docs/experiments/2026-11-30-numbers-as-the-model-reads-them.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from equiv.text.normalize import without_thousands_commas

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

Pair = tuple[str, str]


def canonical_pair(a: str, b: str) -> Pair:
    """The order a pair is judged in: its two texts sorted (by code point, the same order on
    every machine). The cross-encoder reads ``[CLS] a [SEP] b`` and is not symmetric, so without
    one order the sibling that came first chose the probability; the evaluator
    (:func:`equiv.judge.decide.decide`), the judges' cache key, every scorer of an export
    (:func:`equiv.judge.members.score_members`) and the evaluation loaders (validation, test,
    predict) all use it. Training batches keep the files' order (training on both orders was
    measured and removed)."""
    return (a, b) if a <= b else (b, a)


def pad_multiple_for(config: Any) -> int | None:
    """The multiple a model config needs inputs padded to: its attention window (Longformer
    and friends), or None when any length works."""
    window = getattr(config, "attention_window", None)
    if window is None:
        return None
    if isinstance(window, (list, tuple)):
        window = max(window)
    return int(window)


def tokenize_pairs(
    tokenizer: "PreTrainedTokenizerBase",
    pairs: Sequence[Pair],
    *,
    max_length: int,
    pad_to_multiple_of: int | None = None,
    scored: bool,
) -> dict[str, "torch.Tensor"]:
    """Tokenise pairs as one padded batch, truncating the longer side first. ``scored``: the steps
    as a judge scores them, without thousands commas (the module docstring); off, as written
    (training batches)."""
    plain = without_thousands_commas if scored else _as_written
    return tokenizer(
        [plain(a) for a, _ in pairs],
        [plain(b) for _, b in pairs],
        truncation="longest_first",
        max_length=max_length,
        padding=True,
        pad_to_multiple_of=pad_to_multiple_of,
        return_tensors="pt",
    )


def _as_written(text: str) -> str:
    return text


def length_order(tokenizer: "PreTrainedTokenizerBase", pairs: Sequence[Pair]) -> list[int]:
    """Indices of ``pairs`` from longest to shortest (in tokens, as scored), so batches pad little."""
    if not pairs:
        return []
    firsts = tokenizer([without_thousands_commas(a) for a, _ in pairs], add_special_tokens=False)["input_ids"]
    seconds = tokenizer([without_thousands_commas(b) for _, b in pairs], add_special_tokens=False)["input_ids"]
    lengths = [len(x) + len(y) for x, y in zip(firsts, seconds)]
    return sorted(range(len(pairs)), key=lambda i: -lengths[i])
