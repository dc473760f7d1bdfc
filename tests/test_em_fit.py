"""EM refinement inside a real Lightning ``fit`` on CPU: stats are logged, resume is exact.

A tiny random-init BERT keeps each fit to seconds; the callback under test scores with the real
model and applies a known rule on top (``tests/helpers/em.py``), so the E-step decisions are known
in advance while the real scoring path still runs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import lightning as L
import torch
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from equiv.errors import InputError
from equiv.judge.em_callback import EMRefinementCallback
from tests.helpers.em import RuleScoredEM, make_parts, write_tiny_data


class TrainSetRecorder(L.Callback):
    """Records, per epoch, the records the train dataloader actually serves."""

    def __init__(self) -> None:
        self.per_epoch: dict[int, list[tuple[str, str, int]]] = {}

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        records = trainer.train_dataloader.dataset.records
        self.per_epoch[trainer.current_epoch] = [(r.sentence1, r.sentence2, r.result) for r in records]


def make_trainer(root: Path, callbacks: list, max_epochs: int, **kwargs: Any) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=max_epochs,
        default_root_dir=str(root),
        logger=CSVLogger(str(root), name="logs"),
        callbacks=callbacks,
        reload_dataloaders_every_n_epochs=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
        **kwargs,
    )


def em_metrics(root: Path) -> list[dict[str, str]]:
    (path,) = root.glob("logs/version_*/metrics.csv")
    with path.open() as fh:
        return [row for row in csv.DictReader(fh) if row.get("em/samples_examined")]


def test_two_epoch_fit_refines_and_logs_nonzero_stats(tmp_path: Path) -> None:
    train, val = write_tiny_data(tmp_path)
    model, data = make_parts(train, val)
    em = RuleScoredEM(threshold=0.9, write_refined=True)
    recorder = TrainSetRecorder()
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_top_k=-1)
    trainer = make_trainer(tmp_path, [em, recorder, checkpoint], max_epochs=2)
    trainer.fit(model, datamodule=data)

    assert len(em.history) == 1  # after epoch 0 only: nothing trains on a refinement after the last epoch
    rows = em_metrics(tmp_path)
    assert len(rows) == 1
    row = {k: float(v) for k, v in rows[0].items() if k.startswith("em/") and v}
    assert row["em/samples_examined"] == 6 + 2  # label-0 multi-sentence samples (level 1 is label 0)
    assert row["em/samples_changed"] == 6
    assert row["em/sentences_removed"] == 12
    assert row["em/samples_dropped"] == 2
    assert row["em/subpairs_scored"] == 4 * 8
    assert 0.0 < row["em/prob_mean"] < 1.0
    assert row["em/train_samples"] == 16 - 2

    # The real model was called on every sub-pair, with finite probabilities.
    assert len(em.model_probabilities) == 1 and len(em.model_probabilities[0]) == 32
    assert all(0.0 < p < 1.0 for p in em.model_probabilities[0])

    # Epoch 1 really trained on the refined set: shared sentence gone, labels untouched, val untouched.
    first, second = recorder.per_epoch[0], recorder.per_epoch[1]
    assert len(first) == 16 and len(second) == 14
    refined = {s1: (s2, r) for s1, s2, r in second}
    assert refined["Each box holds 3 apples."] == ("Each box holds 4 pears.", 0)
    original_result = {r.source: r.result for r in data.original_train_records}
    assert all(r.result == original_result[r.source] for r in data.train_records)
    assert sum(r == 1 for _, _, r in second) == 0 and sum(r == 4 for _, _, r in second) == 4
    assert [r.sentence1 for r in data.records["val"]][0] == "Add 1 and 1. The sum is 2."

    # The inspection file: every original sample, original and refined side by side.
    lines = [json.loads(x) for x in (tmp_path / "ckpt" / "em_refined_epoch0.jsonl").read_text().splitlines()]
    assert len(lines) == 16
    changed = [x for x in lines if x["status"] == "changed"]
    assert len(changed) == 6 and changed[0]["sentence1"].startswith("There are 2 boxes.")
    assert changed[0]["refined_sentence1"] == "Each box holds 3 apples."
    assert sum(x["status"] == "dropped" and x["refined_sentence1"] is None for x in lines) == 2


def test_resume_restores_the_refined_set_exactly(tmp_path: Path) -> None:
    train, val = write_tiny_data(tmp_path)
    model, data = make_parts(train, val)
    recorder = TrainSetRecorder()
    em = RuleScoredEM(threshold=0.9)
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_top_k=-1, filename="e{epoch}", auto_insert_metric_name=False)
    make_trainer(tmp_path / "a", [em, recorder, checkpoint], max_epochs=3).fit(model, datamodule=data)
    assert len(em.history) == 2

    # Resume from the end of epoch 0: epoch 1 must train on the set refined after epoch 0, which the
    # resumed run never computed itself -- it can only come from the checkpoint.
    model2, data2 = make_parts(train, val, seed=1)
    recorder2 = TrainSetRecorder()
    em2 = RuleScoredEM(threshold=0.9)
    make_trainer(tmp_path / "b", [em2, recorder2], max_epochs=3).fit(
        model2, datamodule=data2, ckpt_path=str(tmp_path / "ckpt" / "e0.ckpt")
    )
    assert sorted(recorder2.per_epoch) == [1, 2]
    assert recorder2.per_epoch[1] == recorder.per_epoch[1]
    assert recorder2.per_epoch[2] == recorder.per_epoch[2]
    assert em2.history[0] == em.history[0]  # the restored history
    assert em2.overrides == em.overrides


def test_resume_on_different_training_data_fails_loudly(tmp_path: Path) -> None:
    train, val = write_tiny_data(tmp_path)
    model, data = make_parts(train, val)
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="last")
    make_trainer(tmp_path / "a", [RuleScoredEM(), checkpoint], max_epochs=2).fit(model, datamodule=data)
    other = tmp_path / "other.jsonl"
    other.write_text(train.read_text().replace("apples", "plums"), encoding="utf-8")
    model2, data2 = make_parts(other, val)
    with pytest.raises(InputError, match="different training set"):
        make_trainer(tmp_path / "b", [RuleScoredEM()], max_epochs=3).fit(
            model2, datamodule=data2, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt")
        )


def test_disabled_callback_changes_nothing_and_reload_setting_is_required(tmp_path: Path) -> None:
    train, val = write_tiny_data(tmp_path)
    model, data = make_parts(train, val)
    recorder = TrainSetRecorder()
    em = RuleScoredEM(enabled=False)
    make_trainer(tmp_path / "a", [em, recorder], max_epochs=2).fit(model, datamodule=data)
    assert em.history == [] and recorder.per_epoch[0] == recorder.per_epoch[1]

    model, data = make_parts(train, val)
    trainer = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, callbacks=[RuleScoredEM()],
                        enable_checkpointing=False, enable_progress_bar=False, default_root_dir=str(tmp_path / "b"))
    with pytest.raises(InputError, match="reload_dataloaders_every_n_epochs"):
        trainer.fit(model, datamodule=data)


def test_an_e_step_that_changes_nothing_leaves_training_bit_identical(tmp_path: Path) -> None:
    """Scoring between epochs must not perturb training (RNG, modes, grads): with the callback
    enabled but a threshold nothing reaches, the weights equal those of the disabled callback, so
    `enabled: true/false` is a controlled with/without-EM comparison."""

    def final_weights(callback: EMRefinementCallback) -> dict:
        train, val = write_tiny_data(tmp_path)
        model, data = make_parts(train, val)
        trainer = L.Trainer(accelerator="cpu", max_epochs=3, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                            reload_dataloaders_every_n_epochs=1, callbacks=[callback], default_root_dir=str(tmp_path))
        trainer.fit(model, datamodule=data)
        return {k: v.clone() for k, v in model.state_dict().items()}

    on = EMRefinementCallback(threshold=0.999999)
    weights_on = final_weights(on)
    weights_off = final_weights(EMRefinementCallback(enabled=False))
    assert len(on.history) == 2 and on.history[-1]["subpairs_scored"] > 0
    assert all(torch.equal(weights_on[k], weights_off[k]) for k in weights_on)
