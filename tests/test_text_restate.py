"""The restatement rule (equiv.text.restate) and its stage in the one evaluator: examples that are
restatements and near misses that are not; property tests (symmetric; a statement restates itself
and its reformatting; nothing that computes is ever a restatement); and the decision stage (only
with the statement floor on, after the guard, and a threshold sweep sees it as merged at any
threshold). The corpus test that pins its merges on every shipped labelled file is
``test_each_rules_vetoes_on_the_shipped_labelled_files_match_the_snapshot`` (tests/test_text_guard.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from equiv.judge.decide import RESTATED, decide, sweep_scores
from equiv.judge.policy import DecisionPolicy
from equiv.text.guard import computes_nothing
from equiv.text.restate import SAME_ANSWER, SAME_BOXED, SAME_WORDS, boxed_answer, content_key, restatement, stated_answer
from tests.test_text_guard import CORPUS, REFORMATS, steps
from tests.helpers.examples import examples


@pytest.mark.parametrize("a, b, kind", [
    ("There was 40 people in the hall.", "There were 40 people in the hall.", SAME_WORDS),
    ("Tom put new tires on 3 cars and 1 truck every month.", "Tom puts new tires on 3 cars and 1 truck every month.",
     SAME_WORDS),
    ("The total weight of fish she caught was 4.5 pounds.", "The total weight of fish that she caught was 4.5 pounds.",
     SAME_WORDS),
    ("Stephanie needs to pay $40 for the gas bill and $5 for the water bill.",
     "Stephanie needs to pay 40 for the gas bill, and 5 for the water bill", SAME_WORDS),
    ("The answer is 21.", "The answer is 21 gallons.", SAME_ANSWER),
    ("So the answer is 4,200 miles", "The final answer is 4200.", SAME_ANSWER),
    # the bundled 1.5B's conclusions (development siblings, labelled equivalent)
    ("Therefore, the total number of miles Molly rode her bike is \\(\\boxed{3285}\\).",
     "Therefore, the total distance Molly rode her bike is:\n\\[\n\\boxed{3285}\n\\]", SAME_BOXED),
    ("Therefore, Sangita must fly \\(\\boxed{220}\\) hours per month to meet her goal of 1,500 hours in exactly 6 months.",
     "Therefore, Sangita must fly \\boxed{220} hours per month to meet her goal in exactly 6 months.", SAME_BOXED),
    ("The total cost is \\(\\boxed{\\$1,320}\\).", "So he spends \\(\\boxed{1320}\\) dollars in all.", SAME_BOXED),
])
def test_rewordings_and_an_answer_with_or_without_its_unit_are_restatements(a, b, kind):
    assert restatement(a, b) == restatement(b, a) == kind


@pytest.mark.parametrize("a, b", [
    # a claim word changes the claim
    ("Debora has 12 more dresses than Melissa.", "Debora has 12 dresses than Melissa."),
    ("Elida has 2 less than twice the letters.", "Elida has 2 less than or twice the letters."),
    ("Each stamp costs 55 cents.", "No stamp costs 55 cents."),
    ("He has 5 apples.", "She has 5 apples."),  # a pronoun names a person
    ("His sister has 5 apples.", "Her sister has 5 apples."),
    # numbers keep their sign and percent sign, and their order
    ("The temperature is -5 degrees.", "The temperature is 5 degrees."),
    ("20% of the cars are red.", "20 of the cars are red."),
    ("There are 18 votes for A and 20 votes for B.", "There are 20 votes for A and 18 votes for B."),
    # a word on one side only
    ("Each stamp costs 55 cents to buy.", "Each stamp costs 55 cents."),
    ("The trip costs $150.", "The repair costs $150."),
    # answers: another number, another unit, or more than one number
    ("The answer is 21.", "The answer is 12."),
    ("The answer is 15 apples.", "The answer is 15 dollars."),
    ("The answer is 15 or 16.", "The answer is 15."),
    # a step that computes is never a restatement, however alike
    ("So 3 + 4 = 7 apples.", "So 3 * 4 = 7 apples."),
    ("The answer is 5.", "The answer was 2 + 3 = 5."),
    # boxes: another number, two boxes, a box that is not one number, a box beside a computation
    ("So she has \\(\\boxed{12}\\) apples.", "So she has \\(\\boxed{21}\\) apples."),
    ("The answers are \\boxed{3} and \\boxed{4}.", "The answer is \\boxed{3}."),
    ("The share is \\(\\boxed{\\frac{1}{2}}\\).", "The share is \\(\\boxed{\\frac{1}{2}}\\) of the cake."),
    ("The rate is \\(\\boxed{20\\%}\\).", "The growth is \\(\\boxed{20\\%}\\) a year."),
    ("So the total is \\(3 + 4 = \\boxed{7}\\).", "So the total is \\(\\boxed{7}\\)."),
])
def test_near_misses_are_not_restatements(a, b):
    assert restatement(a, b) is None and restatement(b, a) is None


def test_the_keys_read_numbers_as_values_and_keep_claim_words():
    assert content_key("Bo has $1,200.00 and not 3 cats.") == ("bo", "1200", "and", "not", "3", "cat")
    assert content_key("20% of it, -4.50 left.") == content_key("20 percent of it, -4.5 left") == (
        "20", "percent", "it", "-4.5", "left")
    assert stated_answer("Thus, the answer is $18 dollars.") == (18, frozenset({"dollar"}))
    assert stated_answer("The answer is 3 + 4 = 7.") is None  # two numbers: no single answer stated
    assert stated_answer("Bo has 7.") is None


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=steps(), b=steps())
def test_restatement_is_symmetric_and_only_between_statements(a, b):
    assert restatement(a, b) == restatement(b, a)
    if restatement(a, b) is not None:
        assert computes_nothing(a) and computes_nothing(b)


STATEMENT_REFORMATS = ("whitespace", "thousands", "dollar", "trailing_period", "case")


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(CORPUS), side=st.sampled_from(["sentence1", "sentence2"]),
       reformat=st.sampled_from(STATEMENT_REFORMATS))
def test_a_corpus_statement_restates_itself_and_its_reformatting(row, side, reformat):
    step = row[side]
    changed = REFORMATS[reformat](step)
    assume(computes_nothing(step) and computes_nothing(changed))
    assert restatement(step, step) == SAME_WORDS
    assert restatement(step, changed) == SAME_WORDS, (step, changed)


# ---------------------------------------------------------------------------------------------
# The stage in the evaluator
# ---------------------------------------------------------------------------------------------

PAIRS = [("There was 40 people in the hall.", "There were 40 people in the hall."),  # restated
         ("The answer is 21.", "The answer is 21 gallons."),                          # restated
         ("The answer is 21.", "The answer is 12 gallons."),                          # the guard vetoes
         ("Bo has 3 cats.", "Bo owns 3 cats.")]                                        # a statement pair, not restated
GUARDED = DecisionPolicy(threshold=0.5, prefilter=None, guard=("different_numbers",), floor=0.9, same_step="off")


def test_with_the_floor_on_a_restatement_merges_whatever_the_probability_after_the_guard():
    verdicts = decide(PAIRS, GUARDED, [0.1, 0.6, 0.99, 0.6])
    assert [(v.merged, v.reason) for v in verdicts] == [
        (True, RESTATED), (True, RESTATED), (False, "guard:different_numbers"), (False, "floor")]
    assert (verdicts[0].detail, verdicts[1].detail) == (SAME_WORDS, SAME_ANSWER)
    assert verdicts[0].probability == 0.1  # the model's, kept for the reader


def test_without_the_floor_statement_pairs_are_decided_by_the_threshold_alone():
    verdicts = decide(PAIRS, DecisionPolicy(threshold=0.5, prefilter=None, guard=("different_numbers",), floor=None,
                                            same_step="off"), [0.1, 0.6, 0.99, 0.6])
    assert [(v.merged, v.reason) for v in verdicts] == [
        (False, "below_threshold"), (True, "threshold"), (False, "guard:different_numbers"), (True, "threshold")]


def test_a_threshold_sweep_sees_a_restatement_as_merged_at_any_threshold():
    verdicts = decide(PAIRS, GUARDED, [0.1, 0.6, 0.99, 0.6])
    assert sweep_scores(PAIRS, verdicts, GUARDED) == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize(("step", "value"), [
    ("is \\(\\boxed{3285}\\).", "3285"),
    ("\\boxed{ 1,320 }", "1320"),
    ("\\boxed{\\$12.50}", "12.5"),
    ("\\boxed{$ 12}", "12"),
    ("\\boxed{20\\%}", None),
    ("\\boxed{20%}", None),
    ("\\boxed{-5}", None),
    ("\\boxed{x = 4}", None),
    ("\\boxed{3} or \\boxed{4}", None),
    ("no box at all: 7", None),
])
def test_a_box_is_read_only_when_it_holds_one_number(step, value):
    from decimal import Decimal

    assert boxed_answer(step) == (None if value is None else Decimal(value))
