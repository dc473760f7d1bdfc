"""Length-sorted, right-padded batches for reward models that read scores at tag positions.

Both PRMs here score every step of many solutions in one call: sequences are sorted by length so
each batch pads little, right padding keeps real tokens at their positions in a causal model, and
each caller reads its tag positions from the row's own ids, restoring request order itself.
:func:`padded_rows` also left-pads, for the transformers policy's batched generation.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import torch

Encoded = tuple[int, list[int]]  # (request index, token ids)


def padded_rows(
    rows: Sequence[Sequence[int]], pad_id: int, *, side: str = "right"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of ``rows`` padded to the longest (CPU tensors).

    ``right`` for scoring (a causal model's real positions are unaffected), ``left`` for
    generation (new tokens are appended after every row's last real token).
    """
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, tokens in enumerate(rows):
        span = slice(0, len(tokens)) if side == "right" else slice(width - len(tokens), width)
        ids[row, span] = torch.tensor(tokens, dtype=torch.long)
        mask[row, span] = 1
    return ids, mask


def padded_batches(
    encoded: Sequence[Encoded], batch_size: int, pad_id: int, device: torch.device
) -> Iterator[tuple[list[Encoded], torch.Tensor, torch.Tensor]]:
    """Yield ``(chunk, input_ids, attention_mask)`` per batch, shortest sequences first."""
    order = sorted(encoded, key=lambda item: len(item[1]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        input_ids, mask = padded_rows([ids for _, ids in chunk], pad_id)
        yield chunk, input_ids.to(device), mask.to(device)
