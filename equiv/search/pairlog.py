"""What the judge merged, and what it kept apart near the threshold: pairs a person can read.

Counts say how much was pruned; they do not say whether the merges were right. For every
expansion with pruning on, each sibling pair the judge scored is kept when

- its two steps ended in one class (``merged``: the judge's policy merged them, directly or
  through a third sibling), or
- it was kept apart although the model scored it near or above the threshold (``kept_apart``:
  a guard rule or the statement floor refused it, or its probability is within ``NEAR_MARGIN``
  below the threshold -- the close calls, where a wrong "no" would hide).

Each row carries the verdict's ``reason`` (:mod:`equiv.judge.decide`: ``identical``,
``threshold``, ``guard:<rule>``, ``restated``, ``aligned_plan``, ``floor``, ``below_threshold``; a pair merged only through a
third sibling keeps its own reason) and, for a guard veto, its ``detail``. The runner writes
them to ``judge_pairs.jsonl`` in the run directory, one JSON object per pair with the problem
``id`` and ``seed``; the report links the file and shows the reasons. The verdict is in its one
JSON form (:meth:`equiv.judge.decide.Verdict.to_json`: ``probability``, ``merged`` -- the pair's
own verdict, where ``kind`` says whether its two steps ended in one class -- ``reason``,
``model_call``, ``detail``); ``probability`` is null for a pair a rule decided (``guard:<rule>``,
``restated``, ``aligned_plan``): the model does not score those. Files written before 2026-11-29 named it ``prob``;
:func:`equiv.judge.decide.verdict_from_json` reads both. Exact duplicates never
reach the judge and are not listed (the record counts them as ``duplicates``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from equiv.judge.decide import Verdict
from equiv.rundir import PAIRS as PAIRS_FILE

__all__ = ["NEAR_MARGIN", "PAIRS_FILE", "notable_pairs"]
NEAR_MARGIN = 0.2
"""Kept-apart pairs below the threshold are listed when within this of it."""


def notable_pairs(
    family: Sequence[Any], verdicts: Mapping[tuple[int, int], Verdict], representative_of: Sequence[int], threshold: float
) -> list[dict[str, Any]]:
    """The merged and the notable kept-apart pairs of one family of siblings (tree nodes);
    ``verdicts``: each index pair's verdict."""
    out: list[dict[str, Any]] = []
    for (i, j), verdict in verdicts.items():
        prob = None if verdict.probability is None else float(verdict.probability)  # None: a rule decided, unscored
        merged = representative_of[i] == representative_of[j]
        if not merged and verdict.reason in ("prefiltered", "below_threshold") and prob is not None \
                and prob < threshold - NEAR_MARGIN:
            continue
        row = {
            "kind": "merged" if merged else "kept_apart",
            **verdict.to_json(),
            "threshold": float(threshold),
            "depth": int(family[i].depth),
            "a": family[i].text,
            "b": family[j].text,
            "a_node": int(family[i].id),
            "b_node": int(family[j].id),
        }
        out.append(row)
    return out
