"""EMRefinementCallback: runs the E-step of :mod:`equiv.judge.em` between training epochs.

Where it hooks in, and why:

* The E-step runs right after the **last training batch** of an epoch (``on_train_batch_end``
  when ``batch_idx + 1 == num_training_batches``; ``on_train_epoch_end`` is a fallback). The
  weights are final for the epoch there, and it is *before* the end-of-epoch validation, whose
  ``on_validation_end`` is where ModelCheckpoint saves. So every end-of-epoch checkpoint already
  holds the refinement the next epoch trains on, and ``fit --ckpt_path`` resumes with exactly
  that set. (After ``on_train_epoch_end`` would be too late: the checkpoint would hold the
  previous refinement.)
* ``trainer.reload_dataloaders_every_n_epochs`` must be 1: the datamodule's next
  ``train_dataloader()`` call, at the start of the next epoch, serves the refined records.
* Scoring never calls ``trainer.predict``: :func:`equiv.judge.inference.score_pairs` runs a
  batched, length-sorted, no-grad pass under the training precision's autocast and restores train
  mode. Under DDP each rank scores a strided shard of the sub-pairs and the probabilities are
  all-gathered, so every rank applies the identical, deterministic E-step to identical numbers and
  ends up with the same refined set (checked by ``tests/test_em_ddp.py``).
* State (original-index -> refined texts or "dropped", plus the last refined epoch and a
  fingerprint of the original training set) lives in :meth:`state_dict`, is saved with every
  checkpoint and re-applied to the datamodule in ``on_fit_start``, after the checkpoint restore
  and before the first train dataloader is built.
* Only ``datamodule.train_records`` is ever replaced; validation and test data are never touched.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal, Sequence

import lightning as L
import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt, restricted_number_type
from lightning.pytorch.utilities import rank_zero_info

from equiv.errors import InputError
from equiv.judge import em
from equiv.judge.em import EMConfig
from equiv.judge.inference import score_pairs

STATE_VERSION = 1
# Typed so that a bad value in a YAML recipe is a parse error naming the key, before training starts.
Probability = restricted_number_type("Probability", float, [(">=", 0.0), ("<", 1.0)], join="and")
_AUTOCAST = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def autocast_dtype_for(precision: Any) -> torch.dtype | None:
    """The autocast dtype of a Lightning precision setting (``"bf16-mixed"`` -> bfloat16, else None)."""
    return _AUTOCAST.get(str(precision))


class EMRefinementCallback(L.Callback):
    """Refine the training set between epochs by removing confidently equivalent sentence sub-pairs.

    Args:
        enabled: ``False`` makes the callback a no-op (one switch to compare with and without EM).
        threshold: sub-pairs with P(equivalent) strictly above this are removed.
        start_after_epoch: first epoch (0-based) after which the E-step runs; it then runs after
            every ``every_n_epochs`` epochs. Never after the final epoch (nothing trains on it).
        every_n_epochs: run the E-step every this many epochs from ``start_after_epoch`` on.
        pairing: ``"greedy"`` (one-to-one matching over the full sentence grid, by probability)
            or ``"aligned"`` (sentence i with sentence i only).
        max_sentences: samples with more sentences on a side are left unchanged.
        refine_labels: binary labels whose samples are refined (default: not-equivalent only).
        one_side_empty: ``"keep"`` (leave the sample unchanged) or ``"drop"``.
        both_sides_empty: ``"drop"`` or ``"keep"`` (leave the sample unchanged).
        split_unpunctuated: also split sentences at capitalised sentence starters with no
            punctuation before them (joined solution lines in GSM8K-style data).
        cumulative: refine the already refined set (changes compound across epochs) instead of
            re-deriving the refinement from the original samples with the current model.
        batch_size: sub-pairs per scoring batch.
        shard_scoring: under DDP, each rank scores 1/world of the sub-pairs and all-gathers; if
            ``False`` every rank scores everything (same result, world-times the work).
        write_refined: write ``em_refined_epoch{N}.jsonl`` (original and refined texts side by
            side, with status and removed sub-pairs) next to the checkpoints after each E-step.
        log_histogram: also log the sub-pair probabilities as a histogram to W&B / TensorBoard.
    """

    def __init__(
        self,
        enabled: bool = True,
        threshold: Probability = 0.9,  # type: ignore[valid-type]
        start_after_epoch: NonNegativeInt = 0,
        every_n_epochs: PositiveInt = 1,
        pairing: Literal["greedy", "aligned"] = "greedy",
        max_sentences: PositiveInt = 8,
        refine_labels: list[Literal[0, 1]] = [0],  # noqa: B006 - jsonargparse reads the default
        one_side_empty: Literal["keep", "drop"] = "keep",
        both_sides_empty: Literal["drop", "keep"] = "drop",
        split_unpunctuated: bool = True,
        cumulative: bool = False,
        batch_size: PositiveInt = 64,
        shard_scoring: bool = True,
        write_refined: bool = False,
        log_histogram: bool = True,
    ) -> None:
        super().__init__()
        self.settings = EMConfig(
            threshold=threshold,
            pairing=pairing,
            max_sentences=max_sentences,
            refine_labels=tuple(refine_labels),
            one_side_empty=one_side_empty,
            both_sides_empty=both_sides_empty,
            split_unpunctuated=split_unpunctuated,
        )
        if start_after_epoch < 0:
            raise InputError(f"must be >= 0, got {start_after_epoch}", field="em.start_after_epoch")
        if every_n_epochs < 1:
            raise InputError(f"must be >= 1, got {every_n_epochs}", field="em.every_n_epochs")
        if batch_size < 1:
            raise InputError(f"must be >= 1, got {batch_size}", field="em.batch_size")
        self.enabled = enabled
        self.start_after_epoch = start_after_epoch
        self.every_n_epochs = every_n_epochs
        self.cumulative = cumulative
        self.batch_size = batch_size
        self.shard_scoring = shard_scoring
        self.write_refined = write_refined
        self.log_histogram = log_histogram
        # Refinement state (what checkpoints hold).
        self.overrides: dict[int, tuple[str, str] | None] = {}
        self.last_refined_epoch: int = -1
        self.history: list[dict[str, float]] = []
        self._fingerprint: str | None = None
        self._loaded: dict[str, Any] | None = None
        self.last_result: em.EStepResult | None = None

    @property
    def state_key(self) -> str:
        return "EMRefinementCallback"

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Plain lists/dicts/str/int only, so the checkpoint loads with ``weights_only=True`` too."""
        if not self.enabled:
            return {}
        return {
            "version": STATE_VERSION,
            "fingerprint": self._fingerprint,
            "last_refined_epoch": self.last_refined_epoch,
            "changed": [[i, t[0], t[1]] for i, t in sorted(self.overrides.items()) if t is not None],
            "dropped": sorted(i for i, t in self.overrides.items() if t is None),
            "history": list(self.history),
            "cumulative": self.cumulative,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Applied in on_fit_start, once the datamodule's originals exist to check it against.
        self._loaded = dict(state_dict) if state_dict else None

    # -- wiring --------------------------------------------------------------------------
    @staticmethod
    def _datamodule(trainer: L.Trainer) -> Any:
        dm = getattr(trainer, "datamodule", None)
        if dm is None or not hasattr(dm, "set_train_records") or not hasattr(dm, "original_train_records"):
            raise InputError(
                "EM refinement needs a datamodule with original_train_records and set_train_records "
                "(equiv.data.datamodule.MathEquivDataModule)",
                field="trainer.callbacks",
            )
        return dm

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.enabled:
            return
        if trainer.reload_dataloaders_every_n_epochs != 1:
            raise InputError(
                "EM refinement rebuilds the training set between epochs; set "
                f"trainer.reload_dataloaders_every_n_epochs: 1 (got {trainer.reload_dataloaders_every_n_epochs})",
                field="trainer.reload_dataloaders_every_n_epochs",
            )
        dm = self._datamodule(trainer)
        if not dm.original_train_records:
            dm.setup("fit")
        originals = dm.original_train_records
        self._fingerprint = em.fingerprint(originals)
        state, self._loaded = self._loaded, None
        if state is None:
            return
        if state.get("version") != STATE_VERSION:
            raise InputError(f"checkpoint holds EM state version {state.get('version')!r}, expected {STATE_VERSION}")
        if state.get("fingerprint") != self._fingerprint:
            raise InputError(
                "the checkpoint's EM refinement was made on a different training set; resume with the "
                "same data.train (and label mapping), or start a new run"
            )
        overrides: dict[int, tuple[str, str] | None] = {int(i): (s1, s2) for i, s1, s2 in state["changed"]}
        overrides.update({int(i): None for i in state["dropped"]})
        if any(not 0 <= i < len(originals) for i in overrides):
            raise InputError("the checkpoint's EM state refers to samples outside the training set")
        self.overrides = overrides
        self.last_refined_epoch = int(state["last_refined_epoch"])
        self.history = list(state.get("history", []))
        if overrides:
            dm.set_train_records(em.apply_overrides(originals, overrides))
        rank_zero_info(
            f"EM: restored refinement from epoch {self.last_refined_epoch}: "
            f"{sum(t is not None for t in overrides.values())} samples changed, "
            f"{sum(t is None for t in overrides.values())} dropped"
        )

    def _due(self, trainer: L.Trainer) -> bool:
        epoch = trainer.current_epoch
        if not self.enabled or epoch <= self.last_refined_epoch or trainer.sanity_checking:
            return False
        if epoch < self.start_after_epoch or (epoch - self.start_after_epoch) % self.every_n_epochs:
            return False
        if trainer.max_epochs is not None and trainer.max_epochs >= 0 and epoch + 1 >= trainer.max_epochs:
            return False  # nothing trains on a refinement after the final epoch
        return not trainer.should_stop

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if batch_idx + 1 >= trainer.num_training_batches and self._due(trainer):
            self.refine(trainer, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._due(trainer):  # epochs cut short (e.g. a batch limit Lightning counts differently)
            self.refine(trainer, pl_module)

    # -- the E-step ----------------------------------------------------------------------
    def score(self, trainer: L.Trainer, pl_module: L.LightningModule, pairs: Sequence[em.Pair]) -> list[float]:
        """P(equivalent) per sub-pair with the current weights; identical on every rank."""
        kwargs = dict(
            batch_size=self.batch_size,
            max_length=int(getattr(pl_module, "max_length", 512)),
            autocast_dtype=autocast_dtype_for(trainer.precision),
        )
        model, tokenizer = pl_module.model, pl_module.tokenizer
        world, rank = trainer.world_size, trainer.global_rank
        if world <= 1 or not self.shard_scoring:
            return score_pairs(model, tokenizer, list(pairs), **kwargs).tolist()
        # Strided shards balance long and short sub-pairs; pad to equal length for all_gather.
        mine = list(pairs[rank::world])
        width = -(-len(pairs) // world)
        local = torch.zeros(width, dtype=torch.float32)
        if mine:
            local[: len(mine)] = score_pairs(model, tokenizer, mine, **kwargs)
        gathered = pl_module.all_gather(local.to(pl_module.device)).reshape(world, width).cpu()
        out = torch.empty(len(pairs), dtype=torch.float32)
        for r in range(world):
            count = len(range(r, len(pairs), world))
            out[r::world] = gathered[r, :count]
        return out.tolist()

    def refine(self, trainer: L.Trainer, pl_module: L.LightningModule) -> em.EStepResult:
        """Run one E-step now and hand the refined set to the datamodule."""
        started = time.perf_counter()
        dm = self._datamodule(trainer)
        originals = dm.original_train_records
        mapping = getattr(pl_module, "label_mapping", None) or dm.label_mapping
        if self.cumulative:
            indices, pairs = em.current_pairs(originals, self.overrides)
        else:
            indices, pairs = list(range(len(originals))), [(r.sentence1, r.sentence2) for r in originals]
        labels = [mapping.label(originals[i].result) for i in indices]
        result = em.e_step(pairs, labels, lambda sub: self.score(trainer, pl_module, sub), self.settings)
        overrides = em.merge_outcomes(originals, self.overrides, indices, result.outcomes, self.cumulative)
        refined = em.apply_overrides(originals, overrides)
        if not refined:
            raise InputError(
                "EM refinement would drop every training sample; raise em threshold or set both_sides_empty: keep",
                field="em.threshold",
            )
        dm.set_train_records(refined)
        self.overrides = overrides
        epoch = trainer.current_epoch
        self.last_refined_epoch = epoch
        stats = dict(result.stats)
        stats["train_samples"] = len(refined)
        stats["seconds"] = time.perf_counter() - started
        self.history.append(dict(stats, epoch=epoch))
        self.last_result = result
        self._report(trainer, epoch, stats, result.probabilities)
        if self.write_refined and trainer.is_global_zero:
            self._write(trainer, epoch, originals, indices, result)
        return result

    # -- reporting -----------------------------------------------------------------------
    def _report(self, trainer: L.Trainer, epoch: int, stats: dict[str, float], probs: list[float]) -> None:
        metrics = {f"em/{k}": float(v) for k, v in stats.items()}
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)
            if self.log_histogram and probs:
                self._histogram(logger, probs, trainer.global_step)
        dist = ""
        if "prob_mean" in stats:
            dist = (
                f"; sub-pair P(equiv) mean {stats['prob_mean']:.3f} p50 {stats['prob_p50']:.3f} "
                f"p90 {stats['prob_p90']:.3f} max {stats['prob_max']:.3f}"
            )
        rank_zero_info(
            f"EM after epoch {epoch}: examined {int(stats['samples_examined'])}, changed {int(stats['samples_changed'])}, "
            f"sentences removed {int(stats['sentences_removed'])}, dropped {int(stats['samples_dropped'])}, "
            f"{int(stats['subpairs_scored'])} sub-pairs scored ({int(stats['subpairs_above_threshold'])} above "
            f"{self.settings.threshold}){dist}; next epoch trains on {int(stats['train_samples'])} samples "
            f"[{stats['seconds']:.1f}s]"
        )

    @staticmethod
    def _histogram(logger: Any, probs: list[float], step: int) -> None:
        name = type(logger).__name__
        try:
            if name == "WandbLogger":
                import wandb

                logger.experiment.log({"em/prob_hist": wandb.Histogram(probs), "trainer/global_step": step})
            elif name == "TensorBoardLogger":
                logger.experiment.add_histogram("em/prob_hist", torch.tensor(probs), global_step=step)
        except Exception as err:  # a histogram is a nicety; never let it stop training
            rank_zero_info(f"EM: could not log the probability histogram to {name}: {err}")

    def output_dir(self, trainer: L.Trainer) -> Path:
        """Next to the checkpoints when there is a checkpoint callback, else the run's root dir."""
        ckpt = trainer.checkpoint_callback
        dirpath = getattr(ckpt, "dirpath", None) if ckpt is not None else None
        return Path(dirpath) if dirpath else Path(trainer.default_root_dir)

    def _write(
        self, trainer: L.Trainer, epoch: int, originals: Sequence[Any], indices: Sequence[int], result: em.EStepResult
    ) -> Path:
        out = self.output_dir(trainer) / f"em_refined_epoch{epoch}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        by_index = {i: o for i, o in zip(indices, result.outcomes)}
        with out.open("w", encoding="utf-8") as fh:
            for i, record in enumerate(originals):
                outcome = by_index.get(i)
                current = self.overrides.get(i, (record.sentence1, record.sentence2))
                row = {
                    "index": i,
                    "source": record.source,
                    "result": record.result,
                    "status": outcome.status if outcome is not None else em.DROPPED,
                    "sentence1": record.sentence1,
                    "sentence2": record.sentence2,
                    "refined_sentence1": None if current is None else current[0],
                    "refined_sentence2": None if current is None else current[1],
                    "removed": [list(t) for t in outcome.removed] if outcome is not None else [],
                }
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        rank_zero_info(f"EM: wrote the refined training set to {out}")
        return out
