"""Solution-step pairs for labelling (equiv.data.solution_pairs): the gsm8k_equiv rules, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.data.records import PairRecord, problem_key, read_pair_records
from equiv.data.solution_pairs import problem_pairs, solution_pairs, solution_steps
from equiv.errors import InputError

REPO = Path(__file__).resolve().parents[1]
QUESTION = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May."
REFERENCE = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
             "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")
OTHER = ("In May she sold 48/2 = <<48/2=24>>24 clips.\n"
         "Altogether she sold 48+24 = <<48+24=72>>72 clips in April and May.\nThe answer is 72.")
THIRD = "She sold 48 clips in April.\nIn May she sold half: 48/2 = <<48/2=24>>24 clips.\nSo 48+24 = <<48+24=72>>72."


def test_steps_are_lines_and_joined_neighbours_without_the_final_answer():
    steps = solution_steps(REFERENCE)
    assert [(s.position, s.multi_sentence) for s in steps] == [(1, False), (2, False), (1, True)]
    assert steps[2].text == " ".join(REFERENCE.split("\n")[:2])
    assert all("####" not in s.text for s in steps)
    assert [s.position for s in solution_steps("  \nA: 5")] == []


def test_pairs_follow_the_gsm8k_equiv_rules():
    pairs = problem_pairs("gsm8k-train-0", QUESTION, [REFERENCE, OTHER, THIRD], per_problem=100)
    assert pairs, "the three solutions share steps"
    for pair in pairs:
        assert 0.5 < pair["levenshtein_ratio"] <= 0.99
        assert pair["sentence1"] != pair["sentence2"]
        assert pair["question"] == QUESTION and pair["solutions"][0] < pair["solutions"][1]
        record = PairRecord(pair["sentence1"], pair["sentence2"], 4, extra={"id": pair["id"]})
        assert problem_key(record) == "gsm8k-train-0"
    # a joined step pairs only with a joined step
    steps = [step for text in (REFERENCE, OTHER, THIRD) for step in solution_steps(text)]
    kind = {step.text: step.multi_sentence for step in steps}
    assert all(kind[p["sentence1"]] == kind[p["sentence2"]] == p["multi_sentence"] for p in pairs)
    assert {p["multi_sentence"] for p in pairs} == {False, True}
    texts = {frozenset((p["sentence1"], p["sentence2"])) for p in pairs}
    assert len(texts) == len(pairs)
    assert problem_pairs("gsm8k-train-0", QUESTION, [REFERENCE, OTHER, THIRD], per_problem=100) == pairs  # seeded
    capped = problem_pairs("gsm8k-train-0", QUESTION, [REFERENCE, OTHER, THIRD], per_problem=2)
    assert len(capped) == 2 and all(p in pairs for p in capped)
    # identical steps are not pairs (above the upper bound); two copies of one solution pair only
    # neighbouring steps, and never a step at three positions' distance
    copies = problem_pairs("p", QUESTION, [REFERENCE, REFERENCE], per_problem=100)
    assert all(p["sentence1"] != p["sentence2"] for p in copies)
    assert problem_pairs("p", QUESTION, ["q\nr\ns\nthe sum is 5", "the sum is 6"]) == []  # positions 4 and 1
    assert len(problem_pairs("p", QUESTION, ["q\nthe sum is 5", "the sum is 6"])) == 1  # positions 2 and 1


def test_the_cli_writes_pairs_a_labeller_can_fill_in_and_refuses_held_out_questions(tmp_path):
    solutions = tmp_path / "solutions.jsonl"
    solutions.write_text(json.dumps({"problem": "gsm8k-train-0", "question": QUESTION,
                                     "solutions": [REFERENCE, OTHER, THIRD]}) + "\n")
    out = tmp_path / "pairs.jsonl"
    done = subprocess.run([sys.executable, "-m", "equiv.data.solution_pairs", str(solutions), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and "3 pairs of 1 problems" in done.stderr
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(dict(r, result=4)) + "\n" for r in rows))
    records, _ = read_pair_records(labelled)
    assert len(records) == 3
    holdout = tmp_path / "test.jsonl"
    holdout.write_text(json.dumps({"question": QUESTION + "  ", "answer": "#### 72"}) + "\n")
    refused = subprocess.run([sys.executable, "-m", "equiv.data.solution_pairs", str(solutions), "--out",
                              str(tmp_path / "x.jsonl"), "--holdout", str(holdout)], cwd=REPO, capture_output=True,
                             text=True)
    assert refused.returncode == 2 and not (tmp_path / "x.jsonl").exists()
    assert f"{solutions}:1" in refused.stderr and "held-out question" in refused.stderr


@pytest.mark.parametrize("row, field", [
    ({"question": QUESTION, "solutions": [REFERENCE, OTHER]}, "problem"),
    ({"problem": "p", "solutions": [REFERENCE, OTHER]}, "question"),
    ({"problem": "p", "question": QUESTION, "solutions": [REFERENCE]}, "solutions"),
    ({"problem": "p", "question": QUESTION, "solutions": "one text"}, "solutions"),
])
def test_a_bad_solutions_line_is_one_error_naming_its_field(tmp_path, row, field):
    path = tmp_path / "solutions.jsonl"
    path.write_text(json.dumps({"problem": "q", "question": QUESTION, "solutions": [REFERENCE, OTHER]}) + "\n"
                    + json.dumps(row) + "\n")
    with pytest.raises(InputError, match=field) as err:
        solution_pairs([path])
    assert ":2" in str(err.value)
    with pytest.raises(InputError, match="low"):
        solution_pairs([path], low=0.9, high=0.5)


SHIPPED_SOLUTION_PAIRS = ("gsm8k_train_solution_pairs.jsonl", "gsm8k_train_weak_solution_pairs.jsonl")


@pytest.mark.parametrize("name", SHIPPED_SOLUTION_PAIRS)
def test_the_shipped_solution_pairs_are_labelled_train_problem_pairs_apart_from_the_siblings(name: str):
    """benchmarks/data's solution-pair files (tidy and weak-solver solutions): labelled against
    RUBRIC.md, each with its reader and the two solutions it joins; GSM8K train problems only (none
    of the test split, none shared with the sibling sets or the other solution-pair file, so each
    stays unseen when the others are trained on)."""
    from tests.helpers.paths import SHARED_DATA

    data = REPO / "benchmarks" / "data"
    records, _ = read_pair_records(data / name)
    assert len(records) > 500 and all(r.extra["problem"].startswith("gsm8k-train-") for r in records)
    assert all(r.extra.get("reader") and len(r.extra["solutions"]) == 2 for r in records)
    assert all(0.5 < r.extra["levenshtein_ratio"] <= 0.99 for r in records)
    second = [r for r in records if "second_reading" in r.extra]
    assert second and all(r.extra["second_reading"]["reader"] != r.extra["reader"] for r in second)
    problems = {problem_key(r) for r in records}
    others = [other for other in SHIPPED_SOLUTION_PAIRS if other != name]
    for other_name in ("gsm8k_train_siblings_gemma270m.jsonl", "gsm8k_train_siblings_gemma270m_heldout.jsonl", *others):
        other, _ = read_pair_records(data / other_name)
        assert not problems & {problem_key(r) for r in other}
    test_file = SHARED_DATA / "gsm8k" / "test.jsonl"
    if not test_file.is_file():
        pytest.skip(f"needs {test_file} (the shared data)")
    held = {" ".join(json.loads(line)["question"].split()) for line in test_file.read_text().splitlines() if line}
    assert not {" ".join(r.extra["question"].split()) for r in records} & held


SEALED = REPO / "benchmarks" / "data" / "sealed"


def _questions(path: Path) -> set[str]:
    return {" ".join(json.loads(line)["question"].split()) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


@pytest.mark.parametrize("path", sorted(SEALED.glob("*.jsonl")), ids=lambda p: p.name)
def test_the_sealed_split_shares_no_problem_with_any_other_labelled_file(path: Path):
    """The sealed test split (benchmarks/data/sealed): labelled train-problem pairs, each read at least
    twice by different readers, whose problems no other file of the repository or of the shared
    gsm8k_equiv data holds -- so no judge fitted on any shipped data has seen its problems."""
    from tests.helpers.paths import SHARED_DATA

    records, _ = read_pair_records(path)
    assert len(records) >= 200 and all(r.extra["problem"].startswith("gsm8k-train-") for r in records)
    for r in records:
        readers = [reading["reader"] for reading in r.extra["readings"]]
        assert len(readers) >= 2 and len(set(readers)) == len(readers)
    sealed = _questions(path)
    others = [p for p in (REPO / "benchmarks" / "data").glob("*.jsonl")] + [p for p in SEALED.glob("*.jsonl") if p != path]
    others += [p for p in (SHARED_DATA / "gsm8k_equiv").glob("*.jsonl")] if (SHARED_DATA / "gsm8k_equiv").is_dir() else []
    for other in others:
        if "question" not in other.read_text(encoding="utf-8")[:2000]:
            continue  # second-label files hold ids and levels only
        assert not sealed & _questions(other), f"{path.name} shares a problem with {other.name}"
    test_file = SHARED_DATA / "gsm8k" / "test.jsonl"
    if not test_file.is_file():
        pytest.skip(f"needs {test_file} (the shared data)")
    assert not sealed & _questions(test_file)
