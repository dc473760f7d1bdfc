"""``mark_differences``: the words two steps do not share are wrapped in « », and that input
reaches the classifier in training (the collator), in the fit (CLI flag, export) and in search
(``ModelJudge``) alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.datamodule import PairCollator
from equiv.judge.export import read_checkpoint
from equiv.judge.inference import score_pairs
from equiv.prune import ModelJudge
from equiv.text.differences import mark_differences
from tests.helpers.judges import SETTINGS, make_tiny_judge, tiny_fit_argv


def test_a_changed_claim_is_marked_on_both_sides():
    a, b = mark_differences("He earns 5*6=<<5*6=30>>30 dollars.", "He works 5*6=<<5*6=30>>30 times.")
    assert a == "He « earns » 5*6=<<5*6=30>>30 « dollars »."
    assert b == "He « works » 5*6=<<5*6=30>>30 « times »."


def test_a_changed_number_is_one_marked_word():
    a, b = mark_differences("She has 3*25=75 roses", "She has 3*26=78 roses")
    assert a == "She has 3*« 25 »=« 75 » roses"
    assert b == "She has 3*« 26 »=« 78 » roses"


def test_words_one_side_lacks_get_an_empty_marker_on_the_other():
    a, b = mark_differences("6 = 6", "6 = 6 apples in total")
    assert a == "6 = 6 «» "
    assert b == "6 = 6 « apples in total »"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Janet sells 16 - 3 - 4 = 9 eggs.", "Janet sells 16 - 3 - 4 = 9 eggs."),
        ("The tax is 240,000*.1=24,000", "the tax is 240000*.1=24000.0"),  # case, grouping, trailing zeros
        ("", ""),
    ],
)
def test_pairs_without_a_difference_come_back_unchanged(a, b):
    assert mark_differences(a, b) == (a, b)


def test_everything_is_marked_when_nothing_is_shared_and_text_outside_marks_is_kept():
    a, b = mark_differences("  apples, pears ", "2+2")
    assert a == "  « apples, pears » "
    assert b == "« 2+2 »"


def test_the_collator_tokenises_marked_pairs_only_when_asked():
    from transformers import AutoTokenizer

    from equiv.backbones import BUNDLED_MINILM, resolve_model_name

    tok = AutoTokenizer.from_pretrained(resolve_model_name(BUNDLED_MINILM))
    sample = [{"index": 0, "sentence1": "He earns 30 dollars", "sentence2": "He earns 30 times", "label": 0}]
    opening = tok.convert_tokens_to_ids("«")
    assert opening != tok.unk_token_id  # one known token, not [UNK]
    plain = PairCollator(tok, 64, None)(sample)["input_ids"][0].tolist()
    marked = PairCollator(tok, 64, None, mark_differences=True)(sample)["input_ids"][0].tolist()
    assert opening not in plain
    assert marked.count(opening) == 2 and marked.count(tok.convert_tokens_to_ids("»")) == 2


def test_model_judge_feeds_the_export_what_it_was_trained_on(tmp_path: Path):
    """The export's ``mark_differences`` decides the input; an old export (no key) reads plain pairs."""
    pair = ("He earns 5*6=30 dollars.", "He works 5*6=30 times.")
    marked_dir = make_tiny_judge(tmp_path / "marked", settings=dict(SETTINGS, prefilter_threshold=0.0, mark_differences=True))
    plain_dir = make_tiny_judge(tmp_path / "plain", settings=dict(SETTINGS, prefilter_threshold=0.0))
    marked_judge, plain_judge = ModelJudge(marked_dir), ModelJudge(plain_dir)
    assert marked_judge.mark_differences and not plain_judge.mark_differences
    model, tok = marked_judge.model, marked_judge.tokenizer
    with_marks = score_pairs(model, tok, [pair], max_length=96, mark_differences=True).item()
    without = score_pairs(model, tok, [pair], max_length=96).item()
    assert with_marks != pytest.approx(without, abs=1e-6)  # the marks change what the model reads
    assert marked_judge.pair_probabilities([pair])[0] == pytest.approx(with_marks, abs=1e-6)
    assert plain_judge.pair_probabilities([pair])[0] == pytest.approx(without, abs=1e-6)  # same weights, seed 0


def test_fit_with_marks_links_the_flag_to_the_data_and_exports_it(tmp_path: Path):
    """`--model.mark_differences=true` reaches the data module (the link) and the exported judge."""
    from equiv.judge.cli import main
    from tests.test_judge_cli import separable_pairs, write_jsonl

    rows = separable_pairs(48, seed=5)
    for i, row in enumerate(rows):
        row["id"] = f"toy-{i // 2}-{i % 2}"
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "run"
    tiny = make_tiny_judge(tmp_path / "tiny", settings=None)
    assert main(tiny_fit_argv(tiny, train, out, "--model.max_length=64", "--model.mark_differences=true",
                              "--hybrid=true")) == 0
    settings = json.loads((out / "judge" / "config.json").read_text())["equiv"]
    assert settings["mark_differences"] is True
    ckpt = read_checkpoint(next((out / "checkpoints").glob("*.ckpt")))  # weights_only, as export loads it
    assert ckpt["hyper_parameters"]["mark_differences"] is True
    assert ckpt["datamodule_hyper_parameters"]["mark_differences"] is True  # through the CLI link
    assert "hybrid" in settings  # calibrated through the same export, so on marked pairs
