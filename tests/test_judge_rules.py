"""The rules of the decision inside the judges: the claim guard, the restatement rule and the
statement floor; the rules decide before the model, so a pair they decide costs no forward. The
guard's rules themselves are tested in tests/test_text_guard.py."""

from __future__ import annotations

import json

import pytest

from equiv.data.tokenize import canonical_pair
from equiv.prune import LevenshteinJudge, ModelJudge, PrunerConfig, build_judge
from equiv.prune.boundary import Family
from equiv.search.dispatch import judge_groupings
from equiv.judge.decide import below_floor, decide
from equiv.judge.policy import DecisionPolicy
from tests.helpers.cli import search_cli
from tests.helpers.judges import SETTINGS, make_tiny_judge

Q = ("Mia scored 90 on the first test and 95 on the second. The trip costs $30 and the repair $15. "
     "She works on Monday and Tuesday. Ali has 22 medals and twice as many stamps. Jake earns thrice what "
     "Jacob does. Tashay earns $91.")


def test_the_statement_floor_holds_back_only_two_statements_below_it():
    s1, s2 = "Elida has 5 letters while Adrianna has 2 less.", "Elida has 5 letters and Adrianna 2 less."
    c1 = "Adrianna has 2 * 5 - 2 = 8 letters."
    floored = DecisionPolicy(floor=0.9)
    assert below_floor(floored, s1, s2, 0.85)
    assert not below_floor(floored, s1, s2, 0.9)  # at the floor it merges
    assert not below_floor(floored, s1, c1, 0.5)  # one step computes: the judge's own threshold rules
    assert not below_floor(DecisionPolicy(), s1, s2, 0.1)


def test_a_numbered_plan_is_held_to_the_plan_floor_and_other_statements_to_the_floor():
    plans = ("1. Find Jon's total weight.\n2. Divide it by three.", "1. Find the total weight.\n2. Set up an equation.")
    openings = ("To find the weight, we divide Jon's total.", "To find the weight, we divide the total of Jon's books.")
    policy = DecisionPolicy(prefilter=None, floor=0.7, plan_floor=0.9)
    assert below_floor(policy, *plans, 0.85) and not below_floor(policy, *openings, 0.85)
    assert below_floor(policy, openings[0], plans[1], 0.85)  # one step a plan: the plan's floor
    assert [(v.merged, v.reason) for v in decide([plans, openings], policy, [0.85, 0.85])] == [
        (False, "floor"), (True, "threshold")]
    assert not below_floor(policy, *plans, 0.9) and below_floor(policy, *openings, 0.65)
    # unset, plans are held to the statement floor as before; the floor off is off for plans too
    assert not below_floor(DecisionPolicy(floor=0.7), *plans, 0.85)
    off = policy.with_knobs(floor=0)
    assert off.floor is None and off.plan_floor is None and not below_floor(off, *plans, 0.1)
    with pytest.raises(Exception, match="no statement floor"):
        DecisionPolicy(plan_floor=0.9)
    with pytest.raises(Exception, match="no statement floor"):
        policy.with_knobs(floor=0, plan_floor=0.9)
    # stored only where set, so every earlier policy's stored form (and a served judge's fingerprint) stays
    assert "plan_floor" not in DecisionPolicy(floor=0.9).to_dict() and policy.to_dict()["plan_floor"] == 0.9
    assert DecisionPolicy.from_dict(policy.to_dict()) == policy
    assert policy.with_knobs(plan_floor=0).plan_floor is None and policy.with_knobs(floor=0.8).plan_floor == 0.9
    with pytest.raises(Exception, match="plan_floor"):
        DecisionPolicy(plan_floor=1.5)


def test_the_rules_decide_before_the_model_which_scores_only_the_pairs_left_open():
    vetoed = ("She scored 90 on the third test.", "She scored 95 on the third test.")
    restated = ("So Mia scored 90.", "Thus Mia scored 90.")
    open_pair = ("Elida has 5 letters while Adrianna has 2 less.", "Elida has 5 letters and Adrianna 2 fewer.")
    policy = DecisionPolicy(prefilter=None, guard=("different_numbers",), floor=0.9)
    asked: list = []

    def scorer(pairs):
        asked.extend(pairs)
        return [0.95] * len(pairs)

    verdicts = decide([vetoed, restated, open_pair], policy, scorer, [Q] * 3)
    assert asked == [canonical_pair(*open_pair)]  # the guard's veto and the restatement took no model
    assert [(v.merged, v.reason, v.probability) for v in verdicts] == [
        (False, "guard:different_numbers", None), (True, "restated", None), (True, "threshold", 0.95)]
    asked.clear()
    again = decide([vetoed, restated, open_pair], policy, scorer, [Q] * 3, score_ruled=True)
    assert asked == [canonical_pair(*p) for p in (vetoed, restated, open_pair)]  # every probability, the same verdicts
    assert [(v.merged, v.reason) for v in again] == [(v.merged, v.reason) for v in verdicts]
    assert [v.probability for v in again] == [0.95] * 3
    # precomputed scores: a ruled pair may have none, and keeps the one it has
    given = decide([vetoed, restated, open_pair], policy, [None, 0.2, 0.95], [Q] * 3)
    assert [v.probability for v in given] == [None, 0.2, 0.95] and given[1].merged


def test_the_restatement_rule_has_its_own_knob_apart_from_the_floor():
    restated = ("So Mia scored 90.", "Thus Mia scored 90.")
    floored = DecisionPolicy(prefilter=None, floor=0.9)
    assert floored.restate  # on with the floor, as it rode on it
    assert DecisionPolicy.from_dict({"floor": 0.9}).restate and not DecisionPolicy.from_dict({}).restate
    no_floor = floored.with_knobs(floor=0)  # the floor off leaves the restatement rule on
    assert no_floor.floor is None and no_floor.restate
    assert decide([restated], no_floor, [0.1])[0].reason == "restated"
    no_restate = floored.with_knobs(restate=False)
    assert no_restate.floor == 0.9 and decide([restated], no_restate, [0.1])[0].reason == "below_threshold"
    # stored as before where restate follows the floor; written only where it differs
    assert "restate" not in floored.to_dict() and no_floor.to_dict()["restate"] is True
    assert DecisionPolicy.from_dict(no_floor.to_dict()) == no_floor
    assert build_judge(PrunerConfig(strategy="levenshtein", restate=True)).policy.restate
    assert build_judge(PrunerConfig(strategy="levenshtein", floor=0.9)).policy.restate is False


def test_the_judge_applies_the_statement_floor_after_the_guard_and_counts_it():
    judge = LevenshteinJudge(0.3)
    statements = ("Elida has 5 letters while Adrianna has 2 less.", "Elida has 5 letters and Adrianna has 2 fewer.")
    computing = ("So 5 * 2 = 10 letters.", "Thus 5 * 2 = 10 letters in all.")
    ratio = judge.pair_scores([statements], [Q])[0]  # the Levenshtein ratio: a rule's score
    assert 0.3 < ratio < 0.99 and judge.pair_verdicts([statements], [Q])[0].merged
    judge.policy = judge.policy.with_knobs(floor=0.99)
    verdicts = judge.pair_verdicts([statements, computing], [Q, Q])
    assert [v.merged for v in verdicts] == [False, True]  # the computing pair keeps its merge
    assert [v.reason for v in verdicts] == ["floor", "threshold"]
    assert judge.pair_verdicts([statements], [Q])[0].reason == "floor"
    assert judge.stats.floored == 2 and judge.describe()["policy"]["floor"] == 0.99
    judge.policy = judge.policy.with_knobs(floor=ratio)
    assert judge.pair_verdicts([statements], [Q])[0].merged  # at the floor it merges


def test_build_judge_and_the_model_judge_take_the_statement_floor(tmp_path):
    from equiv.errors import InputError

    assert build_judge(PrunerConfig(strategy="levenshtein", floor=0.9)).policy.floor == 0.9
    assert build_judge(PrunerConfig(strategy="levenshtein")).policy.floor is None
    with pytest.raises(InputError, match="statement floor"):
        build_judge(PrunerConfig(strategy="none", floor=0.9))
    with pytest.raises(InputError, match="floor"):
        build_judge(PrunerConfig(strategy="levenshtein", floor=1.5))
    assert build_judge(PrunerConfig(strategy="levenshtein", floor=0.7, plan_floor=0.9)).policy.plan_floor == 0.9
    with pytest.raises(InputError, match="statement floor") as err:
        build_judge(PrunerConfig(strategy="none", plan_floor=0.9))
    assert err.value.field == "plan_floor"
    with pytest.raises(InputError) as err:
        build_judge(PrunerConfig(strategy="levenshtein", plan_floor=2.0))
    assert err.value.field == "plan_floor"
    plain = make_tiny_judge(tmp_path / "plain")
    floored = make_tiny_judge(tmp_path / "floored", settings=dict(SETTINGS, statement_threshold=0.9))
    assert ModelJudge(plain, device="cpu").policy.floor is None
    assert ModelJudge(floored, device="cpu").policy.floor == 0.9
    assert build_judge(PrunerConfig(strategy="model", model=str(floored), floor=0.0)).policy.floor is None
    assert build_judge(PrunerConfig(strategy="model", model=str(plain), floor=0.95)).policy.floor == 0.95
    assert ModelJudge(floored, device="cpu", plan_floor=0.95).policy.plan_floor == 0.95
    judge = ModelJudge(floored, device="cpu", prefilter=0.0, threshold=1e-9)
    pair = ("Elida has 5 letters while Adrianna has 2 less.", "Elida has 5 letters while Adrianna has 2 more.")
    prob = ModelJudge(plain, device="cpu", prefilter=0.0, threshold=1e-9).pair_probabilities([pair], [Q])[0]
    assert 0.0 < prob < 0.9  # a random tiny judge: the floor has something to hold back
    verdict = judge.pair_verdicts([pair], [Q])[0]
    assert verdict.probability == prob and not verdict.merged and judge.stats.scored == 1
    assert verdict.reason == "floor"
    assert judge.stats.floored == 1 and judge.stats.guarded == 0  # held back by the floor, not the guard


def test_the_judge_vetoes_guarded_pairs_and_counts_them():
    judge = LevenshteinJudge(0.5)
    pairs = [("She scored 90 on the third test.", "She scored 95 on the third test."),
             ("So Mia scored 90.", "Thus Mia scored 90.")]
    assert [v.merged for v in judge.pair_verdicts(pairs, [Q, Q])] == [True, True]
    judge.policy = judge.policy.with_knobs(guard=True)
    verdicts = judge.pair_verdicts(pairs, [Q, Q])
    assert [v.merged for v in verdicts] == [False, True]
    assert verdicts[0].reason == "guard:different_numbers" and verdicts[1].reason == "threshold"
    assert judge.pair_verdicts(pairs, [Q, Q])[0].reason.startswith("guard:")
    assert judge.stats.guarded == 2
    assert judge.policy.guard and judge.describe()["policy"]["guard"]


def test_build_judge_sets_the_guard_and_refuses_it_without_pruning():
    from equiv.errors import InputError

    assert build_judge(PrunerConfig(strategy="formula", guard=True)).policy.guard
    assert not build_judge(PrunerConfig(strategy="formula")).policy.guard
    with pytest.raises(InputError, match="claim guard"):
        build_judge(PrunerConfig(strategy="none", guard=True))


def test_model_judge_reads_the_export_setting_and_an_override(tmp_path):
    plain = make_tiny_judge(tmp_path / "plain")
    guarded = make_tiny_judge(tmp_path / "guarded", settings=dict(SETTINGS, claim_guard=True))
    assert not ModelJudge(plain, device="cpu").policy.guard
    assert ModelJudge(guarded, device="cpu").policy.guard
    assert not build_judge(PrunerConfig(strategy="model", model=str(guarded), guard=False)).policy.guard
    judge = ModelJudge(guarded, device="cpu", prefilter=0.0, threshold=1e-9)
    pair = ("She scored 90 on the third test.", "She scored 95 on the third test.")
    verdict = judge.pair_verdicts([pair], [Q])[0]
    # vetoed before the model: no forward, no judge_call, no probability
    assert not verdict.merged and verdict.reason.startswith("guard:") and judge.stats.scored == 0
    assert not verdict.model_call and verdict.probability is None
    asked = judge.pair_verdicts([pair], [Q], score_ruled=True)[0]  # asked for: scored, the same verdict
    assert asked.model_call and asked.probability is not None and judge.stats.scored == 1
    assert (asked.merged, asked.reason) == (verdict.merged, verdict.reason)


def test_search_hands_the_judge_each_pairs_question():
    seen = []

    class Recording(LevenshteinJudge):
        def pair_verdicts(self, pairs, questions=None, *, score_ruled=False):
            seen.append(list(questions))
            return super().pair_verdicts(pairs, questions, score_ruled=score_ruled)

    groupings = judge_groupings(Recording(0.5))
    groupings([(Family.of(["a b c", "a b d"], "question one"), "greedy", "first"),
               (Family.of(["x y", "x z"], "question two"), "greedy", "first")])
    assert seen == [["question one", "question two"]]  # both families' pairs in one call


def test_pairs_cli_reports_false_merges_and_spread_and_takes_the_guard(tmp_path):
    data = tmp_path / "pairs.jsonl"
    rows = [
        {"id": "p1-1", "question": Q, "sentence1": "She scored 90 on the test.", "sentence2": "She scored 95 on the test.", "result": 0},
        {"id": "p1-2", "question": Q, "sentence1": "So Mia scored 90.", "sentence2": "Thus Mia scored 90.", "result": 4},
        {"id": "p2-1", "question": Q, "sentence1": "Rent is $40.", "sentence2": "Rent is $40 in all.", "result": 4},
        {"id": "p2-2", "question": Q, "sentence1": "The trip costs 45.", "sentence2": "The repair costs 45.", "result": 1},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    off = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5", "--json")
    on = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5", "--guard", "true",
                    "--output", tmp_path / "on.json")
    assert off.returncode == 0 and on.returncode == 0, off.stderr + on.stderr
    m_off, m_on = json.loads(off.stdout), json.loads((tmp_path / "on.json").read_text())
    assert (m_off["fp"], m_off["false_merge_rate"]) == (2, 1.0)
    assert (m_on["fp"], m_on["tp"], m_on["false_merge_rate"], m_on["precision"]) == (0, 2, 0.0, 1.0)
    assert m_on["problems"] == 2 and "f1_spread" in m_on and m_on["guard"]
    assert "false merge rate" in on.stdout and "the number/name guard stopped 2 merges" in on.stdout
    # a count per reason, printed and in the metrics: the guard's two vetoes name their rules
    assert sum(n for r, n in m_on["reasons"].items() if r.startswith("guard:")) == 2
    assert m_on["reasons"]["threshold"] == 2 and "decided by    " in on.stdout
    rows_file = tmp_path / "rows.json"
    assert search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5", "--guard",
                      "true", "--output", rows_file).returncode == 0
    rows = json.loads(rows_file.read_text())["pairs"]
    assert [r["source"].rsplit(":", 1)[1] for r in rows] == ["1", "2", "3", "4"]
    assert [r["merged"] for r in rows] == [False, True, True, False]
    assert rows[0]["reason"].startswith("guard:") and rows[1]["reason"] == "threshold" and rows[0]["detail"]
    floored = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5",
                         "--floor", "0.99", "--pruner.restate", "true", "--output", tmp_path / "floor.json")
    assert floored.returncode == 0, floored.stderr
    m_floor = json.loads((tmp_path / "floor.json").read_text())
    # every pair here computes nothing: below 0.99 only "So Mia scored 90." / "Thus Mia scored 90."
    # merges, as a restatement (the same words once "so" and "thus" are set aside)
    assert m_floor["floor"] == 0.99 and (m_floor["tp"], m_floor["fp"]) == (1, 0)
    assert m_floor["reasons"]["restated"] == 1 and m_floor["judge_stats"]["restated"] == 1
    assert "statement floor held back" in floored.stdout
    # the floor alone no longer turns the restatement rule on: that pair is held back by the floor
    alone = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5", "--floor", "0.99",
                       "--json")
    m_alone = json.loads(alone.stdout)
    assert alone.returncode == 0 and m_alone["tp"] == 0 and "restated" not in m_alone["reasons"]
    bad = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--pruner.restate", "maybe")
    assert bad.returncode == 2 and "restate" in bad.stderr


def test_the_prefilter_spares_the_model_not_the_rules_that_read_words():
    """A restatement whose characters differ a lot merges (a policy boxes one answer in its own words);
    a pair the prefilter would hold that a guard rule vetoes gives the rule's reason; only a pair the
    rules leave open is the prefilter's, kept apart with probability 0 and never scored."""
    boxed = ("So, the total amount Zach spent is \\(\\boxed{682}\\).", "So, Zach spent \\(\\boxed{682}\\) dollars.")
    vetoed = ("Mia scored 90.", "Then she spent 17 of her 40 dollars on the trip, leaving 23.")
    open_pair = ("She walks to the market today.", "Then add them up.")
    policy = DecisionPolicy(threshold=0.5, prefilter=0.9, guard=("different_numbers", "extra_number"), floor=0.7)
    asked: list[tuple[str, str]] = []

    def scorer(pairs):
        asked.extend(pairs)
        return [0.99] * len(pairs)

    got = decide([boxed, vetoed, open_pair], policy, scorer, [Q] * 3)
    assert [(v.merged, v.reason) for v in got] == [(True, "restated"), (False, "guard:different_numbers"), (False, "prefiltered")]
    assert got[2].probability == 0.0 and not asked  # the model saw none of them
    # the prefilter alone (rules off) holds all three, as before the order changed
    bare = DecisionPolicy(threshold=0.5, prefilter=0.9, guard=(), restate=False)
    assert [v.reason for v in decide([boxed, vetoed, open_pair], bare, scorer, [Q] * 3)] == ["prefiltered"] * 3
