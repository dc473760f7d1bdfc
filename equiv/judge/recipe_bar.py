"""RecipeBar: the one progress bar of ``equiv-train recipe`` inside each of its fits.

Why a bar of its own: Lightning's bar restarts every epoch and opens a second one for
validation, so a 10-minute fit inside a 20-minute recipe showed neither which step was running
nor how far it was. This one names the step (``recipe 1/3 fit seed 42``) and counts the fit's
training batches over all epochs; the epoch, validation and export show beside it. The recipe
(:mod:`equiv.judge.recipe`) adds it to each fit's ``trainer.callbacks``; a ProgressBar callback
replaces Lightning's own.
"""

from __future__ import annotations

import sys
from typing import Any

from lightning.pytorch.callbacks import ProgressBar


class RecipeBar(ProgressBar):
    """The recipe's one progress bar inside a fit: ``recipe 1/3 fit seed 42`` over the fit's
    training batches (all epochs), the epoch and validation shown beside it, in place of
    Lightning's per-epoch and validation bars."""

    def __init__(self, label: str = "fit", step: int = 1, steps: int = 1) -> None:
        super().__init__()
        self.label, self.step, self.steps = label, step, steps
        self._enabled = True
        self._bar: Any = None

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        from tqdm import tqdm

        total = trainer.estimated_stepping_batches
        self._bar = tqdm(total=int(total) if total != float("inf") else None, unit="batch", dynamic_ncols=True,
                         desc=f"recipe {self.step}/{self.steps} {self.label}", disable=not self._enabled,
                         file=sys.stderr)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}")

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if self._bar is not None and not trainer.sanity_checking:
            self._bar.set_postfix_str(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}, validating")

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str("exporting")
            self._bar.close()
