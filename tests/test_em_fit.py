"""EM refinement inside a real Lightning ``fit`` on CPU: stats are logged, resume is exact.

A tiny random-init BERT (with the bundled MiniLM tokenizer) keeps each fit to seconds. Its
probabilities carry no meaning, so the callback under test scores with the real model (the
batched ``score_pairs`` pass, all-gather under DDP) and then applies a deterministic rule on top:
identical sentences are 0.99-equivalent, anything else keeps min(model probability, 0.5). The
E-step decisions are thereby known in advance while the real scoring path still runs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Sequence

import lightning as L
import torch
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from equiv.backbones import BUNDLED_MINILM
from equiv.data.datamodule import MathEquivDataModule
from equiv.errors import InputError
from equiv.judge.em_callback import EMRefinementCallback
from equiv.judge.module import PairClassifier

TINY_BERT = {
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 128,
}


def write_tiny_data(root: Path) -> tuple[Path, Path]:
    """Train: label-0 pairs sharing one identical sentence, fully shared ones, positives, singles."""
    train = []
    for k in range(6):
        # Shared first sentence -> removed; the differing second sentences stay.
        train.append({"sentence1": f"There are {k + 2} boxes. Each box holds {k + 3} apples.",
                      "sentence2": f"There are {k + 2} boxes. Each box holds {k + 4} pears.", "result": 0})
    for k in range(2):
        # Every sentence shared (in another order) -> dropped.
        train.append({"sentence1": f"Tom has {k} cats. Ann has {k + 1} dogs.",
                      "sentence2": f"Ann has {k + 1} dogs. Tom has {k} cats.", "result": 1})
    for k in range(4):
        # Positives with a shared sentence: not refined (refine_labels [0]).
        train.append({"sentence1": f"We add {k} and 2. The sum is {k + 2}.",
                      "sentence2": f"We add {k} and 2. So we get {k + 2}.", "result": 4})
    for k in range(4):
        train.append({"sentence1": f"Multiply {k} by 3.", "sentence2": f"Divide {k} by 3.", "result": 0})
    val = [
        {"sentence1": "Add 1 and 1. The sum is 2.", "sentence2": "Add 1 and 1. The sum is 3.", "result": 0},
        {"sentence1": "Half of 8 is 4.", "sentence2": "8 / 2 = 4.", "result": 4},
        {"sentence1": "Twice 3 is 6.", "sentence2": "3 + 3 = 7.", "result": 0},
        {"sentence1": "5 - 2 = 3.", "sentence2": "Take 2 from 5 to get 3.", "result": 3},
    ]
    paths = []
    for name, rows in (("train", train), ("valid", val)):
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


class RuleScoredEM(EMRefinementCallback):
    """Real model scoring, then a deterministic rule on top (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model_probabilities: list[list[float]] = []

    def score(self, trainer, pl_module, pairs: Sequence[tuple[str, str]]) -> list[float]:
        real = super().score(trainer, pl_module, pairs)
        self.model_probabilities.append(real)
        return [0.99 if a.strip() == b.strip() else min(p, 0.5) for (a, b), p in zip(pairs, real)]


class TrainSetRecorder(L.Callback):
    """Records, per epoch, the records the train dataloader actually serves."""

    def __init__(self) -> None:
        self.per_epoch: dict[int, list[tuple[str, str, int]]] = {}

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        records = trainer.train_dataloader.dataset.records
        self.per_epoch[trainer.current_epoch] = [(r.sentence1, r.sentence2, r.result) for r in records]


def make_parts(train: Path, val: Path, seed: int = 0) -> tuple[PairClassifier, MathEquivDataModule]:
    L.seed_everything(seed, verbose=False)
    model = PairClassifier(model_name=BUNDLED_MINILM, pretrained=False, hf_config=TINY_BERT, max_length=64, learning_rate=1e-3)
    data = MathEquivDataModule(train=str(train), val=str(val), model_name=BUNDLED_MINILM, max_length=64, batch_size=4)
    return model, data


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
