"""Watching a run and finishing it: progress bar, W&B, and ``summary.json``.

The single-process runner and the multi-worker driver end a run the same way -- the summary
from the records on disk, whether every (problem, seed) has a record (``complete``: false after
an interrupt), the caller's engine counters, one durable write, one W&B summary -- so both go
through :func:`finish_run`, also when the run is interrupted.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Hashable, Mapping, Sequence

from equiv.rundir import RESULTS, SUMMARY, RecordKey, merge_records, read_records, record_key, summarise, write_atomic
from equiv.search.config import RunConfig


class Progress:
    """tqdm bar with running accuracy and tokens, and optional W&B logging.

    The bar counts finished problems, and between them it shows the work of the problems in
    flight (:meth:`working`: expansions and generated tokens, on the same bar). Why: with a real
    policy on a CPU one problem takes minutes, and a bar that moves only when a problem finishes
    sat at 0 % for 9 minutes, indistinguishable from a hang. The in-flight figures are redrawn at
    most every ``mininterval`` seconds (tqdm's, 0.1 s; ``TQDM_MININTERVAL`` sets it)."""

    def __init__(
        self, total: int, done: Sequence[Mapping[str, Any]], run: RunConfig, out_dir: Path, config: dict | None
    ) -> None:
        self.correct = sum(bool(r.get("correct")) for r in done)
        self.tokens = sum(int(r.get("generated_tokens") or 0) for r in done)
        self.count = len(done)
        self.live: dict[Hashable, tuple[int, int]] = {}  # problem in flight -> (expansions, tokens)
        self.live_shown = float("-inf")
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

    def working(self, key: Hashable, expanded: int, tokens: int) -> None:
        """A problem in flight (``key``: its (id, seed)) has expanded ``expanded`` nodes and
        generated ``tokens`` tokens so far: shown on the bar, at most every ``mininterval``."""
        self.live[key] = (int(expanded), int(tokens))
        if self.bar is None:
            return
        now = time.monotonic()
        if now - self.live_shown >= self.bar.mininterval:
            self.live_shown = now
            self.bar.set_postfix_str(self.postfix(), refresh=True)

    def postfix(self) -> str:
        """``acc=0.500, tokens=1234`` (per finished problem) and, while problems run, ``running:
        N expansions, M tokens`` (summed over the problems in flight)."""
        parts = []
        if self.count:
            parts.append(f"acc={self.correct / self.count:.3f}, tokens={self.tokens / self.count:.0f}")
        if self.live:
            expanded = sum(e for e, _ in self.live.values())
            tokens = sum(t for _, t in self.live.values())
            running = f"{len(self.live)} problems " if len(self.live) > 1 else ""
            parts.append(f"running {running}{expanded} expansions, {tokens} tokens")
        return "; ".join(parts)

    def update(self, record: Mapping[str, Any], key: Hashable | None = None) -> None:
        """A problem finished (``key``: the one :meth:`working` reported, no longer in flight)."""
        self.live.pop(key, None)
        self.count += 1
        self.correct += bool(record["correct"])
        self.tokens += int(record["generated_tokens"])
        acc, tok = self.correct / self.count, self.tokens / self.count
        if self.bar is not None:
            self.bar.set_postfix_str(self.postfix(), refresh=False)
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
