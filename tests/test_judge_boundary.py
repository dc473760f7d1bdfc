"""Issue 67: the judge answers classes (``judge.group``), and greedy grouping asks only the pairs it
reads. Whole searches through the real runner and dispatcher give the same records as when every
sibling pair was sent to the judge (the path before), except the pairs asked and the judge calls,
which can only be fewer."""

from __future__ import annotations

import json

import pytest

from equiv.prune.boundary import FamilyGrouping
from equiv.prune.grouping import group_equivalent, sibling_pairs
from equiv.prune.strategies import PrunerConfig
from equiv.search.algorithms import ALGORITHMS
from equiv.search.config import RunConfig, SearchConfig
from equiv.search.runner import Engines, Grader, run_eval
from tests.helpers.scripted import KeyedReward, RestateJudge, SeededPolicy, problems, simple_extract, simple_grade

ASKED = {"judge_pairs", "judge_calls"}
TIMING = {"seconds", "tree"}


class EveryPairJudge(RestateJudge):
    """The path before issue 67: every sibling pair asked in one call, then grouped."""

    def group(self, families, *, mode="greedy", representative="first", score_ruled=False):
        out = []
        for family in families:
            pairs = sibling_pairs(len(family.texts))
            found = self.pair_verdicts([(family.texts[i], family.texts[j]) for i, j in pairs],
                                       [family.question] * len(pairs), score_ruled=score_ruled)
            rule = "prior" if representative == "score" and family.scores is None else representative
            grouping = group_equivalent(len(family.texts), {p: v.merged for p, v in zip(pairs, found)},
                                        probs={p: v.probability for p, v in zip(pairs, found)}, mode=mode,
                                        representative=rule, priors=family.priors, scores=family.scores)
            out.append(FamilyGrouping(grouping, pairs, found))
        return out


def _records(out, algo, judge, representative):
    run_eval(algo=algo, problems=problems(5), engines=Engines(SeededPolicy(), KeyedReward(), judge,
                                                             PrunerConfig(representative=representative)),
             out_dir=out, search=SearchConfig(width=4, num_simulations=4),
             run=RunConfig(concurrency=2, progress=False, seeds=[0]), pruner="restate",
             grader=Grader(simple_extract, simple_grade))
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {(r["id"], r["seed"]): r for r in rows}


@pytest.mark.parametrize("representative", ["first", "score"])
@pytest.mark.parametrize("algo", ALGORITHMS.names())
def test_greedy_grouping_through_the_judge_changes_only_the_pairs_asked(tmp_path, algo, representative):
    before = _records(tmp_path / "every", algo, EveryPairJudge(), representative)
    after = _records(tmp_path / "group", algo, RestateJudge(), representative)
    assert before.keys() == after.keys()
    for key in before:
        old, new = before[key], after[key]
        assert {k: v for k, v in old.items() if k not in ASKED | TIMING} == \
            {k: v for k, v in new.items() if k not in ASKED | TIMING}
        assert new["judge_pairs"] <= old["judge_pairs"] and new["judge_calls"] <= old["judge_calls"]
    assert any(r["pruned"] for r in after.values())  # the judge merged something
    assert sum(r["judge_pairs"] for r in after.values()) < sum(r["judge_pairs"] for r in before.values())
