"""A judge scores numbers without thousands commas; training reads the files' text
(equiv.data.tokenize's docstring).

``1,320`` and ``1320`` are one number to the rubric but other tokens to the classifier, which had
learned to keep them apart. Every scorer of an export and the evaluation loaders tokenise through
``tokenize_pairs(scored=True)``; training batches through ``scored=False``. Tested there, through
the data module's two collators and through a real (tiny, random) judge: a step and its twin
written with commas get the same probability. On the code before, the two token sequences differ
and a random classifier scores them apart, so these tests fail there.
"""

from __future__ import annotations

import pytest

from equiv.backbones import resolve_model_name
from equiv.data.tokenize import length_order, tokenize_pairs
from equiv.text.normalize import without_thousands_commas
from tests.helpers.judges import make_tiny_judge

WITH = "Subtracting the hours already completed:\n   \\[\n   1,500 - 180 = 1,320 \\text{ hours}\n   \\]"
WITHOUT = "Subtracting the hours already completed:\n   \\[\n   1500 - 180 = 1320 \\text{ hours}\n   \\]"


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("1,500 - 180 = 1,320", "1500 - 180 = 1320"),
        ("$1,234,567.50 in all", "$1234567.50 in all"),
        ("2 100-page books", "2 100-page books"),  # a space may part two numbers: kept
        ("1, 2, 3 and 4", "1, 2, 3 and 4"),  # a list, not thousands
        ("(3,45) and 12,3456", "(3,45) and 12,3456"),  # not groups of three
        ("no numbers, at all", "no numbers, at all"),
    ],
)
def test_only_thousands_commas_are_removed(text, read):
    assert without_thousands_commas(text) == read


def test_a_pair_is_tokenised_as_its_twin_without_commas():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model_name("bundled:all-MiniLM-L6-v2"))
    a = tokenize_pairs(tok, [(WITH, "The answer is 1,320.")], max_length=96, scored=True)
    b = tokenize_pairs(tok, [(WITHOUT, "The answer is 1320.")], max_length=96, scored=True)
    assert a["input_ids"].tolist() == b["input_ids"].tolist()
    as_written = tokenize_pairs(tok, [(WITH, "The answer is 1,320.")], max_length=96, scored=False)
    assert as_written["input_ids"].tolist() != a["input_ids"].tolist()
    assert length_order(tok, [(WITH, "x"), ("a", "b")]) == length_order(tok, [(WITHOUT, "x"), ("a", "b")])


def test_the_judge_scores_a_step_as_its_twin_without_commas(tmp_path):
    from equiv.prune.model_judge import ModelJudge

    judge = ModelJudge(make_tiny_judge(tmp_path / "judge"), prefilter=0.0, device="cpu")
    other = "Subtract the completed hours from the required ones: 1,500 - 180 = 1,320 hours."
    with_commas, without = judge.pair_probabilities([(WITH, other), (WITHOUT, without_thousands_commas(other))])
    assert with_commas == pytest.approx(without, abs=1e-6)


def test_training_batches_keep_the_text_and_evaluation_batches_read_it_as_scored():
    from transformers import AutoTokenizer

    from equiv.data.datamodule import PairCollator

    tok = AutoTokenizer.from_pretrained(resolve_model_name("bundled:all-MiniLM-L6-v2"))
    sample = {"index": 0, "sentence1": WITH, "sentence2": "x", "label": 1}
    twin = {**sample, "sentence1": WITHOUT}
    train, evaluate = PairCollator(tok, 96, None), PairCollator(tok, 96, None, canonical=True)
    assert train([sample])["input_ids"].tolist() != train([twin])["input_ids"].tolist()
    assert evaluate([sample])["input_ids"].tolist() == evaluate([twin])["input_ids"].tolist()
