"""What the judge merged, and what it kept apart near the threshold: pairs a person can read.

Counts say how much was pruned; they do not say whether the merges were right. For every
expansion with pruning on, each sibling pair the judge scored is kept when

- its two steps ended in one class (``merged``: the judge's probability reached the threshold,
  directly or through a third sibling), or
- it was kept apart with a probability within ``NEAR_MARGIN`` below the threshold
  (``kept_apart``: the close calls, where a wrong "no" would hide).

The runner writes them to ``judge_pairs.jsonl`` in the run directory, one JSON object per pair
with the problem ``id`` and ``seed``; the report links the file. Exact duplicates never reach
the judge and are not listed (the record counts them as ``duplicates``).
"""

from __future__ import annotations

from typing import Any, Sequence

from equiv.rundir import PAIRS as PAIRS_FILE

__all__ = ["NEAR_MARGIN", "PAIRS_FILE", "notable_pairs"]
NEAR_MARGIN = 0.2
"""Kept-apart pairs are listed when ``threshold - NEAR_MARGIN <= prob < threshold``."""


def notable_pairs(
    family: Sequence[Any], probs: dict[tuple[int, int], float], representative_of: Sequence[int], threshold: float
) -> list[dict[str, Any]]:
    """The merged and near-threshold kept-apart pairs of one family of siblings (tree nodes)."""
    out: list[dict[str, Any]] = []
    for (i, j), prob in probs.items():
        merged = representative_of[i] == representative_of[j]
        if not merged and prob < threshold - NEAR_MARGIN:
            continue
        out.append(
            {
                "kind": "merged" if merged else "kept_apart",
                "prob": round(float(prob), 6),
                "threshold": float(threshold),
                "depth": int(family[i].depth),
                "a": family[i].text,
                "b": family[j].text,
                "a_node": int(family[i].id),
                "b_node": int(family[j].id),
            }
        )
    return out
