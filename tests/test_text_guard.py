"""The claim guard (equiv.text.guard): named rules, each with examples that veto and examples that
pass; property tests (no rule vetoes a step against itself or its own reformatting, and the guard
is symmetric); and the corpus test, which pins each rule's vetoes on every shipped labelled file."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from equiv.text.guard import (GUARD_RULES, NUMBER_RULES, GuardRule, Veto, computes_nothing, concluded_unit, numbered_plan,
                              conclusion, fractions, guard_rule, guard_veto, problem_names, rule_names)
from equiv.text.normalize import CALCULATOR_NOTE, is_function_word, step_numbers
from tests.helpers import guard_corpus
from tests.helpers.paths import REPO_ROOT
from tests.helpers.examples import examples

Q = ("Mia scored 90 on the first test and 95 on the second. The trip costs $30 and the repair $15. "
     "She works on Monday and Tuesday. Ali has 22 medals and twice as many stamps. Jake earns thrice what "
     "Jacob does. Tashay earns $91.")
PERCENT_Q = "Adrien earned 30% more than Lylah's $40000. Karan borrowed $3,650 at 10% interest."


def vetoes(a: str, b: str, question: str = "", rules=None) -> str | None:
    """The vetoing rule's name (checking the symmetry on the way), or None."""
    veto = guard_veto(a, b, question, rules)
    assert veto == guard_veto(b, a, question, rules)
    return veto.rule if veto else None


# ---------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------


def test_every_rule_has_a_stable_name_a_rubric_clause_and_a_docstring_naming_it():
    rubric_words = ("computation", "concepts", "quantities", "claim", "logical structure", "result")
    assert len(set(rule_names())) == len(GUARD_RULES) and set(NUMBER_RULES) <= set(rule_names())
    for rule in GUARD_RULES:
        assert isinstance(rule, GuardRule) and re.fullmatch(r"[a-z]+(?:_[a-z]+)*", rule.name)
        assert any(w in rule.clause for w in rubric_words), rule
        assert "Rubric:" in (rule.check.__doc__ or ""), rule.name


def test_guard_veto_returns_the_first_rule_in_order_restricted_to_the_rules_asked():
    a, b = "So she sold 90 pies on Monday.", "So she sold 95 pies on Tuesday."
    assert guard_veto(a, b, Q) == Veto("different_numbers", "90 vs 95")
    assert guard_veto(a, b, Q, rules=["different_names"]) == Veto("different_names", "monday vs tuesday")
    assert guard_veto(a, b, Q, rules=[]) is None
    assert guard_veto(a, a, Q) is None


@pytest.mark.parametrize("rules", [["different_number"], ["different_numbers", "entities"], "different_numbers"])
def test_unknown_rule_names_are_refused(rules):
    with pytest.raises(ValueError, match="rule"):
        guard_veto("a 1", "a 2", None, rules)


def test_guard_rule_finds_each_rule_by_name_and_refuses_an_unknown_one():
    assert [guard_rule(name) for name in rule_names()] == list(GUARD_RULES)
    with pytest.raises(ValueError, match="unknown guard rule 'different_number'; known: different_numbers"):
        guard_rule("different_number")


def test_computes_nothing_is_the_statement_floors_predicate():
    assert not computes_nothing("She has 3 + 4 = 7 apples.") and not computes_nothing("So 7 apples <<3+4=7>>.")
    assert not computes_nothing("He pays 4 x $2 for them.") and not computes_nothing("The total is 8 = 12 - 4")
    assert computes_nothing("Elida has 5 letters while Adrianna has 2 less.")
    assert computes_nothing("One-fourth of the remaining dolphins are in training.")


def test_numbered_plan_is_a_list_of_sub_goals_not_one_item_of_a_worked_list():
    plan = "1. Calculate the total weight of Jon's textbooks.\n2. Divide it by three."
    assert numbered_plan(plan) and numbered_plan("To find it:\n\n1) Add the costs.\n   2) Subtract the discount.")
    assert numbered_plan("### 1. Read the question\n### 2. Add the costs")
    assert not numbered_plan("1. **Initial borrowings:**\n   Mary starts with 5 books.")  # one item of a list
    assert not numbered_plan("2. Divide it by three.\n1. Calculate the total.")  # no item 2 after item 1
    assert not numbered_plan("He has 1. 2 apples.") and not numbered_plan("She pays $1.2 then $2.1.")
    assert not numbered_plan("Step 1: find the total. Step 2: divide.")  # steps in prose, one line


# ---------------------------------------------------------------------------------------------
# The rules, by example
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b, rule", [
    ("She scored 90 on the third test.", "She scored 95 on the third test.", "different_numbers"),
    ("The cake costs 4 * 0.5 = <<4*0.5=2>>2 dollars.", "The cake costs 4 / 2 = <<4/2=2>>2 dollars.", "extra_number"),
    ("Rent is $40.", "Rent is $40 + $40 = $<<40+40=80>>80.", "extra_number"),
    ("Bobby has 60-5= <<60-5=55>>55 games.", "Bobby has 60-55=<<60-55=5>>5 games.", "different_result"),
    ("He lost 8.75 - 6.25 = <<8.75-6.25=2.5>>2.5 pounds.", "He lost 6.25 - 8.75 = <<6.25-8.75=-2.5>>-2.5 pounds.",
     "different_result"),
    ("A 2-foot by 3-foot painting takes up 1 square foot.", "A 2-foot by 3-foot painting takes up 2 square feet.",
     "swapped_number"),
])
def test_number_rules_veto(a, b, rule):
    assert vetoes(a, b, Q) == rule


@pytest.mark.parametrize("a, b", [
    ("The fee is $1,200.", "The fee is 1200 dollars."),
    ("The fee is $400 000.", "The fee is $400,000."),
    ("So x = 12.0 <<3*4=12.0>>", "So x = 12 <<3*4=12>>"),
    ("It is 99.00000000000001 years.", "It is 99 years."),
    ("Ali has 22 medals, so he has 2 * 22 = <<2*22=44>>44 stamps.", "He has 2 * 22 = <<2*22=44>>44 stamps."),  # a given
    ("There are 24 eggs in 1 tray x 2 = <<24*2=48>>48 eggs.", "24 eggs per tray * 2 = <<24*2=48>>48 eggs."),   # "1 tray"
    ("The magazine costs $4 / 2 = $<<4/2=2.0>>2.0.", "The magazine costs $4 / 2 = $<<4/2=2.0>>2."),
    ("She earns 20*$10.50=$<<20*10.50=210>>210.", "She earns 20*10.50 = $<<20*10.50=210.0>>210.00."),
    ("So 3 + 4 = 7 cats.", "So 4 + 3 = <<4+3=7>>7 cats."),                                          # operand order
    ("Cody ate 1/3*12 = <<1/3*12=4.0>>4 sandwiches.", "Cody ate 12/3=<<12/3=4>>4 sandwiches."),      # operands
    ("The fee is $<<350000*5/100=17500>>17500 in all.", "The fee is $<<350000*5/100=17500.0>>17 500 in all."),
])
def test_the_same_numbers_written_differently_pass(a, b):
    assert vetoes(a, b, Q, NUMBER_RULES) is None


@pytest.mark.parametrize("a, b", [
    ("On Wednesday he completes 52 * 0.25 = <<52*0.25=13>>13 problems.",
     "On Wednesday he completes 52 x 1/4 = <<52*1/4=13.0>>13.0 problems."),          # a fraction and its value
    ("Karan's interest is $3,650 × 0.1 = $<<3650*0.1=365>>365.",
     "Karan's interest is $3,650 x 10/100 = $<<3650*10/100=365.0>>365.0."),
    ("He earned 30/100*$40000 = $<<30/100*40000=12000.0>>12000 more.",                # per-hundred notation
     "He earned 30%*$40,000 = $<<30*.01*40000=12000.0>>12,000 more."),
])
def test_a_number_written_as_a_fraction_or_a_percent_is_that_number(a, b):
    assert vetoes(a, b, PERCENT_Q, NUMBER_RULES) is None


def test_an_ordinal_gives_its_count_and_swapped_sentences_conclude_alike():
    question = "Emma made 18 vlogs in the first week, 21 in the second and 15 in the third."
    assert vetoes("Emma made 18 + 21 + 15 = <<18+21+15=54>>54 vlogs for 3 weeks.",
                  "Emma made 18 + 21 + 15 = <<18+21+15=54>>54 vlogs.", question, NUMBER_RULES) is None
    fred, pam = "Fred used 4 x 6 = <<4*6=24>>24 tickets.", "Pam used 2 x 6 = <<2*6=12>>12 tickets."
    assert vetoes(f"{fred} {pam}", f"{pam} {fred}", Q, NUMBER_RULES) is None
    assert vetoes(f"{fred} {pam}", f"{fred} Pam used 2 x 6 = 12 and 12 - 2 = 10 tickets.", Q, NUMBER_RULES)


def test_divisions_are_not_fractions_and_per_hundred_is_notation_only_in_percent_problems():
    assert fractions("1/4 of 12/3 and 240/80 or 20 / 100") == {Decimal("0.25"): {Decimal(1), Decimal(4)}}
    # "240/80" / "210/70": two computations that share a result, not one number written twice
    assert vetoes("His route home was 240/80=<<240/80=3.0>>3 hours", "So he drove 210/70=<<210/70=3>>3 hours",
                  PERCENT_Q) == "different_numbers"
    a, b = "He earned 30/100*$40000 = $12000 more.", "He earned 30*.01*$40000 = $12000 more."
    assert vetoes(a, b, PERCENT_Q) is None
    assert guard_veto(a, b, Q) == Veto("different_numbers", "0.01 vs 100")


def test_a_percent_is_also_its_fraction():
    assert step_numbers("20% of it") == step_numbers("20 and 0.2 of it")


@pytest.mark.parametrize("text, value", [
    ("So she has 3 * 4 = <<3*4=12>>12 eggs.", "12"),                  # the prose's, not the note's
    ("It is 6.25 - 8.75 = <<6.25-8.75=-2.5>>-2.5 pounds.", "-2.5"),
    ("It costs 2 * 3 = -$6 in all.", "-6"), ("It costs 2 * 3 = $-6.", "-6"),
    ("The fee is 350 000 x 12/100 = $<<350000*12/100=42000.0>>42 000.", "42000"),   # thousands by a space
    ("First 2 + 2 = 4, then 4 * 5 = 20 apples.", "20"),               # the last '=' concludes
    ("Let x be the cost.", None), ("So x = y + 2.", None),
])
def test_a_step_concludes_with_the_number_after_its_last_equals_sign(text, value):
    found = conclusion(text)
    assert (None if found is None else format(found, "f")) == value


@pytest.mark.parametrize("a, b, detail", [
    ("So the trip costs 30 + 15 = 45 dollars.", "So the repair costs 30 + 15 = 45 dollars.", "repair vs trip"),
    ("She works 5 hours on Monday.", "She works 5 hours on Tuesday.", "monday vs tuesday"),
])
def test_a_swapped_quantity_vetoes(a, b, detail):
    assert guard_veto(a, b, Q, ["swapped_quantity"]) == Veto("swapped_quantity", detail)


def test_words_that_introduce_a_computation_are_not_quantities_but_what_it_is_of_is():
    question = "Tom needs 4 bags of 12 pounds of carrots, buys oats and wants to know what he spends."
    buys = "He buys 4 * 12 = <<4*12=48>>48 pounds of carrots."
    assert vetoes(buys, buys.replace("buys", "needs"), question) is None
    assert guard_veto(buys, buys.replace("carrots", "oats"), question) == Veto("swapped_quantity", "carrot vs oat")


def test_the_one_way_swap_of_gsm8k_train_solution_pairs_line_810_is_gone():
    """A level-4 pair that the old guard vetoed in one order only ("hunter -> people"): difflib aligned
    "hunters" with "people" reading sentence1 first, not reading sentence2 first."""
    path = REPO_ROOT / "benchmarks" / "data" / "gsm8k_train_solution_pairs.jsonl"
    row = json.loads(path.read_text(encoding="utf-8").splitlines()[809])
    assert row["id"] == "gsm8k-train-237-0" and row["result"] == 4
    assert vetoes(row["sentence1"], row["sentence2"], row["question"]) is None


@pytest.mark.parametrize("a, b, detail", [
    ("Jake earns $6 per hour 8 hours a day", "Jacob makes $6 per hour 8 hours a day", "jacob vs jake"),
    ("So on Monday she works 5 hours.", "At noon on Tuesday, she worked 5 hours in all.", "monday vs tuesday"),
])
def test_a_different_named_subject_vetoes_whatever_the_wording(a, b, detail):
    assert guard_veto(a, b, Q, ["different_names"]) == Veto("different_names", detail)


@pytest.mark.parametrize("a, b", [
    ("Jake and Tasha earned $174.", "Jake and Tashay's earnings were $174."),  # a misspelt name
    ("Jake earns $6 per hour.", "He makes $6 per hour, Jake does."),           # one name, moved ("jake" is not "make")
    ("Jake earns $6.", "He earns $6."),                                         # a name against a pronoun
])
def test_the_same_names_pass(a, b):
    assert vetoes(a, b, Q, ["different_names"]) is None


def test_a_problems_names_are_its_capitalized_words_that_are_never_common_nouns_or_function_words():
    question = "Students in Mr. Lee's class sold pies on Friday. Half of the students sold 3. How many did Tom sell?"
    assert problem_names(question) == {"mr", "lee", "friday", "tom"}
    # stemmed, "This", "Does" and "Thus" would be "thi", "doe" and "thu": still function words, not names
    question = "This week Tom sold 5 pies. Does Sam know? Thus they sold 8."
    assert problem_names(question) == {"tom", "sam"}
    assert all(is_function_word(w) for w in ("this", "thi", "does", "doe", "thus", "thu", "This"))
    assert vetoes("This is what Tom sold: 5 pies.", "Tom sold 5 pies, as Sam says.", question,
                  ["different_names"]) is None


@pytest.mark.parametrize("a, b, detail", [
    ("Blake runs 15 * 100 = <<15*100=1500>>1500 feet.", "Blake runs 15 * 100 = <<15*100=1500>>1500 yards.", "foot vs yard"),
    ("She spends 4 x 25 = <<4*25=100>>100 cents a day.", "She spends 4 x 25 = $<<4*25=100>>100 a day.", "cent vs dollar"),
    ("So the cost is 300*2=$<<300*2=600>>600 per week", "So he pays 300*2=$<<300*2=600>>600 a month for gas",
     "per month vs per week"),
    ("The weight of the bucket is 5.5 pounds", "The capacity of the bucket would be 5.5 gallons.", "gallon vs pound"),
])
def test_a_different_unit_or_rate_vetoes(a, b, detail):
    assert guard_veto(a, b, None, ["different_units"]) == Veto("different_units", detail)
    assert vetoes(a, b)


@pytest.mark.parametrize("a, b", [
    ("It weighs 2 * 3 = <<2*3=6>>6 lbs.", "It weighs 2 * 3 = <<2*3=6>>6 pounds in all."),        # one unit, two spellings
    ("He drives 60*5 = <<60*5=300>>300 miles per week.", "So he drives 60*5 = 300 miles for work."),  # a rate on one side
    ("The fee is 3 * 4 = $12.", "The fee is 3 * 4 = 12 dollars."),
])
def test_the_same_unit_passes(a, b):
    assert vetoes(a, b, "", ["different_units"]) is None


def test_the_unit_and_rate_of_a_conclusion():
    assert concluded_unit("He works 4*6 = <<4*6=24>>24 days in a month.") == ("day", "month")
    assert concluded_unit("x = 5 hours/day, so 2 + 3 = $5 each") == ("dollar", None)   # the last '=' only
    assert concluded_unit("So 2 + 3 = 5 apples in his bag.") == (None, None)
    assert concluded_unit("Let x be the cost.") == (None, None)


def test_a_different_ordinal_vetoes():
    a = "On the second day, she counted 100+50 = <<100+50=150>>150 customers."
    assert guard_veto(a, a.replace("second", "third")) == Veto("different_ordinals", "second vs third")
    assert vetoes(a, a.replace("she counted", "Sloane counts"), "", ["different_ordinals"]) is None


def test_a_comparison_turned_round_vetoes():
    a = "Elida has 5 letters while Adrianna has 2 more than twice the number of letters Elida has."
    assert guard_veto(a, a.replace("more", "less"), "How many letters?") == Veto("reversed_relation", "less vs more")
    assert vetoes(a, a.replace("more", "additional")) is None   # one direction, two words
    assert vetoes("He has 3 fewer pens.", "He has 3 less pens.") is None
    assert vetoes(a, a.replace("Adrianna has", "Adrianna owns")) is None


# The restatements of a question gemma-3-270m writes with one comparative turned round (issue 65):
# each comparative of a GSM8K relation against its opposite, in an otherwise shared sentence.
@pytest.mark.parametrize("a, b, detail", [
    ("Tom is 3 years older than Ann.", "Tom is 3 years younger than Ann.", "older vs younger"),
    ("His elder sister is 12.", "His younger sister is 12.", "older vs younger"),
    ("The oak is 5 feet taller than the pine.", "The oak is 5 feet shorter than the pine.", "shorter vs taller"),
    ("The red rope is 4 meters longer than the blue one.", "The red rope is 4 meters shorter than the blue one.",
     "longer vs shorter"),
    ("The box is 2 pounds heavier than the bag.", "The box is 2 pounds lighter than the bag.", "heavier vs lighter"),
    ("The pool is 3 times bigger than the pond.", "The pool is 3 times smaller than the pond.", "bigger vs smaller"),
    ("The pool is 3 times larger than the pond.", "The pool is 3 times smaller than the pond.", "bigger vs smaller"),
    ("Her score is 10 points higher than his.", "Her score is 10 points lower than his.", "higher vs lower"),
    ("The train is 20 mph faster than the bus.", "The train is 20 mph slower than the bus.", "faster vs slower"),
    ("She arrives 15 minutes earlier than Ben.", "She arrives 15 minutes later than Ben.", "earlier vs later"),
    ("The park is 2 miles farther than the school.", "The park is 2 miles closer than the school.", "closer vs farther"),
    ("The number is 6 greater than twice the other.", "The number is 6 less than twice the other.", "less vs more"),
])
def test_a_comparative_turned_round_vetoes(a, b, detail):
    assert guard_veto(a, b, "How old is Ann?") == Veto("reversed_relation", detail)
    assert guard_veto(b, a, "How old is Ann?") == Veto("reversed_relation", detail)


@pytest.mark.parametrize("a, b", [
    ("Tom is 3 years older than Ann.", "Tom is 3 years elder than Ann."),          # one direction, two words
    ("The pool is 3 times bigger than the pond.", "The pool is 3 times larger than the pond."),
    ("The train is 20 mph faster than the bus.", "The train is 20 mph quicker than the bus."),
    ("The number is 6 greater than the other.", "The number is 6 more than the other."),
    ("Tom is 3 years older than Ann.", "So Tom is 3 years older than Ann now."),    # "older" on both sides
    ("The oak is 5 feet taller than the pine.", "The oak is 5 feet longer than the pine."),  # two scales, no opposite
    ("Tom has 3 more books than Ann.", "Tom has 3 older books than Ann."),          # "more" is no age
    ("We know that Tom is 3 years older than Ann today.", "We know that Ann is 3 years younger than Tom today."),
    ("We know that Tom has 3 more pens than Ann today.", "We know that Ann has 3 fewer pens than Tom today."),
])
def test_a_synonym_or_the_converse_of_a_comparative_passes(a, b):
    assert vetoes(a, b, "How old is Ann?", ["reversed_relation"]) is None


ELIDA = "Elida has 5 letters while Adrianna has "


# The false merges of issue 65: gemma-3-270m's restatements of a question's relation, one side adding
# or dropping a comparison (benchmarks/data/gsm8k_train_siblings_gemma270m_heldout.jsonl, level 1)
@pytest.mark.parametrize("a, b, detail", [
    ("Debora has 12 more dresses", "Debora has 12 dresses:", "12 vs 12 more"),
    ("Debora has 12 more dresses than Melissa.", "Debora has 12 dresses:", "12 vs 12 more"),
    (ELIDA + "2 less than twice the number of letters Elida has.", ELIDA + "2 less.", "2 less vs 2 less than twice"),
    (ELIDA + "2 less.", ELIDA + "2 less than twice the number of letters.", "2 less vs 2 less than twice"),
    (ELIDA + "2 times the number of letters Elida has.", ELIDA + "2 more than twice the number of letters Elida has.",
     "2 more than twice vs 2 times"),
    (ELIDA + "2 times the number of letters Elida has.", ELIDA + "2 less than twice the number of letters Elida has.",
     "2 less than twice vs 2 times"),
    (ELIDA + "2 less than twice the number of letters.", ELIDA + "2 less than or twice the number of letters.",
     "2 less vs 2 less than twice"),
    ("Adrianna has two less than twice the letters.", "Adrianna has two less than the letters.", "two less vs two less than twice"),
])
def test_a_comparison_added_dropped_or_rewritten_after_a_stated_number_vetoes(a, b, detail):
    assert guard_veto(a, b, "How many letters?") == Veto("changed_comparison", detail)
    assert guard_veto(b, a, "How many letters?") == Veto("changed_comparison", detail)


@pytest.mark.parametrize("a, b", [
    # rewordings of the labelled files that the rule must leave alone
    ("1. Calculate the total number of hours Sangita has already completed.\n2. Subtract this total from her "
     "goal to find out how many more hours she needs to fly.",
     "1. Calculate the total number of hours Sangita has already completed so far.\n2. Subtract this total "
     "from her goal to find out how many hours she still needs to fly."),        # no number before "more"
    ("Therefore, the amount of money Classroom A still needs is \\boxed{30}.",
     "Therefore, Classroom A needs \\boxed{30} more dollars to reach the goal."),  # one shared word before 30
    ("Calculate the cookies Paula bought by subtracting 3 from the cookies Paul bought.",
     "Calculate the cookies Paula bought, which is 3 fewer than Paul."),        # 3 after no shared word
    ("He needs 60 - 47 = <<60-47=13>>13 more dollars", "So he still needs 60 - 47 = <<60-47=13>>13 dollars"),  # computes
    ("Her earnings are 7 hours \\times $10/hour.", "Her earnings are 7 hours * $10/hour."),  # a LaTeX sign
    ("Debora has 12 more dresses than Melissa.", "Debora has 12 more dresses."),   # the same comparison
    ("Debora has 12 more dresses.", "Debora has 12 additional dresses."),         # synonyms
    ("Debora has 12 fewer dresses.", "Debora has 12 less dresses."),
    (ELIDA + "2 more than twice the number.", ELIDA + "2 more than double the number."),
])
def test_the_same_comparison_or_one_not_of_a_shared_number_passes(a, b):
    assert vetoes(a, b, "", ["changed_comparison"]) is None


# Problem 13 of GSM8K test, as Qwen2.5-Coder-1.5B-Instruct solved it in MCTS: algebra in an unknown
LEFT = ("After selling \\( \\frac{x}{3} - 1 \\) vacuum cleaners at the orange house, the number left is:\n"
        "\\[\n\\frac{2x}{3} - 2 - \\left( \\frac{x}{3} - 1 \\right) = \\frac{2x}{3} - 2 - \\frac{x}{3} + 1 = {END}\n\\]")
MELANIE = ("Melanie is a door-to-door saleswoman. She sold a third of her vacuum cleaners at the green house, 2 more "
           "to the red house, and half of what was left at the orange house. If Melanie has 5 vacuum cleaners left, "
           "how many did she start with?")


@pytest.mark.parametrize("end_a, end_b, detail", [
    ("\\frac{x}{3} - 1", "\\frac{x}{3}", "concludes (x)/(3) vs (x)/(3)-1"),
    ("\\frac{x}{3} - 1", "\\frac{x}{3} + 1", "concludes (x)/(3)+1 vs (x)/(3)-1"),
    ("\\frac{x}{3} - 1", "\\frac{x}{3} - 1 \\]\nShe has 5 left, so \\[ \\frac{x}{3} - 1 = 5",
     "concludes (x)/(3)-1 vs 5"),
])
def test_different_algebraic_results_veto(end_a, end_b, detail):
    a, b = LEFT.replace("{END}", end_a), LEFT.replace("{END}", end_b)
    assert guard_veto(a, b, MELANIE) == Veto("different_algebra", detail)
    assert vetoes(a, b, MELANIE) == "different_algebra"


@pytest.mark.parametrize("end_a, end_b", [
    ("\\frac{x}{3} - 1", "\\frac{2x - x}{3} - 1"),            # the same result, simplified less
    ("\\frac{x}{3} - 1", "\\frac{1}{3}x - 1 \\text{ cleaners}"),  # another spelling and a label
    ("\\frac{x}{3} - 1", "\\sqrt{x}"),                        # not read: the model decides
])
def test_the_same_algebraic_result_or_one_not_read_passes(end_a, end_b):
    assert vetoes(LEFT.replace("{END}", end_a), LEFT.replace("{END}", end_b), "", ["different_algebra"]) is None


def test_only_latex_spans_are_read_as_algebra_never_currency_or_a_times_sign():
    # "$50 x $" is currency around a times sign, not the formula "50 x" (a property test found it)
    a = "There will be 50 x 10 = 500 matches in the box."
    assert vetoes(a, a.replace("50", "$50").replace("10", "$10").replace("500", "$500"), "",
                  ["different_algebra"]) is None
    assert vetoes("She has \\( 2x \\) cars.", "She has $2x$ cars.", "", ["different_algebra"]) is None


def test_sides_in_different_unknowns_are_not_compared():
    # both readers: equivalent (the common difference named d on one side, r on the other)
    a = "The sum is given by:\n\\[ S_n = \\frac{n}{2} \\left(2a + (n-1)d\\right) \\]"
    assert vetoes(a, a.replace(")d", ")r"), "", ["different_algebra"]) is None
    assert vetoes(a, a.replace("2a", "3a"), "", ["different_algebra"]) == "different_algebra"


def test_numbers_alone_are_left_to_the_number_rules():
    assert vetoes("\\[ 13 - 4 = 9 \\]", "\\[ 13 - 3 = 10 \\]", "", ["different_algebra"]) is None
    assert vetoes("Sold 2 + 1 = <<2+1=3>>3.", "Sold 2 + 2 = <<2+2=4>>4.", "", ["different_algebra"]) is None


# Problem 16 of GSM8K test, as Qwen2.5-Coder-1.5B-Instruct wrote it in MCTS: its steps were Python
CODE = ("# Calculate the total distance covered by each train in the two days\n"
        "total_westward_distance = {WEST}\ntotal_northward_distance = northward_first_day + northward_second_day")


@pytest.mark.parametrize("west_a, west_b", [
    ("westward_first_day + westward_second_day", "(westward_first_day + westward_second_day) * 2"),  # merged, read 1
    ("160", "300"),
    ("westward_first_day * 2", "westward_first_day ** 2  # squared"),
])
def test_one_variable_assigned_different_values_vetoes(west_a, west_b):
    a, b = CODE.replace("{WEST}", west_a), CODE.replace("{WEST}", west_b)
    assert vetoes(a, b, "", ["different_assignment"]) == "different_assignment"
    assert guard_veto(a, b, "", ["different_assignment"]).detail.startswith("total_westward_distance = ")


@pytest.mark.parametrize("west_a, west_b", [
    ("westward_first_day + westward_second_day", "westward_second_day+westward_first_day  # the sum"),
    ("2 * (westward_first_day + 1)", "westward_first_day * 2 + 2"),
    ("westward_first_day + westward_second_day", "80 + 80"),           # names on one side: maybe one computation
    ("westward_first_day + westward_second_day", "day_1 + day_2"),      # names apart: maybe a renaming
    ("westward_first_day + westward_second_day", "sum(westward)"),     # a call: not read
])
def test_the_same_value_or_sides_not_compared_pass(west_a, west_b):
    a, b = CODE.replace("{WEST}", west_a), CODE.replace("{WEST}", west_b)
    assert vetoes(a, b, "", ["different_assignment"]) is None


def test_assignments_to_different_variables_are_not_compared():
    assert vetoes("west = 80", "north = 150", "", ["different_assignment"]) is None


@pytest.mark.parametrize("a, b", [
    ("She scored 90 on the first test.", "Mia scored 90 on the first test."),    # pronoun vs name
    ("So Mia scored 90.", "Thus Mia scored 90."),                                 # connective
    ("Ali has 22 medals.", "Ali had 22 medals."),                                 # inflection
    ("The trip costs $30 in total for all of the travel.", "Travelling there is a $30 trip."),  # a rewording
])
def test_rewordings_pass(a, b):
    assert vetoes(a, b, Q) is None


def test_without_a_question_only_the_rules_that_need_none_run():
    assert vetoes("the trip costs 45", "the repair costs 45") is None
    assert vetoes("Ali has 22 medals.", "So Ali has 22 medals and 44 stamps.") == "extra_number"


# ---------------------------------------------------------------------------------------------
# Properties: no rule vetoes a step against itself or its own reformatting; the guard is symmetric
# ---------------------------------------------------------------------------------------------

NAMES = ["Mia", "Ali", "Jake", "Tashay", "she", "he", "They"]
NOUNS = ["apples", "medals", "stamps", "tickets", "pies", "trip", "repair"]
UNITS = ["feet", "yards", "pounds", "dollars", "hours", "cents", "gallons", "miles"]
DAYS = ["Monday", "Tuesday", "the second day", "the third day"]
OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f")


@st.composite
def steps(draw) -> str:
    """A GSM8K-like step: a statement or a computation, with or without a calculator note."""
    name, noun, unit, day = (draw(st.sampled_from(xs)) for xs in (NAMES, NOUNS, UNITS, DAYS))
    x = Decimal(draw(st.integers(1, 20000)))
    y = Decimal(draw(st.sampled_from(["2", "3", "12", "0.5", "1.25", "40", "1500"])))
    op = draw(st.sampled_from(sorted(OPS)))
    result = _fmt(OPS[op](x, y))
    note = f"<<{_fmt(x)}{op}{_fmt(y)}={result}>>" if draw(st.booleans()) else ""
    return draw(st.sampled_from([
        f"{name} has {_fmt(x)} {noun} on {day}.",
        f"So {name} sells {_fmt(x)} {op} {_fmt(y)} = {note}{result} {noun}.",
        f"On {day}, {name} walks {_fmt(x)} {op} {_fmt(y)} = {note}{result} {unit}",
        f"The {noun} costs ${_fmt(x)}, so {name} pays {_fmt(x)} {op} {_fmt(y)} = ${note}{result} in all.",
        f"{name} has 2 more {noun} than twice the {noun} on {day}, so {_fmt(x)} {noun}.",
    ]))


_PROSE_NUMBER = re.compile(r"(?<![\w.,$])\d+(?:\.\d+)?(?![\d,]|\.\d)")


def _outside_notes(text: str, edit) -> str:
    """``edit`` applied to the prose between calculator notes, the notes kept as they are."""
    parts, last = [], 0
    for note in CALCULATOR_NOTE.finditer(text):
        parts += [edit(text[last:note.start()]), note.group(0)]
        last = note.end()
    return "".join(parts + [edit(text[last:])])


def _group_thousands(match: re.Match[str]) -> str:
    whole, dot, frac = match.group(0).partition(".")
    return f"{int(whole):,}" + dot + frac


def _dollar(match: re.Match[str]) -> str:
    return "$" + match.group(0)


# "$<<2000*3=6000>>6000" is already in dollars: the "$" before the note is the result's, so the
# reformatting must not write a second one after it ("$<<...>>$6000" reads as "$$6000", no writer's text)
_DOLLAR_NOTE = re.compile(r"(\$\s*<<[^<>]*>>)\$")


def _whitespace(text: str, wide: str) -> str:
    # a space between two words (never between digits, where it may group thousands) widened
    return re.sub(r"(?<=[A-Za-z,.]) (?=[A-Za-z])", wide, text)


def _drop_repeated_notes(text: str) -> str:
    """Calculator notes removed where each only repeats numbers the prose states."""
    prose = step_numbers(CALCULATOR_NOTE.sub(" ", text))
    return CALCULATOR_NOTE.sub(lambda m: "" if step_numbers(m.group(0)) <= prose else m.group(0), text)


REFORMATS = {
    "whitespace": lambda t: "  " + _whitespace(t, " \n ") + "\n",
    "thousands": lambda t: _outside_notes(t, lambda s: _PROSE_NUMBER.sub(_group_thousands, s)),
    "notes": _drop_repeated_notes,
    "dollar": lambda t: _DOLLAR_NOTE.sub(r"\1", _outside_notes(
        t, lambda s: re.sub(r"(?<![\w.,$%-])(?<!\d )\d+(?:\.\d+)?(?![\d,%]|\.\d)", _dollar, s))),
    "trailing_period": lambda t: t[:-1] if t.rstrip().endswith(".") else t.rstrip() + ".",
    "case": lambda t: t.lower(),
}


def _no_rule_vetoes(a: str, b: str, question: str) -> None:
    for rule in GUARD_RULES:
        assert rule.check(a, b, question) is None, (rule.name, a, b)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(step=steps(), reformat=st.sampled_from(sorted(REFORMATS)))
def test_no_rule_vetoes_a_generated_step_against_itself_or_its_reformatting(step, reformat):
    _no_rule_vetoes(step, step, Q)
    _no_rule_vetoes(step, REFORMATS[reformat](step), Q)


def _corpus_rows() -> list[dict]:
    rows = []
    for key, path in guard_corpus.labelled_files().items():
        if key.startswith(guard_corpus.SHARED_PREFIX):
            continue  # the repository's own files are enough to draw from (the shared part may be absent)
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return rows


CORPUS = _corpus_rows()


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(CORPUS), side=st.sampled_from(["sentence1", "sentence2"]),
       reformat=st.sampled_from(sorted(REFORMATS)))
def test_no_rule_vetoes_a_corpus_step_against_itself_or_its_reformatting(row, side, reformat):
    step, question = row[side], row.get("question") or ""
    _no_rule_vetoes(step, step, question)
    _no_rule_vetoes(step, REFORMATS[reformat](step), question)


@st.composite
def pairs(draw) -> tuple[str, str]:
    """Two generated steps, or one and a copy with one number, word or name changed (so rules fire)."""
    a = draw(steps())
    if draw(st.booleans()):
        return a, draw(steps())
    words = a.split(" ")
    i = draw(st.integers(0, len(words) - 1))
    words[i] = draw(st.sampled_from(NAMES + NOUNS + UNITS + ["7", "12", "second", "less", "more", "twice", "1,500"]))
    return a, " ".join(words)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=pairs(), question=st.sampled_from([Q, PERCENT_Q, "", "How many?"]))
def test_the_guard_and_each_rule_are_symmetric_on_generated_pairs(pair, question):
    a, b = pair
    assert guard_veto(a, b, question) == guard_veto(b, a, question)
    for rule in GUARD_RULES:
        assert rule.check(a, b, question) == rule.check(b, a, question), rule.name


@pytest.mark.slow  # every rule both ways on every shipped pair (about 5 s of CPU); symmetry stays in the
# default suite through the generated pairs above
def test_the_guard_and_each_rule_are_symmetric_on_every_corpus_pair():
    for key, path in guard_corpus.labelled_files().items():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            a, b, question = row["sentence1"], row["sentence2"], row.get("question") or ""
            for rule in GUARD_RULES:
                assert rule.check(a, b, question) == rule.check(b, a, question), (key, row["id"], rule.name)


# ---------------------------------------------------------------------------------------------
# The corpus: each rule's price on every shipped labelled file, pinned
# ---------------------------------------------------------------------------------------------


SNAPSHOT_ENTRIES = json.loads(guard_corpus.SNAPSHOT.read_text(encoding="utf-8"))
LABELLED_FILES = guard_corpus.labelled_files()


def test_the_snapshot_has_one_entry_per_shipped_labelled_file():
    in_repo = {k for k in SNAPSHOT_ENTRIES if not k.startswith(guard_corpus.SHARED_PREFIX)}
    assert in_repo == {k for k in LABELLED_FILES if not k.startswith(guard_corpus.SHARED_PREFIX)}, \
        "a labelled file was added or removed: regenerate the snapshot"
    missing = sorted(set(LABELLED_FILES) - set(SNAPSHOT_ENTRIES))
    assert not missing, f"{missing} have no snapshot entry: regenerate the snapshot"


@pytest.mark.parametrize("key", sorted(LABELLED_FILES))  # one test per file: the workers share them
def test_each_rules_vetoes_on_the_shipped_labelled_files_match_the_snapshot(key):
    """Regenerate after a deliberate change with ``python -m tests.helpers.guard_corpus --update``
    (with the shared data present); the snapshot's diff is the change's price."""
    assert key in SNAPSHOT_ENTRIES, f"{key} has no snapshot entry: regenerate the snapshot"
    assert guard_corpus.file_price(LABELLED_FILES[key]) == SNAPSHOT_ENTRIES[key], f"{key}: the guard's vetoes changed"


def test_the_snapshot_counts_every_rule_and_the_shared_files():
    snapshot = json.loads(guard_corpus.SNAPSHOT.read_text(encoding="utf-8"))
    assert any(k.startswith(guard_corpus.SHARED_PREFIX) for k in snapshot)
    for entry in snapshot.values():
        assert set(entry["rule_alone"]) == set(rule_names())
        assert entry["guard"]["equivalent"] == len(entry["equivalent_vetoed"])


def test_the_corpus_regenerator_refuses_to_update_without_the_shared_files(tmp_path, monkeypatch):
    monkeypatch.setattr(guard_corpus, "SHARED_DATA", Path(tmp_path))
    monkeypatch.setattr(guard_corpus, "SNAPSHOT", tmp_path / "guard_corpus.json")
    assert guard_corpus.main(["--update"]) == 2
    assert not (tmp_path / "guard_corpus.json").exists()


def test_the_cut_off_sweep_prices_each_neighbour_and_restores_the_shipped_values(tmp_path):
    import equiv.text.guard as guard_module

    rows = [{"id": "1", "question": Q, "sentence1": "So the trip costs 30 + 15 = 45.", "sentence2": "So the repair costs 30 + 15 = 45.", "result": 0},
            {"id": "2", "question": Q, "sentence1": "So Mia scored 90.", "sentence2": "Thus Mia scored 90.", "result": 4}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    shipped = {name: getattr(guard_module, name) for name in guard_corpus.SWEEP}
    prices = guard_corpus.sweep({"pairs.jsonl": path})
    assert [(n, v) for n, v, _, _ in prices] == [(n, v) for n, vs in guard_corpus.SWEEP.items() for v in vs]
    assert ("SHARED_SENTENCE", 0.7, 0, 1) in prices
    assert {name: getattr(guard_module, name) for name in guard_corpus.SWEEP} == shipped


def test_latex_arithmetic_computes_and_a_plan_does_not():
    """The statement floor's predicate reads LaTeX math spans: before, ``\\[ 3000 \\text{ grams} + 20
    \\text{ grams} = 3020 \\]`` counted as computing nothing (the units sit between the numbers and
    the operators), so the floor held such pairs as if they were restated facts."""
    from equiv.text.guard import computes

    assert computes(r"Next, we add: \[ 3000 \text{ grams} + 20 \text{ grams} = 3020 \text{ grams} \]")
    assert computes(r"\[ \text{Slices eaten} = \frac{12}{2} = 6 \]")
    assert not computes(r"Thus, the owner started with \(\boxed{3020}\) grams of sugar.")
    assert not computes("1. Calculate the total weight of the sugar in the 12 packs.")


def test_escaped_dollars_and_labelled_operands_compute():
    """Qwen2.5-Coder writes Markdown: it escapes the dollar sign (``\\$70``) and labels the terms of a
    sum (``$70 (Monday) + $50 (Tuesday)``). Before, either hid the arithmetic from the statement
    floor's predicate, and ``= \\$310`` hid the conclusion from ``different_result``, which then read
    the step as concluding another number (an equivalent pair of the width-10 siblings vetoed as
    "concludes 310 vs 620")."""
    from equiv.text.guard import computes, different_result, results

    assert computes(r"- Total earnings = \$70 + \$50 + \$70 = \$190.")
    assert computes("- Total earnings = $70 (Monday) + $50 (Tuesday) + $70 (Wednesday) = $190.")
    assert computes(r"- Total earnings = \$70 (Monday) + \$50 (Tuesday) = \$120.")
    assert results(r"\[ \text{Cost for Monday} = 620 \text{ miles} \times \$0.50 \text{ per mile} = \$310 \]")[-1] == 310
    monday = r"Zach drove 620 miles. \[ \text{Cost} = 620 \times \$0.50 = \$310 \]"
    assert different_result(monday, r"\[ 0.50 \times 620 = 310 \text{ dollars} \]", "") is None
    assert different_result(monday, r"\[ 0.50 \times 620 = 320 \text{ dollars} \]", "")
    # a label is words in parentheses: a number in them, or none at all, is not an operand's label
    assert not computes("She counts 3 (the apples on the left) and then the pears.")
    assert not computes("1. Find the cost for Monday (620 miles) - the first day.")
    assert not computes(r"The answer is \(\boxed{\$310}\).")
