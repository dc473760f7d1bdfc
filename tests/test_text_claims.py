"""The claim guard: different numbers or a swapped entity veto a merge; rewordings do not."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from equiv.prune import LevenshteinJudge, ModelJudge, PrunerConfig, build_judge
from equiv.search.dispatch import judge_verdicts
from equiv.text.claims import (below_statement_floor, claim_check, computes, concluded_unit, conclusion, entity_conflict, fractions, name_conflict,
                               number_conflict, ordinal_conflict, problem_names, relation_conflict, step_numbers,
                               unit_conflict)
from tests.helpers.cli import search_cli
from tests.helpers.judges import SETTINGS, make_tiny_judge

Q = ("Mia scored 90 on the first test and 95 on the second. The trip costs $30 and the repair $15. "
     "She works on Monday and Tuesday. Ali has 22 medals and twice as many stamps. Jake earns thrice what "
     "Jacob does. Tashay earns $91.")


@pytest.mark.parametrize("a, b", [
    ("She scored 90 on the third test.", "She scored 95 on the third test."),        # a number changed
    ("Rent is $40.", "Rent is $40 + $40 = $<<40+40=80>>80."),                       # an extra computed claim
    ("The cake costs 4 * 0.5 = <<4*0.5=2>>2 dollars.", "The cake costs 4 / 2 = <<4/2=2>>2 dollars."),  # another method
    # the same numbers, a different conclusion (operands swapped; the sign of a difference)
    ("Bobby has 60-5= <<60-5=55>>55 games.", "Bobby has 60-55=<<60-55=5>>5 games."),
    ("He lost 8.75 - 6.25 = <<8.75-6.25=2.5>>2.5 pounds.", "He lost 6.25 - 8.75 = <<6.25-8.75=-2.5>>-2.5 pounds."),
    # one number swapped in a shared sentence, the other number stated elsewhere in the step
    ("A 2-foot by 3-foot painting takes up 1 square foot.", "A 2-foot by 3-foot painting takes up 2 square feet."),
])
def test_different_numbers_veto(a, b):
    assert number_conflict(a, b, Q)
    assert claim_check(a, b, Q).veto


@pytest.mark.parametrize("a, b", [
    ("The fee is $1,200.", "The fee is 1200 dollars."),
    ("The fee is $400 000.", "The fee is $400,000."),
    ("So x = 12.0 <<3*4=12.0>>", "So x = 12 <<3*4=12>>"),
    ("It is 99.00000000000001 years.", "It is 99 years."),
    ("Ali has 22 medals, so he has 2 * 22 = <<2*22=44>>44 stamps.", "He has 2 * 22 = <<2*22=44>>44 stamps."),  # a restated given
    ("There are 24 eggs in 1 tray x 2 = <<24*2=48>>48 eggs.", "24 eggs per tray * 2 = <<24*2=48>>48 eggs."),   # "1 tray"
])
def test_the_same_numbers_written_differently_pass(a, b):
    assert number_conflict(a, b, Q) == ""


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


@pytest.mark.parametrize("a, b", [
    ("The magazine costs $4 / 2 = $<<4/2=2.0>>2.0.", "The magazine costs $4 / 2 = $<<4/2=2.0>>2."),   # 2.0 / 2.
    ("She earns 20*$10.50=$<<20*10.50=210>>210.", "She earns 20*10.50 = $<<20*10.50=210.0>>210.00."),
    ("So 3 + 4 = 7 cats.", "So 4 + 3 = <<4+3=7>>7 cats."),                                          # operand order
    ("Cody ate 1/3*12 = <<1/3*12=4.0>>4 sandwiches.", "Cody ate 12/3=<<12/3=4>>4 sandwiches."),      # a computation's operands
    ("The fee is $<<350000*5/100=17500>>17500 in all.", "The fee is $<<350000*5/100=17500.0>>17 500 in all."),
])
def test_the_same_conclusion_and_the_same_numbers_pass(a, b):
    assert number_conflict(a, b, Q) == ""


@pytest.mark.parametrize("a, b, swap", [
    ("Jake earns $6 per hour 8 hours a day", "Jacob makes $6 per hour 8 hours a day", "jake -> jacob"),
    ("So on Monday she works 5 hours.", "At noon on Tuesday, she worked 5 hours in all.", "monday -> tuesday"),
])
def test_a_different_named_subject_vetoes_whatever_the_wording(a, b, swap):
    assert name_conflict(a, b, Q) == swap
    assert claim_check(a, b, Q).veto


def test_a_problems_names_are_its_capitalized_words_that_are_never_common_nouns():
    question = "Students in Mr. Lee's class sold pies on Friday. Half of the students sold 3. How many did Tom sell?"
    assert problem_names(question) == {"mr", "lee", "friday", "tom"}


@pytest.mark.parametrize("a, b", [
    ("Jake and Tasha earned $174.", "Jake and Tashay's earnings were $174."),  # a misspelt name
    ("Jake earns $6 per hour.", "He makes $6 per hour, Jake does."),           # one name, moved ("jake" is not "make")
    ("Jake earns $6.", "He earns $6."),                                         # a name against a pronoun
])
def test_the_same_names_pass(a, b):
    assert name_conflict(a, b, Q) == ""


PERCENT_Q = "Adrien earned 30% more than Lylah's $40000. Karan borrowed $3,650 at 10% interest."


@pytest.mark.parametrize("a, b", [
    ("On Wednesday he completes 52 * 0.25 = <<52*0.25=13>>13 problems.",
     "On Wednesday he completes 52 x 1/4 = <<52*1/4=13.0>>13.0 problems."),          # a fraction and its value
    ("Karan's interest is $3,650 × 0.1 = $<<3650*0.1=365>>365.",
     "Karan's interest is $3,650 x 10/100 = $<<3650*10/100=365.0>>365.0."),
    ("He earned 30/100*$40000 = $<<30/100*40000=12000.0>>12000 more.",                # per-hundred notation
     "He earned 30%*$40,000 = $<<30*.01*40000=12000.0>>12,000 more."),
])
def test_a_number_written_as_a_fraction_or_a_percent_is_that_number(a, b):
    assert number_conflict(a, b, PERCENT_Q) == ""


def test_an_ordinal_gives_its_count_and_swapped_sentences_conclude_alike():
    question = "Emma made 18 vlogs in the first week, 21 in the second and 15 in the third."
    assert number_conflict("Emma made 18 + 21 + 15 = <<18+21+15=54>>54 vlogs for 3 weeks.",
                           "Emma made 18 + 21 + 15 = <<18+21+15=54>>54 vlogs.", question) == ""
    fred, pam = "Fred used 4 x 6 = <<4*6=24>>24 tickets.", "Pam used 2 x 6 = <<2*6=12>>12 tickets."
    assert number_conflict(f"{fred} {pam}", f"{pam} {fred}", Q) == ""
    assert number_conflict(f"{fred} {pam}", f"{fred} Pam used 2 x 6 = 12 and 12 - 2 = 10 tickets.", Q)


def test_divisions_are_not_fractions_and_per_hundred_is_notation_only_in_percent_problems():
    assert fractions("1/4 of 12/3 and 240/80 or 20 / 100") == {Decimal("0.25"): {Decimal(1), Decimal(4)}}
    # "240/80" / "210/70": two computations that share a result, not one number written twice
    assert number_conflict("His route home was 240/80=<<240/80=3.0>>3 hours",
                           "So he drove 210/70=<<210/70=3>>3 hours", PERCENT_Q)
    a, b = "He earned 30/100*$40000 = $12000 more.", "He earned 30*.01*$40000 = $12000 more."
    assert number_conflict(a, b, PERCENT_Q) == "" and number_conflict(a, b, Q) == "100 vs 0.01"


def test_percent_is_its_fraction():
    assert step_numbers("20% of it") == step_numbers("20 and 0.2 of it")


@pytest.mark.parametrize("a, b, swap", [
    ("So the trip costs 30 + 15 = 45 dollars.", "So the repair costs 30 + 15 = 45 dollars.", "trip -> repair"),
    ("She works 5 hours on Monday.", "She works 5 hours on Tuesday.", "monday -> tuesday"),
])
def test_a_swapped_entity_vetoes(a, b, swap):
    assert entity_conflict(a, b, Q) == swap


def test_words_that_introduce_a_computation_are_not_entities():
    question = "Tom needs 4 bags of 12 pounds of carrots, buys oats and wants to know what he spends."
    assert entity_conflict("He buys 4 * 12 = <<4*12=48>>48 pounds of carrots.",
                           "He needs 4 * 12 = <<4*12=48>>48 pounds of carrots.", question) == ""
    # what the computation is of still counts
    assert entity_conflict("He buys 4 * 12 = <<4*12=48>>48 pounds of carrots.",
                           "He buys 4 * 12 = <<4*12=48>>48 pounds of oats.", question) == "carrot -> oat"


@pytest.mark.parametrize("a, b, why", [
    ("Blake runs 15 * 100 = <<15*100=1500>>1500 feet.", "Blake runs 15 * 100 = <<15*100=1500>>1500 yards.", "foot -> yard"),
    ("She spends 4 x 25 = <<4*25=100>>100 cents a day.", "She spends 4 x 25 = $<<4*25=100>>100 a day.", "cent -> dollar"),
    ("So the cost is 300*2=$<<300*2=600>>600 per week", "So he pays 300*2=$<<300*2=600>>600 a month for gas", "per week -> per month"),
    ("The weight of the bucket is 5.5 pounds", "The capacity of the bucket would be 5.5 gallons.", "pound -> gallon"),
])
def test_a_different_unit_or_rate_vetoes(a, b, why):
    assert unit_conflict(a, b) == why and claim_check(a, b).veto


@pytest.mark.parametrize("a, b", [
    ("It weighs 2 * 3 = <<2*3=6>>6 lbs.", "It weighs 2 * 3 = <<2*3=6>>6 pounds in all."),        # one unit, two spellings
    ("He drives 60*5 = <<60*5=300>>300 miles per week.", "So he drives 60*5 = 300 miles for work."),  # a rate on one side
    ("The fee is 3 * 4 = $12.", "The fee is 3 * 4 = 12 dollars."),
])
def test_the_same_unit_passes(a, b):
    assert unit_conflict(a, b) == ""


def test_the_unit_and_rate_of_a_conclusion():
    assert concluded_unit("He works 4*6 = <<4*6=24>>24 days in a month.") == ("day", "month")
    assert concluded_unit("x = 5 hours/day, so 2 + 3 = $5 each") == ("dollar", None)   # the last '=' only
    assert concluded_unit("So 2 + 3 = 5 apples in his bag.") == (None, None)
    assert concluded_unit("Let x be the cost.") == (None, None)


def test_a_different_ordinal_vetoes():
    a = "On the second day, she counted 100+50 = <<100+50=150>>150 customers."
    assert ordinal_conflict(a, a.replace("second", "third")) == "second -> third"
    assert ordinal_conflict(a, a.replace("she counted", "Sloane counts")) == ""


def test_a_comparison_turned_round_vetoes():
    a = "Elida has 5 letters while Adrianna has 2 more than twice the number of letters Elida has."
    assert relation_conflict(a, a.replace("more", "less")) == "more -> less"
    assert claim_check(a, a.replace("more", "less"), "How many letters?").veto
    assert relation_conflict(a, a.replace("more", "additional")) == ""   # one direction, two words
    assert relation_conflict("He has 3 fewer pens.", "He has 3 less pens.") == ""
    assert relation_conflict(a, a.replace("Adrianna has", "Adrianna owns")) == ""


def test_a_step_computes_by_a_note_or_arithmetic_in_its_prose():
    assert computes("She has 3 + 4 = 7 apples.") and computes("So 7 apples <<3+4=7>>.")
    assert computes("He pays 4 x $2 for them.") and computes("The total is 8 = 12 - 4")
    assert not computes("Elida has 5 letters while Adrianna has 2 less.")
    assert not computes("One-fourth of the remaining dolphins are in training.")


def test_the_statement_floor_holds_back_only_two_statements_below_it():
    s1, s2 = "Elida has 5 letters while Adrianna has 2 less.", "Elida has 5 letters and Adrianna 2 less."
    c1 = "Adrianna has 2 * 5 - 2 = 8 letters."
    assert below_statement_floor(s1, s2, 0.85, 0.9)
    assert not below_statement_floor(s1, s2, 0.9, 0.9)  # at the floor it merges
    assert not below_statement_floor(s1, c1, 0.5, 0.9)  # one step computes: the judge's own threshold rules
    assert not below_statement_floor(s1, s2, 0.1, None)


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
    plain = make_tiny_judge(tmp_path / "plain")
    floored = make_tiny_judge(tmp_path / "floored", settings=dict(SETTINGS, statement_threshold=0.9))
    assert ModelJudge(plain, device="cpu").policy.floor is None
    assert ModelJudge(floored, device="cpu").policy.floor == 0.9
    assert build_judge(PrunerConfig(strategy="model", model=str(floored), floor=0.0)).policy.floor is None
    assert build_judge(PrunerConfig(strategy="model", model=str(plain), floor=0.95)).policy.floor == 0.95
    judge = ModelJudge(floored, device="cpu", prefilter=0.0, threshold=1e-9)
    pair = ("Elida has 5 letters while Adrianna has 2 less.", "Elida has 5 letters while Adrianna has 2 more.")
    prob = ModelJudge(plain, device="cpu", prefilter=0.0, threshold=1e-9).pair_probabilities([pair], [Q])[0]
    assert 0.0 < prob < 0.9  # a random tiny judge: the floor has something to hold back
    verdict = judge.pair_verdicts([pair], [Q])[0]
    assert verdict.probability == prob and not verdict.merged and judge.stats.scored == 1
    assert verdict.reason == "floor"
    assert judge.stats.floored == 1 and judge.stats.guarded == 0  # held back by the floor, not the guard


@pytest.mark.parametrize("a, b", [
    ("She scored 90 on the first test.", "Mia scored 90 on the first test."),    # pronoun vs name
    ("So Mia scored 90.", "Thus Mia scored 90."),                                 # connective
    ("Ali has 22 medals.", "Ali had 22 medals."),                                 # inflection
    ("The trip costs $30 in total for all of the travel.", "Travelling there is a $30 trip."),  # a rewording
])
def test_rewordings_pass(a, b):
    assert not claim_check(a, b, Q).veto


def test_without_a_question_only_numbers_are_checked():
    assert entity_conflict("the trip costs 45", "the repair costs 45", "") == ""
    assert claim_check("Ali has 22 medals.", "So Ali has 22 medals and 44 stamps.").veto


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
    verdict = judge.pair_verdicts([("She scored 90 on the third test.", "She scored 95 on the third test.")], [Q])[0]
    assert not verdict.merged and verdict.reason.startswith("guard:") and judge.stats.scored == 1  # scored, then vetoed


def test_search_hands_the_judge_each_pairs_question():
    seen = []

    class Recording(LevenshteinJudge):
        def pair_verdicts(self, pairs, questions=None):
            seen.append(list(questions))
            return super().pair_verdicts(pairs, questions)

    verdicts = judge_verdicts(Recording(0.5))
    verdicts([("a b c", "a b d", "question one"), ("x y", "x z", "question two")])
    assert seen == [["question one", "question two"]]


def test_pairs_cli_reports_false_merges_and_spread_and_takes_the_guard(tmp_path):
    data = tmp_path / "pairs.jsonl"
    rows = [
        {"id": "p1-1", "question": Q, "sentence1": "She scored 90 on the test.", "sentence2": "She scored 95 on the test.", "result": 0},
        {"id": "p1-2", "question": Q, "sentence1": "So Mia scored 90.", "sentence2": "Thus Mia scored 90.", "result": 4},
        {"id": "p2-1", "question": Q, "sentence1": "Rent is $40.", "sentence2": "Rent is $40 in all.", "result": 4},
        {"id": "p2-2", "question": Q, "sentence1": "The trip costs 45.", "sentence2": "The repair costs 45.", "result": 1},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    off = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5")
    on = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5", "--guard", "true")
    assert off.returncode == 0 and on.returncode == 0, off.stderr + on.stderr
    m_off, m_on = json.loads(off.stdout.splitlines()[-1]), json.loads(on.stdout.splitlines()[-1])
    assert (m_off["fp"], m_off["false_merge_rate"]) == (2, 1.0)
    assert (m_on["fp"], m_on["tp"], m_on["false_merge_rate"], m_on["precision"]) == (0, 2, 0.0, 1.0)
    assert m_on["problems"] == 2 and "f1_spread" in m_on and m_on["guard"]
    assert "false merge rate" in on.stdout and "claim guard vetoed 2" in on.stdout
    # a count per reason, printed and in the metrics: the guard's two vetoes name their rules
    assert sum(n for r, n in m_on["reasons"].items() if r.startswith("guard:")) == 2
    assert m_on["reasons"]["threshold"] == 2 and "reasons       " in on.stdout
    rows_file = tmp_path / "rows.json"
    assert search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5", "--guard",
                      "true", "--output", rows_file).returncode == 0
    rows = json.loads(rows_file.read_text())["pairs"]
    assert [r["source"].rsplit(":", 1)[1] for r in rows] == ["1", "2", "3", "4"]
    assert [r["merged"] for r in rows] == [False, True, True, False]
    assert rows[0]["reason"].startswith("guard:") and rows[1]["reason"] == "threshold" and rows[0]["detail"]
    floored = search_cli("pairs", "--data", data, "--strategy", "levenshtein", "--threshold", "0.5",
                         "--floor", "0.99")
    assert floored.returncode == 0, floored.stderr
    m_floor = json.loads(floored.stdout.splitlines()[-1])
    # every pair here computes nothing: below 0.99 only the exact-after-rewording one would merge
    assert m_floor["floor"] == 0.99 and m_floor["tp"] + m_floor["fp"] == 0
    assert "statement floor held back" in floored.stdout
