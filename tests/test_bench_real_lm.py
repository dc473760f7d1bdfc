"""``benchmarks/bench_real_lm.py``'s merge listing: which pairs a run merged, written to be read.

The whole benchmark runs (slowly, ``-m slow``) in ``tests/test_benchmarks.py``; here the two
functions that turn a run directory's ``judge_pairs.jsonl`` into ``merges.jsonl`` / ``merges.md``
are checked on lines built with known kinds, so a kept-apart pair listed as a merge, a question
taken from the wrong problem or a lost merge would fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from equiv.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_real_lm as bench  # noqa: E402


def records() -> list[dict]:
    return [{"id": "7", "seed": 0, "question": "How many eggs?"}, {"id": "7", "seed": 1, "question": "How many eggs?"},
            {"id": "8", "seed": 0, "question": "How far?"}]


def pair(kind: str, pid: str, seed: int, a: str, b: str, prob: float) -> dict:
    # a pair log as written before 2026-11-29 (the verdict's probability as "prob")
    return {"id": pid, "seed": seed, "kind": kind, "prob": prob, "reason": "threshold" if kind == "merged" else "floor",
            "threshold": 0.5, "depth": 1, "a": a, "b": b,
            "a_node": 1, "b_node": 2}


def test_merged_pairs_keeps_only_merges_with_their_own_question():
    pairs = [pair("merged", "8", 0, "He ran 3 km.", "He ran 3 kilometres.", 0.91),
             pair("kept_apart", "7", 0, "She has 3 eggs.", "She has 4 eggs.", 0.41),
             pair("merged", "7", 1, "3 + 4 = 7", "4 + 3 = 7", 0.88)]
    merges = bench.merged_pairs(records(), pairs, "model")
    assert [(m["id"], m["seed"], m["question"]) for m in merges] == [("8", 0, "How far?"), ("7", 1, "How many eggs?")]
    assert merges[0]["sentence1"] == "He ran 3 km." and merges[0]["sentence2"] == "He ran 3 kilometres."
    assert {m["pruner"] for m in merges} == {"model"} and merges[1]["prob"] == 0.88


def test_a_merge_without_a_record_is_an_error():
    with pytest.raises(InputError, match="problem 9 seed 0 has no record"):
        bench.merged_pairs(records(), [pair("merged", "9", 0, "a", "b", 0.9)], "formula")


def test_merges_markdown_lists_every_merge_under_its_pruner():
    merges = (bench.merged_pairs(records(), [pair("merged", "8", 0, "He ran 3 km.", "He ran 3 kilometres.", 0.91)], "model")
              + bench.merged_pairs(records(), [pair("merged", "7", 0, "x = 2", "x=2", None)], "formula"))
    text = bench.merges_markdown(merges)
    assert "## model: 1 merged pairs" in text and "## formula: 1 merged pairs" in text
    assert text.index("He ran 3 kilometres.") < text.index("## formula") < text.index("x=2")
    assert "probability 0.910" in text and "probability -" in text
