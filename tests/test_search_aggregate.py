"""SBS answer choice as the reference's evaluator makes it: majority vote, PRM min-max and
PRM min-vote (and the last-step variants) over the finished solutions, per problem, in
summary.json and in ``compare``; the headline is majority vote."""

from __future__ import annotations

import json
import random

import pytest

from equiv.search.aggregate import AGGREGATIONS, HEADLINE, Solution, aggregate, choose
from equiv.report.compare import compare_rows, format_table
from equiv.search.config import RunConfig, SearchConfig
from equiv.search.runner import Engines, Grader, run_eval
from tests.helpers import reference
from tests.helpers.scripted import TablePolicy, TableReward, cand, simple_extract, simple_grade, Problem

REFERENCE = {"majority_vote": reference.majority_vote, "prm_min_max": reference.prm_min_max,
             "prm_min_vote": reference.prm_min_vote}


def test_the_headline_is_majority_vote_and_the_issue_s_three_are_reported():
    assert HEADLINE == "majority_vote"
    assert {"majority_vote", "prm_min_max", "prm_min_vote"} <= set(AGGREGATIONS)


def test_each_rule_on_a_case_where_they_disagree():
    sols = [Solution("1", (0.9, 0.3)), Solution("2", (0.6, 0.5)), Solution("1", (0.3, 0.35)),
            Solution(None, (0.99,)), Solution("3", (0.4, 0.45))]
    assert choose(sols, "majority_vote") == 0  # answer 1: two votes; its first solution
    assert choose(sols, "prm_min_max") == 1  # min 0.5 beats 0.3, 0.3, 0.4 (no answer: out)
    assert choose(sols, "prm_min_vote") == 0  # answer 1: 0.3 + 0.3 = 0.6 beats 0.5 and 0.4
    assert choose(sols, "prm_last_max") == 1  # last steps 0.3, 0.5, 0.35, 0.45


def test_no_answer_anywhere_is_no_prediction():
    result = aggregate([Solution(None, (0.5,))], lambda p: True)
    assert all(r == {"solution": None, "prediction": None, "correct": False} for r in result.values())


@pytest.mark.parametrize("seed", range(40))
def test_matches_the_reference_vote_utils_on_random_cases(seed):
    """Ties included (few answers, coarse scores): first seen wins, as the reference's dict max."""
    rng = random.Random(seed)
    sols = [Solution(rng.choice(["1", "2", "3", None]), tuple(rng.choice([0.1, 0.5, 0.9]) for _ in range(rng.randint(0, 3))))
            for _ in range(rng.randint(1, 6))]
    valid = [s for s in sols if s.answer is not None]
    for method, ref in REFERENCE.items():
        index = choose(sols, method)
        if not valid:
            assert index is None
        else:
            assert sols[index].answer == ref([s.answer for s in valid], [list(s.step_scores) for s in valid])


# -- through the runner: record, summary.json, compare --------------------------------------------
def _table():
    fin = lambda t: cand(t, tokens=3, finished=True)  # noqa: E731
    return {
        (): [cand("A"), cand("B"), cand("C")],
        ("A",): [fin("A1 answer 7")],
        ("B",): [fin("B1 answer 5")],
        ("C",): [fin("C1 answer 5")],
    }


VALUES = {"A": 0.9, "B": 0.8, "C": 0.7, "A1 answer 7": 0.95, "B1 answer 5": 0.3, "C1 answer 5": 0.65}


def _run(out):
    engines = Engines(TablePolicy(_table()), TableReward(VALUES), None)
    return run_eval(algo="sbs", problems=[Problem("p0", "q", "5")], engines=engines, out_dir=out,
                    search=SearchConfig(width=3, beam_size=3), run=RunConfig(progress=False), pruner="none",
                    grader=Grader(simple_extract, simple_grade))


def test_sbs_answers_by_majority_vote_and_records_every_aggregation(tmp_path):
    """The best last-step value (A1, 0.95, answer 7: what equiv answered before) loses the vote
    to answer 5 (B1, C1); PRM min-max picks A's path (min 0.9), min-vote answer 5 (0.3 + 0.65).
    Solutions are found in rank order A1, C1, B1, so the voted answer's path is C's."""
    summary = _run(tmp_path)
    (record,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert record["prediction"] == "5" and record["correct"] is True
    assert record["path"] == ["C", "C1 answer 5"]  # the first solution holding the voted answer
    agg = record["aggregations"]
    assert agg["majority_vote"] == {"prediction": "5", "correct": True}
    assert agg["prm_min_max"] == {"prediction": "7", "correct": False}
    assert agg["prm_min_vote"] == {"prediction": "5", "correct": True}
    assert agg["prm_last_max"] == {"prediction": "7", "correct": False}
    assert summary["accuracy"] == 1.0
    assert summary["aggregations"]["majority_vote"] == 1.0 and summary["aggregations"]["prm_min_max"] == 0.0
    rows, _ = compare_rows([tmp_path, tmp_path])
    assert rows[0]["aggregations"]["prm_min_vote"] == 100.0
    assert "prm_min_max 0.00" in format_table(rows)


def test_each_distinct_prediction_is_graded_once_per_problem(tmp_path):
    """Six aggregations and the final pick name only answers 5 and 7: two gradings, not seven (a
    code answer's grading is a sandboxed run that can take its whole timeout)."""
    graded: list[str | None] = []

    def counting_grade(prediction, answer, kind):
        graded.append(prediction)
        return simple_grade(prediction, answer, kind)

    engines = Engines(TablePolicy(_table()), TableReward(VALUES), None)
    run_eval(algo="sbs", problems=[Problem("p0", "q", "5"), Problem("p1", "q", "7")], engines=engines,
             out_dir=tmp_path, search=SearchConfig(width=3, beam_size=3), run=RunConfig(progress=False),
             pruner="none", grader=Grader(simple_extract, counting_grade))
    assert sorted(graded) == ["5", "5", "7", "7"]  # each problem grades its own answers


def test_a_malformed_aggregations_field_is_one_clear_error(tmp_path):
    from equiv.errors import InputError
    from equiv.rundir import read_records

    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"id": "p0", "correct": True}) + "\n"
                    + json.dumps({"id": "p1", "aggregations": {"majority_vote": True}}) + "\n")
    with pytest.raises(InputError) as info:
        read_records(path)
    message = str(info.value)
    assert "results.jsonl" in message and ":2" in message and "aggregations" in message
