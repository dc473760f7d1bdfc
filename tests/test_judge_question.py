"""``with_question`` (the judge input "step 1 [SEP] step 2 [SEP] question") was measured, not
adopted, and removed in 2026-11 (docs/experiments/2026-11-27-removed-levers.md). A judge that
was trained reading the question cannot be scored as trained, so its export or checkpoint is
refused in one line, and a training config that still asks for it is refused by the parser.
The problem's question still reaches the claim guard -- never the classifier -- everywhere a
judge decides (``ModelJudge``, its cache, ``group_siblings``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from equiv.data.datamodule import PairCollator, PairDataset
from equiv.data.records import PairRecord
from equiv.errors import InputError
from equiv.judge.export import load_judge
from equiv.judge.members import score_judge_dir
from equiv.prune import ModelJudge, group_siblings
from tests.helpers.cli import trainer_cli
from tests.helpers.judges import SETTINGS, make_tiny_judge

QUESTION = "Jake earns $6 an hour and Jacob earns $7 an hour. How much does Jake earn in 3 hours?"
PAIR = ("Jake earns $6 an hour.", "Jacob earns $6 an hour.")  # different_names, with the question only


def _set_stored(directory: Path, value: object) -> None:
    config = directory / "config.json"
    raw = json.loads(config.read_text())
    raw["equiv"]["with_question"] = value
    config.write_text(json.dumps(raw))


def test_an_export_that_read_the_question_is_refused_in_one_line(tmp_path: Path):
    """`equiv.with_question: true` is refused naming the export's config.json and the field; `false`
    (what every export of the step-only judge stored) loads and scores as before."""
    directory = make_tiny_judge(tmp_path / "q", settings=dict(SETTINGS, prefilter_threshold=0.0))
    before = ModelJudge(directory).pair_probabilities([PAIR])
    _set_stored(directory, False)
    assert ModelJudge(directory).pair_probabilities([PAIR]) == pytest.approx(before, abs=1e-6)
    _set_stored(directory, True)
    for load in (lambda: ModelJudge(directory), lambda: score_judge_dir(directory, [PAIR])):
        with pytest.raises(InputError) as err:
            load()
        message = str(err.value)
        assert "\n" not in message and f"{directory / 'config.json'}" in message
        assert "field 'equiv.with_question'" in message and "the question as judge input" in message
        assert "removed in 2026-11; re-train it with trainer_cli.py fit" in message


def _checkpoint(tmp_path: Path, with_question: bool) -> Path:
    """A Lightning-style checkpoint of a tiny PairClassifier whose hyper-parameters say
    ``with_question`` (what a fit before the removal saved)."""
    from equiv.judge.module import PairClassifier

    module = PairClassifier(model_name=str(make_tiny_judge(tmp_path / "tiny", settings=None)), max_length=64)
    path = tmp_path / f"old-{with_question}.ckpt"
    torch.save({"state_dict": module.state_dict(), "equiv_hf_config": module.model.config.to_dict(),
                "hyper_parameters": dict(module.hparams, with_question=with_question)}, path)
    return path


def test_a_checkpoint_that_read_the_question_is_refused_in_one_line(tmp_path: Path):
    """Loading a checkpoint keeps only the constructor's arguments, so a removed one would be
    dropped silently and the judge scored without the question it was trained on: refused."""
    assert load_judge(_checkpoint(tmp_path, False))[2]["max_length"] == 64
    path = _checkpoint(tmp_path, True)
    with pytest.raises(InputError) as err:
        load_judge(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "field 'hyper_parameters.with_question'" in message
    assert "removed in 2026-11" in message
    with pytest.raises(InputError, match=r"with_question.*removed in 2026-11"):
        ModelJudge(path, device="cpu")


def test_fit_refuses_the_removed_option_on_the_command_line(tmp_path: Path):
    """`--model.with_question=true` is an error naming the key, before any fitting."""
    result = trainer_cli("fit", "--config", "configs/demo.yaml", "--model.with_question=true",
                         f"--trainer.default_root_dir={tmp_path / 'run'}")
    assert result.returncode == 2 and "with_question" in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_training_config_that_sets_it_is_refused_by_the_cli(tmp_path: Path):
    """A recipe overlay that still says `model.with_question: true` (as
    configs/gsm8k_equiv_question.yaml did): `trainer_cli.py fit` exits 2 naming the key. (In this
    process: the trainer's real-process smoke test is tests/test_judge_cli.py's fast_dev_run.)"""
    overlay = tmp_path / "question.yaml"
    overlay.write_text("model:\n  with_question: true\n")
    result = trainer_cli("fit", "--config", "configs/demo.yaml", "--config", str(overlay),
                         f"--trainer.default_root_dir={tmp_path / 'run'}")
    assert result.returncode == 2 and "with_question" in result.stderr
    assert not (tmp_path / "run").exists()


def test_the_collator_reads_the_two_steps_only(tmp_path: Path):
    """A record's question does not reach the classifier's input."""
    from transformers import AutoTokenizer

    from equiv.backbones import BUNDLED_MINILM, resolve_model_name

    tok = AutoTokenizer.from_pretrained(resolve_model_name(BUNDLED_MINILM))
    asked = PairRecord(PAIR[0], PAIR[1], 4, extra={"question": QUESTION}, source="t.jsonl:1")
    plain = PairRecord(PAIR[0], PAIR[1], 4, source="t.jsonl:2")
    ids = [PairCollator(tok, 256, None)([PairDataset([r], [1])[0]])["input_ids"][0].tolist() for r in (asked, plain)]
    assert ids[0] == ids[1] and tok.convert_ids_to_tokens(ids[0]).count("[SEP]") == 2


def test_the_question_reaches_the_guard_and_not_the_score(tmp_path: Path):
    """Same two steps under two problems: one model scoring (the cache keys on the steps), and the
    verdicts differ only where the guard reads the question's names."""
    directory = make_tiny_judge(tmp_path / "j", settings=dict(SETTINGS, prefilter_threshold=0.0))
    judge = ModelJudge(directory, threshold=0.01, guard=["different_names"])
    with_q, without = judge.pair_verdicts([PAIR, PAIR], [QUESTION, ""])
    # the guard vetoes the pair under its question before the model: one scoring, for the other
    assert judge.stats.scored == 1 and judge.stats.cache_hits == 0 and judge.stats.ruled == 1
    assert with_q.probability is None and not with_q.model_call and without.model_call
    asked = judge.pair_verdicts([PAIR, PAIR], [QUESTION, ""], score_ruled=True)
    assert asked[0].probability == asked[1].probability == without.probability  # the score reads no question
    assert judge.stats.scored == 1  # from the cache
    assert (with_q.merged, with_q.reason, with_q.detail) == (False, "guard:different_names", "jacob vs jake")
    assert (without.merged, without.reason) == (True, "threshold")
    assert "with_question" not in judge.describe()


def test_group_siblings_hands_the_question_to_the_guard(tmp_path: Path):
    directory = make_tiny_judge(tmp_path / "j", settings=dict(SETTINGS, prefilter_threshold=0.0))
    judge = ModelJudge(directory, threshold=0.01, guard=["different_names"])
    steps = [PAIR[0], PAIR[1]]
    assert group_siblings(steps, judge).classes == [[0, 1]]  # no question: no names to tell apart
    assert group_siblings(steps, judge, question=QUESTION).classes == [[0], [1]]
    assert judge.stats.scored == 1  # the second grouping read the cached score
