"""The decision path's verdicts on every shipped labelled pair file equal the snapshot computed with
the code before the rules moved ahead of the model (issue #54): the same (merged, reason) for
every pair, under every pinned policy, through the evaluator and through a cached judge.
(tests/helpers/verdict_snapshot.py says how the snapshot is made.)"""

from __future__ import annotations

import json

import pytest

from equiv.data.tokenize import canonical_pair
from equiv.judge.decide import decide
from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge
from tests.helpers.verdict_snapshot import (SNAPSHOT, encode, file_verdicts, hash_probability, hash_scorer, policies,
                                            read_rows, repo_files)

PINNED = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
FILES = repo_files()


class HashJudge(CachedJudge):
    """A learned judge whose model is the snapshot's hash scorer."""

    name = "hash"
    learned = True

    def __init__(self, policy: DecisionPolicy) -> None:
        super().__init__()
        self.policy = policy

    def _judge_new(self, pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
        return [(p, p) for p in hash_scorer(pairs)]


def test_the_snapshot_covers_every_shipped_labelled_file_and_policy():
    assert sorted(PINNED["verdicts"]) == sorted(FILES)
    assert PINNED["policies"].keys() == policies().keys()
    for name, policy in policies().items():
        assert DecisionPolicy.from_dict(PINNED["policies"][name]) == policy


@pytest.mark.parametrize("key", sorted(FILES))
def test_decide_gives_the_pinned_verdict_on_every_pair(key):
    for name, policy in policies().items():
        assert file_verdicts(FILES[key], policy) == PINNED["verdicts"][key][name], (key, name)


@pytest.mark.parametrize("key", sorted(FILES))
def test_a_cached_judge_gives_the_pinned_verdict_on_every_pair(key):
    rows = read_rows(FILES[key])
    pairs = [(row["sentence1"], row["sentence2"]) for row in rows]
    questions = [row.get("question") or "" for row in rows]
    # Two policies: every stage in force, and the rules alone. What the other two pinned policies
    # vary (the floor, the guard) is decide's input, read pair by pair in the test above; the cached
    # judge adds its cache and rules-first order, which these two exercise (default-suite time).
    for name in ("full", "rules"):
        judge = HashJudge(policies()[name])
        got = {row["id"]: encode(v.merged, v.reason) for row, v in zip(rows, judge.pair_verdicts(pairs, questions))}
        assert got == PINNED["verdicts"][key][name], (key, name)
        again = judge.pair_verdicts(pairs, questions)  # from the cache: the same verdicts
        assert [encode(v.merged, v.reason) for v in again] == [got[row["id"]] for row in rows]


def test_precomputed_scores_decide_as_a_scorer_does():
    key = "benchmarks/data/gsm8k_train_siblings_gemma270m.jsonl"
    rows = read_rows(FILES[key])
    pairs = [(row["sentence1"], row["sentence2"]) for row in rows]
    questions = [row.get("question") or "" for row in rows]
    scores = [hash_probability(*canonical_pair(a, b)) for a, b in pairs]  # a caller scores the canonical order
    for name, policy in policies().items():
        got = [encode(v.merged, v.reason) for v in decide(pairs, policy, scores, questions)]
        assert got == [PINNED["verdicts"][key][name][row["id"]] for row in rows]
