"""Synthetic training pairs: claim edits change one claim and no note; rewrites keep meaning."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from equiv.data.datamodule import MathEquivDataModule
from equiv.data.records import PairRecord, problem_key
from equiv.data.synthetic_pairs import (
    CLAIM_EDIT_LEVEL,
    REWRITE_LEVEL,
    edit_antonym,
    edit_number,
    edit_unit,
    rewrite_commute,
    rewrite_filler,
    synthetic_pairs,
)
from equiv.errors import InputError

NOTE = re.compile(r"<<[^<>]*>>")
QUESTION = "Mowing one lawn pays 6 dollars and takes 2 hours. How much does she earn for 5 lawns?"
STEP = "She mowed the lawn 5 times, for a total of 5 * 6 = <<5*6=30>>30 dollars."


def rng() -> random.Random:
    return random.Random(0)


def test_number_edit_changes_one_prose_number_and_no_calculator_note() -> None:
    for seed in range(20):
        edited = edit_number(STEP, QUESTION, random.Random(seed))
        assert edited is not None and edited != STEP
        assert NOTE.findall(edited) == NOTE.findall(STEP)
        assert NOTE.sub("", edited).replace(" ", "") != NOTE.sub("", STEP).replace(" ", "")
    assert edit_number("She mowed <<5*6=30>>.", QUESTION, rng()) is None  # numbers in notes only


def test_antonym_edit_swaps_a_direction_word_and_keeps_its_capital() -> None:
    assert edit_antonym("More apples were bought.", "", rng()) in {"Fewer apples were bought.", "More apples were sold."}
    assert edit_antonym("She has 3 apples.", "", rng()) is None


def test_unit_edit_uses_a_unit_the_question_puts_after_a_number() -> None:
    # "dollars" is used by the step; "hours" and "lawns" follow numbers in the question
    assert {edit_unit(STEP, QUESTION, random.Random(s)) for s in range(20)} == {
        STEP.replace("30 dollars", "30 hours"), STEP.replace("30 dollars", "30 lawns")}
    assert edit_unit("The total is 5 * 6 = <<5*6=30>>30.", QUESTION, rng()) is None  # no word after it


def test_commute_swaps_a_lone_sum_or_product_only() -> None:
    assert rewrite_commute(STEP, "", rng()) == STEP.replace("5 * 6", "6 * 5")
    # inside a longer expression, a swap that would change the value is never made
    for text in ["It is 2/5 * 20 = 8.", "It is 10 - 4 + 3 = 9.", "It is 12 / 4 * 3 = 9.", "It is 4 + 4 = 8."]:
        assert rewrite_commute(text, "", rng()) is None, text
    # ... and one that keeps it is: a product binds first, a bracket holds its sum
    assert rewrite_commute("It is 6 * 4 + 3 = 27.", "", rng()) == "It is 4 * 6 + 3 = 27."
    assert rewrite_commute("It is 2 * (4 + 3) = 14.", "", rng()) == "It is 2 * (3 + 4) = 14."


def test_filler_rewrites_touch_only_the_opening_word() -> None:
    assert rewrite_filler("So he has 4 apples.", "", random.Random(1)) in {
        "Thus, he has 4 apples.", "Therefore, he has 4 apples.", "Then he has 4 apples.", "He has 4 apples."}
    assert rewrite_filler("He has 4 apples.", "", rng()).endswith(", he has 4 apples.")
    assert rewrite_filler("Karen has 4 apples.", "", rng()).endswith(", Karen has 4 apples.")  # a name keeps its capital


def records() -> list[PairRecord]:
    out = []
    for i in range(30):
        a = f"Step {i}: she earns 5 * {i + 2} = <<5*{i + 2}={5 * (i + 2)}>>{5 * (i + 2)} dollars."
        extra = {"id": f"gsm8k-test-{i}-{i % 3}", "question": QUESTION}
        out.append(PairRecord(a, "So " + a.lower(), 4 if i % 2 else 0, 1, extra, f"f.jsonl:{i + 1}"))
    return out


def test_synthetic_pairs_edit_equivalent_pairs_only_are_seeded_and_keep_the_problem() -> None:
    source = records()
    made = synthetic_pairs(source, equivalent_levels=[3, 4], fraction=1.0, seed=3)
    by_sentence1 = {r.sentence1: r for r in source}
    assert {by_sentence1[r.sentence1].result for r in made} == {4}
    edits = [r for r in made if r.result == CLAIM_EDIT_LEVEL]
    rewrites = [r for r in made if r.result == REWRITE_LEVEL]
    assert len(edits) == len(rewrites) == 15
    for r in made:
        original = by_sentence1[r.sentence1]
        assert r.sentence2 != original.sentence2
        assert problem_key(r) == problem_key(original) and r.extra["synthetic"]
    for r in edits:
        assert NOTE.findall(r.sentence2) == NOTE.findall(by_sentence1[r.sentence1].sentence2)
    again = synthetic_pairs(source, equivalent_levels=[3, 4], fraction=1.0, seed=3)
    assert [r.to_json() for r in again] == [r.to_json() for r in made]
    assert len(synthetic_pairs(source, equivalent_levels=[3, 4], fraction=0.4, seed=3)) == 2 * 6
    assert synthetic_pairs(source, equivalent_levels=[3, 4], fraction=0.0) == []


def test_datamodule_adds_synthetic_pairs_to_training_only(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records()))
    plain = MathEquivDataModule(train=str(path), calibration_fraction=0.3, batch_size=4)
    plain.setup("fit")
    dm = MathEquivDataModule(train=str(path), calibration_fraction=0.3, batch_size=4, synthetic_fraction=1.0)
    dm.setup("fit")
    assert dm.records == plain.records  # the calibration split and the real training records are unchanged
    synthetic = [r for r in dm.original_train_records if "synthetic" in r.extra]
    assert dm.original_train_records[: len(plain.original_train_records)] == plain.original_train_records
    assert len(dm.original_train_records) == len(plain.original_train_records) + len(synthetic) > len(plain.original_train_records)
    calibration_problems = {problem_key(r) for r in dm.records["val"]}
    assert not {problem_key(r) for r in synthetic} & calibration_problems
    assert len(dm.train_dataloader().dataset) == len(dm.original_train_records)
    with pytest.raises(InputError, match="synthetic_fraction"):
        MathEquivDataModule(train=str(path), synthetic_fraction=1.5)
