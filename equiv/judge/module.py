"""PairClassifier: the equivalence judge as a LightningModule around any HF pair classifier.

The backbone is an ``AutoModelForSequenceClassification`` with two labels (index 1 =
"equivalent"): Longformer for the paper's recipe, the bundled all-MiniLM-L6-v2 on CPU, a tiny
random-init model in tests -- one code path for all. Metrics are torchmetrics objects, one
collection per stage (``train/``, ``val/``, ``test/``) plus a running best ``val/f1_best``, so the
numbers in the logger are exactly the ones the best checkpoint is chosen by.

``prefilter_threshold`` and ``decision_threshold`` do not affect training (the decision threshold
only sets where the validation metrics cut the probability); they travel with the exported judge,
as its decision policy (``equiv.policy``: threshold and prefilter), so search uses the values the
judge was trained and validated for.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch
from torchmetrics import MaxMetric, MeanMetric, MetricCollection
from torchmetrics.classification import BinaryAccuracy, BinaryF1Score, BinaryPrecision, BinaryRecall

from equiv.backbones import BUNDLED_MINILM, resolve_model_name
from equiv.data.records import LabelMapping
from equiv.errors import InputError, check_fraction
from equiv.judge.policy import POLICY_KEY, DecisionPolicy

ID2LABEL = {0: "not_equivalent", 1: "equivalent"}
LABEL2ID = {v: k for k, v in ID2LABEL.items()}
POSITIVE_INDEX = 1
METRIC_NAMES = ("f1", "accuracy", "precision", "recall")
# Parameters that AdamW should not decay (biases and normalisation weights), as in BERT.
NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "LayerNorm.bias", "norm.weight")


def stage_metrics(stage: str, threshold: float) -> MetricCollection:
    """F1/accuracy/precision/recall on P(equivalent) cut at ``threshold``, keys ``stage/name``."""
    return MetricCollection(
        {
            "f1": BinaryF1Score(threshold=threshold),
            "accuracy": BinaryAccuracy(threshold=threshold),
            "precision": BinaryPrecision(threshold=threshold),
            "recall": BinaryRecall(threshold=threshold),
        },
        prefix=f"{stage}/",
    )


def load_backbone(model_name: str, *, pretrained: bool = True, hf_config: dict[str, Any] | None = None) -> Any:
    """A two-label sequence classifier: pretrained weights, or random init from a config."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    path = resolve_model_name(model_name)
    labels = {"num_labels": 2, "id2label": dict(ID2LABEL), "label2id": dict(LABEL2ID)}
    try:
        if hf_config is not None:
            config_dict = dict(hf_config)
            model_type = config_dict.pop("model_type")
            config = AutoConfig.for_model(model_type, **config_dict)
            config.update(labels)
            return AutoModelForSequenceClassification.from_config(config)
        if not pretrained:
            config = AutoConfig.from_pretrained(path, **labels)
            return AutoModelForSequenceClassification.from_config(config)
        return AutoModelForSequenceClassification.from_pretrained(path, **labels)
    except (OSError, ValueError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"cannot load a sequence classifier from {path!r}: {first[:300]}", field="model_name") from None


def load_tokenizer(model_name: str) -> Any:
    from transformers import AutoTokenizer

    path = resolve_model_name(model_name)
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"cannot load a tokenizer from {path!r}: {first[:300]}", field="model_name") from None


class PairClassifier(L.LightningModule):
    """Binary equivalence judge over (step, step) pairs.

    Args:
        model_name: hub id, local directory, or ``bundled:all-MiniLM-L6-v2``.
        learning_rate: AdamW peak learning rate (paper search space: 1e-6 .. 5e-5).
        weight_decay: AdamW weight decay, not applied to biases and norms (paper: 0 .. 0.1).
        warmup_ratio: fraction of all optimiser steps with linear warm-up; then linear decay to 0.
        warmup_steps: absolute warm-up steps; overrides ``warmup_ratio`` when set.
        adam_epsilon: AdamW epsilon.
        max_length: tokens per pair (linked to the data module by the CLI; exported).
        batch_size: training batch size (linked from the data module; recorded in hparams).
        label_equivalent: MathEquiv levels meaning "equivalent" (linked from the data; exported).
        label_not_equivalent: levels meaning "not equivalent" (linked from the data; exported).
        prefilter_threshold: Levenshtein ratio at or below which search calls a pair not
            equivalent without asking the model; ``None`` or 0 disables the prefilter. Exported
            only, as the policy's ``prefilter``.
        decision_threshold: P(equivalent) above which a pair counts as equivalent; used by the
            evaluation metrics and exported for search as the policy's ``threshold``.
        pretrained: load pretrained weights (``False``: random init from the model's config).
        hf_config: build the backbone from this config dict (used when reloading a checkpoint
            without the original weights at hand).
    """

    def __init__(
        self,
        model_name: str = BUNDLED_MINILM,
        learning_rate: float = 2e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        warmup_steps: int | None = None,
        adam_epsilon: float = 1e-8,
        max_length: int = 512,
        batch_size: int = 4,
        label_equivalent: list[int] = [3, 4],  # noqa: B006 - jsonargparse reads the default
        label_not_equivalent: list[int] = [0, 1],  # noqa: B006
        prefilter_threshold: float | None = 0.75,
        decision_threshold: float = 0.5,
        pretrained: bool = True,
        hf_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 < decision_threshold < 1.0:
            raise InputError(f"must be in (0, 1), got {decision_threshold}", field="decision_threshold")
        if prefilter_threshold is not None:
            check_fraction(prefilter_threshold, "prefilter_threshold")
        if not learning_rate >= 0.0:  # also refuses NaN; 0 (frozen weights) is legitimate
            raise InputError(f"must be >= 0, got {learning_rate}", field="learning_rate")
        if not weight_decay >= 0.0:
            raise InputError(f"must be >= 0, got {weight_decay}", field="weight_decay")
        if not adam_epsilon > 0.0:
            raise InputError(f"must be > 0, got {adam_epsilon}", field="adam_epsilon")
        check_fraction(warmup_ratio, "warmup_ratio", closed=False)
        self.save_hyperparameters()
        self.model_name = model_name
        self.max_length = int(max_length)
        self.label_mapping = LabelMapping(tuple(label_equivalent), tuple(label_not_equivalent))
        self.model = load_backbone(model_name, pretrained=pretrained, hf_config=hf_config)
        # from_pretrained returns the model in eval mode; Lightning keeps module modes as found,
        # so without this dropout would stay off during training.
        self.model.train()
        self.tokenizer = load_tokenizer(model_name)
        self.train_loss = MeanMetric()
        self.train_metrics = stage_metrics("train", decision_threshold)
        self.val_metrics = stage_metrics("val", decision_threshold)
        self.test_metrics = stage_metrics("test", decision_threshold)
        self.val_f1_best = MaxMetric()
        # Plain floats for the CLI's end-of-fit summary: the last and the best validation epoch.
        self.last_val_metrics: dict[str, float] = {}
        self.best_val_metrics: dict[str, float] = {}

    # -- settings that travel with the judge -----------------------------------------------
    def equiv_settings(self) -> dict[str, Any]:
        """What search needs to use this judge as trained (stored in the exported config): the
        decision policy is the one stored form of the threshold and the prefilter."""
        return {
            "label_mapping": self.label_mapping.to_dict(),
            "max_length": self.max_length,
            "model_name": str(self.model_name),
            POLICY_KEY: self.decision_policy().to_dict(),
        }

    def decision_policy(self) -> DecisionPolicy:
        """This judge's policy as trained: its threshold and prefilter, no guard or floor (``fit``
        adds those to the export when asked)."""
        hp = self.hparams
        prefilter = None if hp.prefilter_threshold is None else float(hp.prefilter_threshold) or None
        return DecisionPolicy(threshold=float(hp.decision_threshold), prefilter=prefilter)

    # -- forward ---------------------------------------------------------------------------
    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits of shape (batch, 2); ``labels`` and ``index`` in the batch are ignored."""
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "index")}
        if getattr(self.model.config, "model_type", None) == "longformer" and "global_attention_mask" not in inputs:
            # The classification head reads the CLS token, which must see the whole pair.
            global_mask = torch.zeros_like(inputs["input_ids"])
            global_mask[:, 0] = 1
            inputs["global_attention_mask"] = global_mask
        return self.model(**inputs).logits

    def _step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self(batch).float()
        loss = torch.nn.functional.cross_entropy(logits, batch["labels"])
        probs = torch.softmax(logits, dim=-1)[:, POSITIVE_INDEX]
        return loss, probs.detach()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, probs = self._step(batch)
        n = batch["labels"].shape[0]
        self.train_metrics.update(probs, batch["labels"])
        self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=n)
        return loss

    def on_train_epoch_end(self) -> None:
        self.log_dict(self.train_metrics.compute())
        self.train_metrics.reset()

    def on_train_start(self) -> None:
        # The sanity check ran validation before training; it must not count as the best epoch.
        # best_val_metrics survives: it is either empty (a fresh fit) or restored from the
        # checkpoint being resumed (on_load_checkpoint), and the sanity check never updates it.
        self.val_metrics.reset()
        self.val_f1_best.reset()
        if self.best_val_metrics:
            self.val_f1_best(torch.tensor(self.best_val_metrics["f1"]))

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss, probs = self._step(batch)
        self.val_metrics.update(probs, batch["labels"])
        self.log("val/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=batch["labels"].shape[0])

    def on_validation_epoch_end(self) -> None:
        computed = self.val_metrics.compute()
        self.val_metrics.reset()
        self.log_dict(computed, prog_bar=True)
        f1 = computed["val/f1"]
        self.val_f1_best(f1)
        self.log("val/f1_best", self.val_f1_best.compute(), prog_bar=True)
        values = {k.split("/", 1)[1]: float(v) for k, v in computed.items()}
        self.last_val_metrics = values
        if not self.trainer.sanity_checking and (not self.best_val_metrics or values["f1"] > self.best_val_metrics["f1"]):
            self.best_val_metrics = dict(values, epoch=float(self.current_epoch))

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss, probs = self._step(batch)
        self.test_metrics.update(probs, batch["labels"])
        self.log("test/loss", loss, on_step=False, on_epoch=True, batch_size=batch["labels"].shape[0])

    def on_test_epoch_end(self) -> None:
        self.log_dict(self.test_metrics.compute())
        self.test_metrics.reset()

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        probs = torch.softmax(self(batch).float(), dim=-1)[:, POSITIVE_INDEX]
        return {"index": batch["index"].cpu(), "prob": probs.cpu()}

    # -- optimisation ----------------------------------------------------------------------
    def configure_optimizers(self) -> dict[str, Any]:
        hp = self.hparams
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if any(key in name for key in NO_DECAY) else decay).append(param)
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": hp.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=hp.learning_rate,
            eps=hp.adam_epsilon,
        )
        total = self.trainer.estimated_stepping_batches
        total = int(total) if math.isfinite(total) else 0
        warmup = hp.warmup_steps if hp.warmup_steps is not None else int(hp.warmup_ratio * total)

        def linear(step: int) -> float:
            if warmup and step < warmup:
                return (step + 1) / (warmup + 1)
            if total <= warmup:
                return 1.0
            return max(0.0, (total - step) / max(1, total - warmup))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # -- checkpoints -----------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Enough to rebuild the backbone from the checkpoint alone (see export.load_judge).
        checkpoint["equiv_hf_config"] = self.model.config.to_dict()
        checkpoint["equiv_settings"] = self.equiv_settings()
        # The metrics of the epoch these weights come from (ModelCheckpoint saves after this
        # epoch's validation), and the running best, so a resumed fit exports matching numbers.
        checkpoint["equiv_val_metrics"] = dict(self.last_val_metrics, epoch=float(self.current_epoch)) if self.last_val_metrics else {}
        checkpoint["equiv_best_val_metrics"] = dict(self.best_val_metrics)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.best_val_metrics = dict(checkpoint.get("equiv_best_val_metrics") or {})
