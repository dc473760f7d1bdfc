"""EM refinement under two-process DDP (gloo, CPU): every rank ends with the same refined set.

The test runs this file as a script in a subprocess (Lightning's DDP launcher re-executes the
script for rank 1). Each rank writes the records its next train dataloader would serve, the
callback state, and the sub-pair probabilities it used; the test compares the ranks. Scoring is
sharded across the ranks and all-gathered (the default), so the probabilities each rank used came
from both processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _worker(out: Path) -> None:
    sys.path.insert(0, str(REPO))
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy

    from equiv.judge.em_callback import autocast_dtype_for
    from equiv.judge.inference import score_pairs
    from tests.helpers.em import RuleScoredEM, make_parts, write_tiny_data

    class CheckedEM(RuleScoredEM):
        """Also scores every sub-pair unsharded on this rank, to check the gathered order."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.max_gather_error: list[float] = []

        def score(self, trainer, pl_module, pairs):
            ruled = super().score(trainer, pl_module, pairs)
            full = score_pairs(pl_module.model, pl_module.tokenizer, list(pairs), max_length=pl_module.max_length,
                               autocast_dtype=autocast_dtype_for(trainer.precision)).tolist()
            gathered = self.model_probabilities[-1]
            self.max_gather_error.append(max(abs(a - b) for a, b in zip(gathered, full)))
            return ruled

    class Dump(L.Callback):
        def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            em = next(c for c in trainer.callbacks if isinstance(c, CheckedEM))
            records = trainer.datamodule.train_records
            payload = {
                "world_size": trainer.world_size,
                "records": [[r.sentence1, r.sentence2, r.result] for r in records],
                "state": em.state_dict(),
                "model_probabilities": em.model_probabilities,
                "history": em.history,
                "max_gather_error": em.max_gather_error,
            }
            (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(payload), encoding="utf-8")

    data_dir = out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    train, val = write_tiny_data(data_dir)
    model, data = make_parts(train, val)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo"),
        max_epochs=3,
        # Refine after epoch 0 and 1; max_epochs 3 so both E-steps feed an epoch.
        reload_dataloaders_every_n_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=str(out),
        callbacks=[CheckedEM(threshold=0.9), Dump()],
    )
    trainer.fit(model, datamodule=data)


@pytest.mark.slow
def test_two_process_ddp_gives_the_same_refined_set_on_both_ranks(tmp_path: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(tmp_path)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    rank1 = json.loads((tmp_path / "rank1.json").read_text())
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert rank0["records"] == rank1["records"]
    for rank in (rank0, rank1):  # wall time is the one thing allowed to differ
        for entry in rank["state"]["history"]:
            entry.pop("seconds")
    assert rank0["state"] == rank1["state"]
    assert [h["samples_changed"] for h in rank0["state"]["history"]] == [6, 6]
    assert len(rank0["records"]) == 14
    # Both ranks used identical, all-gathered model probabilities for every sub-pair.
    assert rank0["model_probabilities"] == rank1["model_probabilities"]
    assert [len(p) for p in rank0["model_probabilities"]] == [32, 32]  # each E-step starts from the originals
    # ...and they are the probabilities of the right sub-pairs: the sharded, gathered vector matches
    # an unsharded pass on each rank (up to batch-composition rounding).
    assert len(rank0["max_gather_error"]) == 2
    assert max(rank0["max_gather_error"] + rank1["max_gather_error"]) < 1e-4
    assert "EM after epoch 0" in proc.stderr + proc.stdout


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
