"""Watching a run and finishing it: progress bar, W&B, and ``summary.json``.

The single-process runner and the multi-worker driver end a run the same way -- the summary
from the records on disk, whether every (problem, seed) has a record (``complete``: false after
an interrupt), the caller's engine counters, one durable write, one W&B summary -- so both go
through :func:`finish_run`, also when the run is interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from equiv.rundir import RESULTS, SUMMARY, RecordKey, merge_records, read_records, record_key, summarise, write_atomic
from equiv.search.config import RunConfig


class Progress:
    """tqdm bar with running accuracy and tokens, and optional W&B logging."""

    def __init__(
        self, total: int, done: Sequence[Mapping[str, Any]], run: RunConfig, out_dir: Path, config: dict | None
    ) -> None:
        self.correct = sum(bool(r.get("correct")) for r in done)
        self.tokens = sum(int(r.get("generated_tokens") or 0) for r in done)
        self.count = len(done)
        self.bar = None
        if run.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=len(done), desc="search", unit="problem", file=sys.stderr)
        self.wandb = None
        if run.wandb_project:
            import wandb

            self.wandb = wandb.init(
                project=run.wandb_project,
                name=run.wandb_run_name or out_dir.name,
                dir=str(out_dir),
                config=config or {},
                resume="allow",
            )

    def update(self, record: Mapping[str, Any]) -> None:
        self.count += 1
        self.correct += bool(record["correct"])
        self.tokens += int(record["generated_tokens"])
        acc, tok = self.correct / self.count, self.tokens / self.count
        if self.bar is not None:
            self.bar.set_postfix(acc=f"{acc:.3f}", tokens=f"{tok:.0f}", refresh=False)
            self.bar.update(1)
        if self.wandb is not None:
            self.wandb.log(
                {
                    "eval/accuracy": acc,
                    "eval/mean_generated_tokens": tok,
                    "eval/problems": self.count,
                    "problem/generated_tokens": record["generated_tokens"],
                    "problem/pruned": record["pruned"],
                    "problem/correct": int(bool(record["correct"])),
                }
            )

    def close(self, summary: Mapping[str, Any] | None) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.wandb is not None:
            if summary:
                self.wandb.summary.update({f"summary/{k}": v for k, v in summary.items() if isinstance(v, (int, float))})
            self.wandb.finish()


def finish_run(
    out_dir: Path,
    *,
    order: Sequence[RecordKey],
    algo: str,
    pruner: str,
    extra: Mapping[str, Any],
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write ``summary.json`` from the records on disk and close the progress bar / W&B run.

    ``order`` is the run's (id, seed) keys (``complete`` says whether all have a record);
    ``extra`` holds what only the caller knows (wall time, engine calls, judge stats, workers).
    """
    records = merge_records([read_records(out_dir / RESULTS)[0]])
    summary = summarise(records, algo=algo, pruner=pruner)
    recorded = {record_key(r) for r in records}
    summary["complete"] = all(k in recorded for k in order)
    summary.update(extra)
    write_atomic(out_dir / SUMMARY, json.dumps(summary, indent=2) + "\n")
    if progress is not None:
        progress.close(summary)
    return summary
