"""Batched, length-sorted, dynamically padded inference for a pair classifier.

One function serves every caller that asks "how likely are these pairs equivalent?": the EM
E-step inside ``fit``, the ``model`` pruning strategy during search and the speed benchmark. The
reference implementation sent one pair per request padded to 2048 tokens; here pairs are sorted by
length so each batch pads only to its own longest member (to a multiple of Longformer's attention
window when the model needs it), scored without gradients, and returned in input order. The
tokenisation is the training collator's (:mod:`equiv.data.tokenize`), so the judge sees at
inference exactly what it was trained on.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from equiv.data.tokenize import Pair, length_order, pad_multiple_for, tokenize_pairs

# No natural token averages 16 characters, so cutting a text to max_length * 16 characters keeps
# every token the model would see, while sparing the tokenizer's pair truncation, which is very
# slow on huge inputs (seconds for a single step of tens of thousands of characters).
CHARS_PER_TOKEN_CAP = 16


@torch.no_grad()
def score_pairs(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[Pair],
    *,
    batch_size: int = 32,
    max_length: int = 512,
    positive_index: int = 1,
    autocast_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Probability that each pair is equivalent, in the order of ``pairs`` (float32, on CPU).

    The model is put in eval mode for the pass and its previous mode is restored afterwards, so
    this is safe to call between training epochs. ``autocast_dtype`` (e.g. ``torch.bfloat16``)
    runs the forward under autocast on the model's device type.
    """
    if not pairs:
        return torch.empty(0)
    cap = max_length * CHARS_PER_TOKEN_CAP
    pairs = [(a[:cap], b[:cap]) for a, b in pairs]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    pad_multiple = pad_multiple_for(model.config)
    order = length_order(tokenizer, pairs)
    probs = torch.empty(len(pairs))
    autocast = (
        torch.autocast(device_type=device.type, dtype=autocast_dtype) if autocast_dtype is not None else nullcontext()
    )
    try:
        with autocast:
            for start in range(0, len(order), batch_size):
                index = order[start : start + batch_size]
                batch = tokenize_pairs(
                    tokenizer,
                    [pairs[i] for i in index],
                    max_length=max_length,
                    pad_to_multiple_of=pad_multiple,
                    scored=True,
                )
                batch = {k: v.to(device) for k, v in batch.items()}
                logits = model(**batch).logits.float()
                probs[index] = torch.softmax(logits, dim=-1)[:, positive_index].cpu()
    finally:
        model.train(was_training)
    return probs
