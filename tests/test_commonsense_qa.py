"""CommonsenseQA: loading (local JSONL in the hub's schema, hub path offline), letter grading,
and the seeded subset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.problems import load_problems
from equiv.errors import InputError
from equiv.search.choice_grading import extract_choice, grade_choice
from equiv.search.grading import extract_answer, grade

SAMPLE = Path(__file__).parent / "data" / "commonsense_qa_synthetic.jsonl"


def test_local_file_in_hub_schema_loads_as_choice_problems():
    problems = load_problems("commonsense_qa", path=SAMPLE)
    assert [p.id for p in problems] == [f"q{i}" for i in range(6)]
    first = problems[0]
    assert first.kind == "choice" and first.answer == "A"
    assert "A. cupboard" in first.question and "E. bathtub" in first.question and "\\boxed" in first.question


def test_seeded_subset_is_stable_and_ordered():
    a = load_problems("commonsense_qa", path=SAMPLE, sample=3, sample_seed=7)
    b = load_problems("commonsense_qa", path=SAMPLE, sample=3, sample_seed=7)
    assert a == b and len(a) == 3
    order = [int(p.id[1:]) for p in a]
    assert order == sorted(order)
    seeds = {tuple(p.id for p in load_problems("commonsense_qa", path=SAMPLE, sample=3, sample_seed=s)) for s in range(6)}
    assert len(seeds) > 1
    assert len(load_problems("commonsense_qa", path=SAMPLE, sample=100)) == 6
    with pytest.raises(InputError, match="data.sample"):
        load_problems("commonsense_qa", path=SAMPLE, sample=0)


@pytest.mark.parametrize(
    "row, field",
    [
        ({"question": "q", "choices": {"label": ["A", "B"], "text": ["x"]}, "answerKey": "A"}, "choices"),
        ({"question": "q", "choices": {"label": ["A", "B"], "text": ["x", "y"]}, "answerKey": ""}, "answerKey"),
        ({"question": "", "choices": {"label": ["A"], "text": ["x"]}, "answerKey": "A"}, "question"),
        ({"question": "q", "choices": ["x", "y"], "answerKey": "A"}, "choices"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, row, field):
    path = tmp_path / "csqa.jsonl"
    path.write_text(json.dumps({"question": "ok", "choices": {"label": ["A"], "text": ["x"]}, "answerKey": "A"}) + "\n"
                    + json.dumps(row) + "\n")
    with pytest.raises(InputError, match=rf"csqa.jsonl:2: field '{field}'"):
        load_problems("commonsense_qa", path=path)


def test_kind_override_must_match_the_dataset():
    with pytest.raises(InputError, match="data.kind"):
        load_problems("commonsense_qa", path=SAMPLE, kind="math")


def test_hub_path_offline_gives_one_clear_line(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="could not load no-such-user/no-such-csqa"):
        load_problems("commonsense_qa", hub_id="no-such-user/no-such-csqa")


@pytest.mark.parametrize(
    "text, letter",
    [
        ("The cupboard is where plates go. \\boxed{A}", "A"),
        ("\\boxed{(C)}", "C"),
        ("\\boxed{\\text{D}}", "D"),
        ("\\boxed{B. scissors}", "B"),
        ("So the answer is (E).", "E"),
        ("Answer: B", "B"),
        ("first \\boxed{A} then \\boxed{C}", "C"),
        ("B", "B"),
        ("(d)", None),
        ("A plate goes in a cupboard.", None),
        ("the answer is a dog", None),
        ("\\boxed{42}", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_choice(text, letter):
    assert extract_choice(text) == letter
    assert extract_answer(text, "choice") == letter


def test_grade_choice():
    assert grade_choice("b", "B") and grade("C", "C", "choice")
    assert not grade_choice("A", "B") and not grade(None, "B", "choice") and not grade_choice("", "")
