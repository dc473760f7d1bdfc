"""Length-sorted, right-padded batches for reward models that read scores at tag positions.

Both PRMs here score every step of many solutions in one call: sequences are sorted by length so
each batch pads little, right padding keeps real tokens at their positions in a causal model, and
each caller reads its tag positions from the row's own ids, restoring request order itself.
The padding itself is :func:`equiv.devices.padded_rows`, shared with the transformers policy.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import torch

from equiv.devices import padded_rows

Encoded = tuple[int, list[int]]  # (request index, token ids)


def padded_batches(
    encoded: Sequence[Encoded], batch_size: int, pad_id: int, device: torch.device
) -> Iterator[tuple[list[Encoded], torch.Tensor, torch.Tensor]]:
    """Yield ``(chunk, input_ids, attention_mask)`` per batch, shortest sequences first."""
    order = sorted(encoded, key=lambda item: len(item[1]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        input_ids, mask = padded_rows([ids for _, ids in chunk], pad_id)
        yield chunk, input_ids.to(device), mask.to(device)
