"""Two numbered plans read sub-goal by sub-goal: the plan's items (equiv.text.plans), the decision's
aligned-plan stage (equiv.judge.decide, stage 4b), the sentence model it asks (equiv.judge.paraphrase,
the real bundled all-MiniLM-L6-v2), the policy field and its knobs, and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.tokenize import canonical_pair
from equiv.judge.decide import ALIGNED_PLAN, decide, sweep_scores
from equiv.judge.policy import DecisionPolicy
from equiv.prune import PrunerConfig, build_judge
from equiv.prune.stats import JudgeStats
from equiv.text.plans import aligned_items, numbered_plan, plan_items
from tests.helpers.cli import search_cli
from tests.helpers.judges import make_tiny_judge

PLAN = ("To find the cost, we follow these steps:\n1. **Calculate the total weight**: of the books.\n"
        "   - Jon has 4 books.\n2. Divide it by three.")
REWORDED = "1. Find the total weight of the books.\n2. Divide the total by three."
SPLIT = "1. Find the weight of one book.\n2. Multiply by the number of books.\n3. Divide by three."
COMPUTING = "1. Jon's books weigh 4 * 2 = 8 pounds.\n2. Divide by three: 8 / 3."


def test_a_plans_items_leave_out_its_header_numbers_and_bold_and_keep_their_sub_bullets():
    assert plan_items(PLAN) == ("Calculate the total weight: of the books.\n   - Jon has 4 books.", "Divide it by three.")
    assert plan_items("1. **Initial borrowings:** Mary starts with 5 books.") == ()  # one item of a worked list
    assert plan_items("Jon has 4 books.") == ()
    assert numbered_plan(PLAN) and not numbered_plan("Jon has 4 books.")
    assert aligned_items(PLAN, REWORDED) == tuple(zip(plan_items(PLAN), plan_items(REWORDED)))
    assert aligned_items(PLAN, SPLIT) == ()  # three sub-goals against two: another plan
    assert aligned_items(PLAN, "Jon has 4 books.") == ()


def cosine_table(table: dict[tuple[str, str], float], asked: list):
    """A paraphrase scorer from a table of item pairs (either order); what it was asked is kept."""

    def score(pairs):
        asked.extend(pairs)
        return [table.get(p, table.get(p[::-1], 0.0)) for p in pairs]

    return score


def test_two_plans_merge_when_every_pair_of_sub_goals_reads_alike_and_else_the_model_decides():
    items = dict(zip(zip(plan_items(PLAN), plan_items(REWORDED)), (0.93, 0.91)))
    policy = DecisionPolicy(prefilter=None, floor=0.7, plan_floor=0.9, plan_items=0.9)
    asked: list = []
    model: list = []

    def scorer(pairs):
        model.extend(pairs)
        return [0.8] * len(pairs)

    verdicts = decide([(PLAN, REWORDED), (PLAN, SPLIT)], policy, scorer, paraphrase=cosine_table(items, asked))
    assert [(v.merged, v.reason) for v in verdicts] == [(True, ALIGNED_PLAN), (False, "floor")]
    assert verdicts[0].probability is None and "2 sub-goals alike, the least at 0.910" == verdicts[0].detail
    assert model == [canonical_pair(PLAN, SPLIT)]  # the aligned pair cost no classifier forward
    assert sorted(map(sorted, asked)) == sorted(map(sorted, items))  # only the aligned plans' sub-goals were asked
    # one sub-goal short of the cosine: the model decides (here the plan floor holds it back)
    short = {k: (0.95 if i == 0 else 0.89) for i, k in enumerate(items)}
    assert decide([(PLAN, REWORDED)], policy, scorer, paraphrase=cosine_table(short, []))[0].reason == "floor"
    # the pair read the other way round: the same verdict
    assert decide([(REWORDED, PLAN)], policy, scorer, paraphrase=cosine_table(items, []))[0].reason == ALIGNED_PLAN
    # what a threshold sweep reads: merged at any threshold, as the restatement rule's merges are
    assert sweep_scores([(PLAN, REWORDED)], verdicts[:1], policy) == [1.0]


def test_the_stage_is_off_by_default_and_never_reads_plans_that_compute_or_that_a_guard_vetoes():
    never: list = []
    assert decide([(PLAN, REWORDED)], DecisionPolicy(prefilter=None), [0.2], paraphrase=cosine_table({}, never)
                  )[0].reason == "below_threshold"
    policy = DecisionPolicy(prefilter=None, guard=("different_numbers",), plan_items=0.5)
    vetoed = ("1. Buy 3 apples.\n2. Eat them.", "1. Buy 4 apples.\n2. Eat them.")
    verdicts = decide([vetoed, (COMPUTING, REWORDED)], policy, [0.2, 0.2], paraphrase=cosine_table({}, never))
    assert [v.reason for v in verdicts] == ["guard:different_numbers", "below_threshold"]
    assert never == []


def test_the_policy_stores_the_stage_only_where_it_is_on_and_its_knob_turns_it_off():
    off = DecisionPolicy(floor=0.7)
    assert "plan_items" not in off.to_dict() and "paraphrase_model" not in off.to_dict()  # earlier fingerprints stay
    on = off.with_knobs(plan_items=0.9)
    assert on.to_dict()["plan_items"] == 0.9 and on.to_dict()["paraphrase_model"] == "bundled:all-MiniLM-L6-v2"
    assert DecisionPolicy.from_dict(on.to_dict()) == on and on.with_knobs(plan_items=0).plan_items is None
    with pytest.raises(Exception, match="plan_items"):
        DecisionPolicy(plan_items=1.5)
    with pytest.raises(Exception, match="paraphrase_model"):
        DecisionPolicy.from_dict({**on.to_dict(), "paraphrase_model": ""})
    with pytest.raises(Exception, match="aligned plans would merge nothing"):
        build_judge(PrunerConfig(strategy="none", plan_items=0.9))


def test_the_bundled_sentence_model_reads_reworded_sub_goals_alike_and_encodes_each_text_once():
    from equiv.judge.paraphrase import SentenceEncoder

    encoder = SentenceEncoder(max_cached=3)
    same, other = encoder.similarity([("Find the total number of guests.", "Calculate how many guests there are."),
                                      ("Find the total number of guests.", "Convert the punch from ounces to gallons.")])
    assert same > 0.6 > other and encoder.encoded == 3
    encoder.similarity([("Find the total number of guests.", "Calculate how many guests there are.")])
    assert encoder.encoded == 3  # already encoded (the least recent went past the bound of 3 texts)
    assert len(encoder._vectors) <= 3


def test_a_judge_with_the_stage_merges_plans_in_search_and_counts_them(tmp_path: Path):
    judge_dir = make_tiny_judge(tmp_path / "judge")
    judge = build_judge(PrunerConfig(strategy="model", model=str(judge_dir), device="cpu", prefilter=0,
                                     plan_items=0.5))
    verdicts = judge.pair_verdicts([(PLAN, REWORDED), (PLAN, SPLIT)])
    assert verdicts[0].reason == ALIGNED_PLAN and not verdicts[0].model_call
    assert verdicts[1].reason != ALIGNED_PLAN
    assert judge.stats.aligned_plans == 1 and judge.stats.ruled == 1
    assert JudgeStats().to_dict()["aligned_plans"] == 0


def test_pairs_on_the_command_line_reports_plans_merged_sub_goal_by_sub_goal(tmp_path: Path):
    judge_dir = make_tiny_judge(tmp_path / "judge")
    data = tmp_path / "pairs.jsonl"
    rows = [{"id": "p-1", "sentence1": PLAN, "sentence2": REWORDED, "result": 4},
            {"id": "p-2", "sentence1": PLAN, "sentence2": SPLIT, "result": 0}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = search_cli("pairs", "--data.path", data, "--strategy", "model", "--model", judge_dir, "--device", "cpu",
                        "--prefilter", "0", "--plan_items", "0.5")
    assert result.returncode == 0, result.stderr[-1500:]
    assert "1 plans merged sub-goal by sub-goal" in result.stdout and "aligned_plan 1" in result.stdout
    bad = search_cli("pairs", "--data.path", data, "--strategy", "model", "--model", judge_dir, "--plan_items", "2")
    assert bad.returncode == 2 and "plan_items" in bad.stderr
