"""Data parallelism over problems: Ray workers, shard files, merge and resume.

Why this shape (DESIGN.md §3): one process per GPU (or per tensor-parallel group) holding one
engine set -- policy, PRM, judge -- each running its share of the problems through the *same*
runner code as a single-process run, with its own in-process cross-problem batching
(``run.concurrency``). Ray places and starts those processes, on one node or a cluster; there is
no home-made process manager. Each worker appends to its own shard file
``results.worker-<k>.jsonl`` (no two processes ever write one file), and the driver merges the
shards into ``results.jsonl`` -- sorted by problem order, deduplicated by (id, seed) -- and
writes ``summary.json``. A killed run resumes from whatever is in ``results.jsonl`` *and* in the
shard files, so finished problems are never run twice and never lost.

The merge/resume functions below are pure over the documented run-directory format
(docs/ARCHITECTURE.md) and do not import Ray; only :func:`run_distributed` does.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from equiv.errors import InputError

RESULTS = "results.jsonl"
SHARD_PREFIX = "results.worker-"
_SHARD_RE = re.compile(r"^results\.worker-(\d+)\.jsonl$")

RecordKey = tuple[str, int]
"""Records are keyed by (problem id, seed) -- one search per problem and seed."""


# --------------------------------------------------------------------------------------------
# Configuration: how many workers, where, and how each GPU's memory is split.
# --------------------------------------------------------------------------------------------


@dataclass
class ScaleConfig:
    """How an evaluation run is spread over processes, GPUs and nodes.

    ``workers=1`` without ``ray_address`` is the plain single-process run (nothing here is used).
    Otherwise Ray starts ``workers`` actors; each reserves ``gpus_per_worker`` GPUs (0 on a CPU
    machine), builds its own engines from the resolved config and runs its shard of problems.
    """

    workers: int = 1
    """Worker processes (engine sets). On a GPU node: GPUs / tensor_parallel_size."""
    ray_address: str | None = None
    """Ray cluster to join (``auto``, ``ray://host:10001`` or ``host:6379``); None starts a local
    Ray instance on this machine when ``workers`` > 1."""
    gpus_per_worker: float | None = None
    """GPUs reserved per worker; None = ``tensor_parallel_size`` if Ray sees GPUs, else 0."""
    cpus_per_worker: float = 1.0
    """CPUs reserved per worker (Ray scheduling only; the engines use what they need)."""
    tensor_parallel_size: int = 1
    """GPUs the policy is sharded over inside one worker (vLLM tensor parallelism)."""
    policy_gpu_memory_utilization: float = 0.6
    """Share of each GPU's memory the vLLM policy engine may take (weights + KV cache)."""
    prm_gpu_memory_fraction: float = 0.2
    """Share of the worker's first GPU reserved for the PRM (co-located with the policy)."""
    judge_gpu_memory_fraction: float = 0.1
    """Share of the worker's first GPU reserved for the pruning judge (co-located too)."""

    def validate(self) -> None:
        if self.workers < 1:
            raise InputError(f"must be >= 1, got {self.workers}", field="scale.workers")
        if self.tensor_parallel_size < 1:
            raise InputError(
                f"must be >= 1, got {self.tensor_parallel_size}", field="scale.tensor_parallel_size"
            )
        if self.cpus_per_worker < 0:
            raise InputError(f"must be >= 0, got {self.cpus_per_worker}", field="scale.cpus_per_worker")
        if self.gpus_per_worker is not None and self.gpus_per_worker < 0:
            raise InputError(f"must be >= 0, got {self.gpus_per_worker}", field="scale.gpus_per_worker")
        for name in ("policy_gpu_memory_utilization", "prm_gpu_memory_fraction", "judge_gpu_memory_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"must be in [0, 1], got {value}", field=f"scale.{name}")
        total = self.policy_gpu_memory_utilization + self.prm_gpu_memory_fraction + self.judge_gpu_memory_fraction
        if total > 0.95:
            raise InputError(
                f"policy + PRM + judge memory shares add up to {total:.2f} of a GPU; keep them "
                "<= 0.95 (CUDA context, activations and the allocator need the rest)",
                field="scale.policy_gpu_memory_utilization",
            )

    @property
    def distributed(self) -> bool:
        """True when the run goes through Ray workers rather than the single-process path."""
        return self.workers > 1 or self.ray_address is not None


@dataclass(frozen=True)
class Placement:
    """What one worker reserves from Ray and how it splits its first GPU."""

    num_cpus: float
    num_gpus: float
    tensor_parallel_size: int
    policy_gpu_memory_utilization: float
    prm_gpu_memory_fraction: float
    judge_gpu_memory_fraction: float


def plan_placement(scale: ScaleConfig, *, gpus_available: float) -> Placement:
    """Resolve the per-worker reservation; refuse plans that cannot be placed.

    ``gpus_available`` is what the Ray cluster reports (0 on CPU). With GPUs, each worker takes
    ``tensor_parallel_size`` whole GPUs (the policy needs them all; PRM and judge sit on the first
    one, in the memory the policy leaves). A plan asking for more GPUs than exist would hang in
    Ray's scheduler forever, so it is an input error instead.
    """
    scale.validate()
    if scale.gpus_per_worker is not None:
        num_gpus = scale.gpus_per_worker
    else:
        num_gpus = float(scale.tensor_parallel_size) if gpus_available > 0 else 0.0
    if num_gpus and num_gpus < scale.tensor_parallel_size:
        raise InputError(
            f"tensor_parallel_size {scale.tensor_parallel_size} needs that many GPUs per worker, "
            f"but gpus_per_worker is {num_gpus}",
            field="scale.gpus_per_worker",
        )
    if num_gpus * scale.workers > gpus_available + 1e-9 and num_gpus > 0:
        raise InputError(
            f"{scale.workers} workers x {num_gpus:g} GPUs need {scale.workers * num_gpus:g} GPUs, "
            f"but Ray sees {gpus_available:g}; use workers = GPUs / tensor_parallel_size",
            field="scale.workers",
        )
    return Placement(
        num_cpus=scale.cpus_per_worker,
        num_gpus=num_gpus,
        tensor_parallel_size=scale.tensor_parallel_size,
        policy_gpu_memory_utilization=scale.policy_gpu_memory_utilization,
        prm_gpu_memory_fraction=scale.prm_gpu_memory_fraction,
        judge_gpu_memory_fraction=scale.judge_gpu_memory_fraction,
    )


# --------------------------------------------------------------------------------------------
# Shards: assignment, reading, resume and merge (pure over the run directory).
# --------------------------------------------------------------------------------------------


def shard_path(out_dir: str | Path, worker: int) -> Path:
    """The file worker ``worker`` appends its records to."""
    return Path(out_dir) / f"{SHARD_PREFIX}{worker}.jsonl"


def shard_paths(out_dir: str | Path) -> list[Path]:
    """Existing shard files, ordered by worker index (so merges are deterministic)."""
    out = Path(out_dir)
    if not out.is_dir():
        return []
    found = []
    for path in out.iterdir():
        match = _SHARD_RE.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def assign_round_robin(items: Sequence[Any], workers: int) -> list[list[Any]]:
    """Deal items to workers in turn: item i goes to worker i % workers.

    Round-robin rather than contiguous blocks because benchmark files are often ordered by
    difficulty (MATH-500 levels); dealing keeps the shards' running times similar.
    """
    if workers < 1:
        raise InputError(f"must be >= 1, got {workers}", field="scale.workers")
    return [list(items[k::workers]) for k in range(workers)]


def record_key(record: dict[str, Any], *, path: Path | None = None, line: int | None = None) -> RecordKey:
    """(id, seed) of a results record; a record without them is an input error."""
    if "id" not in record:
        raise InputError("record has no 'id'", path=path, line=line, field="id")
    seed = record.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InputError(f"seed must be an integer, got {seed!r}", path=path, line=line, field="seed")
    return (str(record["id"]), seed)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All records of one results file, in file order.

    A process killed while writing leaves at most a truncated *last* line: that line is dropped
    (its problem simply was not finished and will be rerun). A malformed line anywhere else means
    the file was damaged or edited and is an input error -- never a silent skip.
    """
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        is_last = number == len(lines) or all(not rest.strip() for rest in lines[number:])
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            if is_last and not text.endswith("\n"):
                break  # torn write of a killed worker
            raise InputError(f"malformed JSON ({err.msg})", path=path, line=number) from None
        if not isinstance(record, dict):
            raise InputError("a record must be a JSON object", path=path, line=number)
        record_key(record, path=path, line=number)
        records.append(record)
    return records


def _prefer(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Which of two records for the same (id, seed) to keep.

    The later one (a retried problem is appended after its failed attempt), except that an error
    never replaces a successful result.
    """
    if new.get("error") and not old.get("error"):
        return old
    return new


def merge_records(
    sources: Iterable[Sequence[dict[str, Any]]],
    order: Sequence[RecordKey] | None = None,
) -> list[dict[str, Any]]:
    """Deduplicate records by (id, seed) and sort them by problem order.

    ``sources`` are record lists from oldest to newest (``results.jsonl`` first, then shards in
    worker order). ``order`` is the run's (id, seed) sequence (problem order, then seed); records
    whose key is not in it (a problem range changed between runs) are kept, after the ordered
    ones, in the order first seen -- results are never dropped by a merge.
    """
    chosen: dict[RecordKey, dict[str, Any]] = {}
    first_seen: list[RecordKey] = []
    for records in sources:
        for record in records:
            key = record_key(record)
            if key in chosen:
                chosen[key] = _prefer(chosen[key], record)
            else:
                chosen[key] = record
                first_seen.append(key)
    position = {key: i for i, key in enumerate(order or ())}
    seen_at = {key: i for i, key in enumerate(first_seen)}
    ranked = sorted(
        first_seen,
        key=lambda k: (0, position[k]) if k in position else (1, seen_at[k]),
    )
    return [chosen[key] for key in ranked]


def run_records(out_dir: str | Path) -> list[list[dict[str, Any]]]:
    """Record lists of ``results.jsonl`` and every shard file, oldest source first."""
    out = Path(out_dir)
    return [read_records(out / RESULTS)] + [read_records(p) for p in shard_paths(out)]


def finished_keys(out_dir: str | Path, *, retry_errors: bool) -> set[RecordKey]:
    """(id, seed) pairs a resumed run must skip: done in ``results.jsonl`` or any shard.

    With ``retry_errors`` a key whose best record still holds an error is not finished.
    """
    merged = merge_records(run_records(out_dir))
    return {
        record_key(r) for r in merged if not (retry_errors and r.get("error"))
    }


def write_jsonl_atomic(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Write a JSONL file via a temporary file and rename, so a crash leaves old or new, never half."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def merge_run_dir(out_dir: str | Path, order: Sequence[RecordKey] | None = None) -> list[dict[str, Any]]:
    """Merge ``results.jsonl`` and all shard files into ``results.jsonl``; remove the shards.

    The new ``results.jsonl`` is in place (atomically) before any shard is deleted, so a crash
    at any point loses nothing: a rerun merges again and gets the same file.
    """
    out = Path(out_dir)
    shards = shard_paths(out)
    merged = merge_records(run_records(out), order)
    write_jsonl_atomic(out / RESULTS, merged)
    for shard in shards:
        shard.unlink()
    return merged
