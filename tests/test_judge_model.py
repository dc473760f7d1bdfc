"""PairClassifier on a tiny random-init Longformer through the real CLI path; export and reload."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from equiv.backbones import bundled_minilm_dir
from equiv.errors import InputError
from equiv.judge.cli import main
from equiv.judge.export import load_judge
from equiv.judge.inference import score_pairs
from equiv.judge.module import PairClassifier
from equiv.judge.policy import LEGACY_KEYS

PAIRS = [
    ("She has 3 * 4 = 12 apples.", "3 times 4 is 12, so she has 12 apples."),
    ("The total is 5 + 7 = 12.", "The total is 5 * 7 = 35."),
    ("x = 2", "x equals 2 because 2x = 4 and so on " * 5),
]


@pytest.fixture(scope="module")
def trained_run(tiny_longformer: Path, demo_val_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short epochs of the tiny Longformer on the demo data, through trainer_cli's main()."""
    root = tmp_path_factory.mktemp("run")
    status = main(
        [
            "fit",
            "--config", "configs/demo.yaml",
            "--config", "configs/logger/csv.yaml",
            f"--trainer.default_root_dir={root}",
            f"--trainer.logger.init_args.save_dir={root}",
            "--trainer.max_epochs=2",
            "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=2",
            "--trainer.log_every_n_steps=1",
            "--trainer.enable_progress_bar=false",
            f"--model.model_name={tiny_longformer}",
            "--model.max_length=64",
            "--model.prefilter_threshold=0.6",
            "--data.batch_size=8",
            f"--data.val={demo_val_small}",
        ]
    )  # fmt: skip
    assert status == 0
    return root


def test_longformer_gets_global_attention_on_cls(tiny_longformer: Path) -> None:
    module = PairClassifier(model_name=str(tiny_longformer), max_length=64)
    module.eval()
    batch = dict(module.tokenizer(["a b c"], ["d e"], return_tensors="pt", padding="max_length", max_length=16))
    mask = torch.zeros_like(batch["input_ids"])
    mask[:, 0] = 1
    expected = module.model(**batch, global_attention_mask=mask).logits
    assert torch.allclose(module(batch), expected)
    assert module.model.training is False and PairClassifier(model_name=str(tiny_longformer)).model.training


def test_fit_takes_a_train_fraction_from_the_command_line(tiny_longformer: Path, demo_val_small: Path,
                                                         tmp_path: Path) -> None:
    """(Validated on the 32-pair ``demo_val_small``: the export's figures score the whole
    validation file twice after the fit, and nothing here reads them.)"""
    status = main(
        [
            "fit", "--config", "configs/demo.yaml", "--config", "configs/logger/csv.yaml",
            f"--trainer.default_root_dir={tmp_path}", f"--trainer.logger.init_args.save_dir={tmp_path}",
            "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
            "--trainer.enable_progress_bar=false", f"--model.model_name={tiny_longformer}", "--model.max_length=64",
            "--data.batch_size=8", "--data.train_fraction=0.5", f"--data.val={demo_val_small}",
        ]
    )  # fmt: skip
    assert status == 0
    saved = next(tmp_path.rglob("config.yaml")).read_text()
    assert "train_fraction: 0.5" in saved


def test_fit_logs_stage_metrics(trained_run: Path) -> None:
    metrics_csv = next(trained_run.rglob("metrics.csv"))
    header = next(csv.reader(metrics_csv.open()))
    for key in ["train/loss_step", "train/loss_epoch", "train/f1", "val/loss", "val/f1", "val/accuracy", "val/precision", "val/recall", "val/f1_best"]:
        assert key in header, key


def test_export_loads_with_auto_classes_and_carries_settings(trained_run: Path, tiny_longformer: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    judge_dir = trained_run / "judge"
    model = AutoModelForSequenceClassification.from_pretrained(judge_dir)
    AutoTokenizer.from_pretrained(judge_dir)
    assert model.config.id2label == {0: "not_equivalent", 1: "equivalent"}
    assert model.config.label2id == {"not_equivalent": 0, "equivalent": 1}
    settings = json.loads((judge_dir / "config.json").read_text())["equiv"]
    assert settings["label_mapping"] == {"equivalent": [3, 4], "not_equivalent": [0, 1]}
    assert settings["max_length"] == 64
    # the policy is the one stored form of the decision: no scattered threshold keys beside it
    assert settings["policy"]["prefilter"] == 0.6 and settings["policy"]["threshold"] == 0.5
    assert not set(LEGACY_KEYS) & set(settings) and "combine" not in settings["policy"]
    assert settings["model_name"] == str(tiny_longformer)


def test_exported_directory_predicts_like_the_best_checkpoint(trained_run: Path) -> None:
    ckpt = next(trained_run.rglob("best-*.ckpt"))
    dir_model, dir_tok, dir_settings = load_judge(trained_run / "judge")
    ckpt_model, ckpt_tok, ckpt_settings = load_judge(ckpt)
    assert dir_settings == ckpt_settings
    a = score_pairs(dir_model, dir_tok, PAIRS, max_length=64)
    b = score_pairs(ckpt_model, ckpt_tok, PAIRS, max_length=64)
    assert torch.allclose(a, b, atol=1e-5)
    # and the exported weights are the best epoch's: its recorded F1 is the best logged one
    recorded = json.loads((trained_run / "judge" / "equiv_metrics.json").read_text())
    rows = list(csv.DictReader(next(trained_run.rglob("metrics.csv")).open()))
    best = max(float(r["val/f1"]) for r in rows if r.get("val/f1"))
    assert recorded["f1"] == pytest.approx(best, abs=1e-6)


def test_load_judge_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="judge not found"):
        load_judge(tmp_path / "nope")
    with pytest.raises(InputError, match="no config.json"):
        load_judge(tmp_path)
    with pytest.raises(InputError, match="not a sequence classifier"):
        load_judge(bundled_minilm_dir())  # a plain BertModel, no classification head
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="checkpoint"):
        load_judge(junk)


def test_bad_hyper_parameters_are_input_errors(tiny_longformer: Path) -> None:
    with pytest.raises(InputError, match="decision_threshold"):
        PairClassifier(model_name=str(tiny_longformer), decision_threshold=1.5)
    with pytest.raises(InputError, match="model_name"):
        PairClassifier(model_name=str(tiny_longformer / "missing"))
