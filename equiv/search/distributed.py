"""Data parallelism over problems: Ray workers, shard files, merge and resume.

Why this shape (docs/design.md §3): one process per GPU (or per tensor-parallel group) holding one
engine set -- policy, PRM, judge -- each running its share of the problems through the *same*
runner code as a single-process run, with its own in-process cross-problem batching
(``run.concurrency``). Ray places and starts those processes, on one node or a cluster; there is
no home-made process manager. Each worker writes its own shard, ``workers/<k>/`` -- an ordinary
run directory (``results.jsonl``, ``summary.json``, ``trees/``) written by the unchanged
:func:`equiv.search.runner.run_eval`, so no two processes ever write one file -- and the driver
merges the shards into ``results.jsonl`` -- sorted by problem order, deduplicated by (id, seed) --
moves their trees into ``trees/`` (a record's ``tree`` path is relative, so it stays valid) and
writes ``summary.json``. A killed run resumes from whatever is in ``results.jsonl`` *and* in the
shard files, so finished problems are never run twice and never lost.

The merge/resume functions below are pure over the documented run-directory format
(docs/ARCHITECTURE.md) and do not import Ray; only :func:`run_distributed` does.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from equiv.errors import InputError

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
TREES = "trees"
WORKERS = "workers"

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
    """Worker processes (engine sets). On a GPU node: GPUs / ``policy.tensor_parallel_size``."""
    ray_address: str | None = None
    """Ray cluster to join (``auto``, ``ray://host:10001`` or ``host:6379``); None starts a local
    Ray instance on this machine when ``workers`` > 1."""
    gpus_per_worker: float | None = None
    """GPUs reserved per worker; None = ``policy.tensor_parallel_size`` if Ray sees GPUs, else 0."""
    cpus_per_worker: float = 1.0
    """CPUs reserved per worker (Ray scheduling only; the engines use what they need)."""
    policy_gpu_memory_utilization: float = 0.6
    """Share of each of a GPU worker's GPUs the vLLM policy may take (weights + KV cache); in
    multi-worker GPU runs it replaces ``policy.gpu_memory_utilization``."""
    prm_gpu_memory_fraction: float = 0.2
    """Share of the worker's first GPU for the PRM (co-located with the policy; enough for a
    7B PRM in bf16 on an 80 GB GPU)."""
    judge_gpu_memory_fraction: float = 0.1
    """Share of the worker's first GPU for the pruning judge (a small encoder needs far less)."""

    def validate(self) -> None:
        if self.workers < 1:
            raise InputError(f"must be >= 1, got {self.workers}", field="scale.workers")
        if self.cpus_per_worker < 0:
            raise InputError(f"must be >= 0, got {self.cpus_per_worker}", field="scale.cpus_per_worker")
        if self.gpus_per_worker is not None and self.gpus_per_worker < 0:
            raise InputError(f"must be >= 0, got {self.gpus_per_worker}", field="scale.gpus_per_worker")
        for name in ("policy_gpu_memory_utilization", "prm_gpu_memory_fraction", "judge_gpu_memory_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"must be in [0, 1], got {value}", field=f"scale.{name}")
        total = self.policy_gpu_memory_utilization + self.prm_gpu_memory_fraction + self.judge_gpu_memory_fraction
        if total > 0.95 + 1e-9:
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


def plan_placement(scale: ScaleConfig, *, gpus_available: float, tensor_parallel_size: int = 1) -> Placement:
    """Resolve the per-worker reservation; refuse plans that cannot be placed.

    ``gpus_available`` is what the Ray cluster reports (0 on CPU); ``tensor_parallel_size`` is
    the policy's. With GPUs, each worker takes ``tensor_parallel_size`` whole GPUs (the policy
    needs them all; PRM and judge sit on the first one, in the memory the policy leaves). A plan
    asking for more GPUs than exist would hang in Ray's scheduler forever, so it is an input
    error instead.
    """
    scale.validate()
    if tensor_parallel_size < 1:
        raise InputError(f"must be >= 1, got {tensor_parallel_size}", field="policy.tensor_parallel_size")
    if scale.gpus_per_worker is not None:
        num_gpus = scale.gpus_per_worker
    else:
        num_gpus = float(tensor_parallel_size) if gpus_available > 0 else 0.0
    if num_gpus and num_gpus < tensor_parallel_size:
        raise InputError(
            f"policy.tensor_parallel_size {tensor_parallel_size} needs that many GPUs per worker, "
            f"but gpus_per_worker is {num_gpus:g}",
            field="scale.gpus_per_worker",
        )
    if num_gpus * scale.workers > gpus_available + 1e-9 and num_gpus > 0:
        raise InputError(
            f"{scale.workers} workers x {num_gpus:g} GPUs need {scale.workers * num_gpus:g} GPUs, "
            f"but Ray sees {gpus_available:g}; use workers = GPUs / policy.tensor_parallel_size",
            field="scale.workers",
        )
    return Placement(
        num_cpus=scale.cpus_per_worker,
        num_gpus=num_gpus,
        tensor_parallel_size=tensor_parallel_size,
        policy_gpu_memory_utilization=scale.policy_gpu_memory_utilization,
        prm_gpu_memory_fraction=scale.prm_gpu_memory_fraction,
        judge_gpu_memory_fraction=scale.judge_gpu_memory_fraction,
    )


# --------------------------------------------------------------------------------------------
# Shards: assignment, reading, resume and merge (pure over the run directory).
# --------------------------------------------------------------------------------------------


def shard_dir(out_dir: str | Path, worker: int) -> Path:
    """The run directory worker ``worker`` writes (its own results.jsonl, summary.json, trees/)."""
    return Path(out_dir) / WORKERS / str(worker)


def shard_path(out_dir: str | Path, worker: int) -> Path:
    """The results file worker ``worker`` appends its records to."""
    return shard_dir(out_dir, worker) / RESULTS


def shard_paths(out_dir: str | Path) -> list[Path]:
    """Existing shard results files, ordered by worker index (so merges are deterministic)."""
    root = Path(out_dir) / WORKERS
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        if path.is_dir() and path.name.isdigit() and (path / RESULTS).exists():
            found.append((int(path.name), path / RESULTS))
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
    """Merge ``results.jsonl`` and all shards into ``results.jsonl``; move trees; remove shards.

    Trees move first, then the new ``results.jsonl`` is put in place atomically, and only then
    are the shard directories deleted -- so a crash at any point loses nothing: a rerun merges
    again and gets the same file.
    """
    out = Path(out_dir)
    shards = shard_paths(out)
    merged = merge_records(run_records(out), order)
    for shard in shards:
        trees = shard.parent / TREES
        if trees.is_dir():
            (out / TREES).mkdir(exist_ok=True)
            for tree in sorted(trees.iterdir()):
                os.replace(tree, out / TREES / tree.name)
    write_jsonl_atomic(out / RESULTS, merged)
    if (out / WORKERS).is_dir():
        shutil.rmtree(out / WORKERS)
    return merged


# --------------------------------------------------------------------------------------------
# Workers (Ray actors) and the driver.
# --------------------------------------------------------------------------------------------

EngineFactory = Callable[[Placement], Any]
"""Builds one worker's :class:`equiv.search.runner.Engines` from its placement. Must be
picklable (a module-level function or a ``functools.partial`` of one): Ray ships it to the
worker, which calls it there, so every worker loads its own policy, PRM and judge."""


class ShardWorker:
    """One engine set and its share of the problems (wrapped as a Ray actor by the driver).

    The engines are built in the constructor, so all workers load their models in parallel, and
    the shard goes through the same :func:`~equiv.search.runner.run_eval` as a one-process run
    (same batching, seeding, grading and record format).
    """

    def __init__(self, worker: int, factory: EngineFactory, placement: Placement) -> None:
        apply_memory_split(placement)
        self.worker = worker
        self.engines = factory(placement)

    def run(
        self,
        *,
        algo: str,
        problems: Sequence[Any],
        finished: Sequence[dict[str, Any]],
        out_dir: str,
        search: Any,
        run: Any,
        pruner: str,
        grader: Any = None,
    ) -> dict[str, Any]:
        """Run ``problems`` (every seed) into ``workers/<k>/``; returns that shard's summary.

        ``finished`` holds the records of (problem, seed) pairs an earlier run already finished.
        They are written into the shard first, so the runner's own resume skips exactly them
        while this stays one ``run_eval`` call over all seeds -- the same batching and the same
        ``trees/`` file names as a one-process run.
        """
        from equiv.search.runner import run_eval

        shard = shard_dir(out_dir, self.worker)
        shard.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(shard / RESULTS, finished)
        # Progress bars and W&B belong to the driver; a worker logs nothing of its own.
        shard_run = replace(run, progress=False, wandb_project=None)
        return run_eval(
            algo=algo,
            problems=problems,
            engines=self.engines,
            out_dir=shard,
            search=search,
            run=shard_run,
            pruner=pruner,
            grader=grader,
        )


def apply_memory_split(placement: Placement) -> None:
    """Cap the torch allocator of a GPU worker at the PRM + judge share of its first GPU.

    vLLM takes its share through ``gpu_memory_utilization`` (the engine factory passes
    ``placement.policy_gpu_memory_utilization`` to the policy; vLLM's engine core runs in its own
    process). The PRM and the judge are torch models in this process: capping the process at
    their combined share makes an oversized PRM fail with an out-of-memory error in that
    worker instead of starving the policy's KV cache. No-op without CUDA.
    """
    if placement.num_gpus <= 0:
        return
    # vLLM's engine core must live in its own process (the default), or this cap would bind it.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    if os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0":
        return
    import torch

    if torch.cuda.is_available():
        share = placement.prm_gpu_memory_fraction + placement.judge_gpu_memory_fraction
        if share > 0:
            torch.cuda.set_per_process_memory_fraction(min(1.0, share), device=0)


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def ray_runtime_env() -> dict[str, Any]:
    """Ray ``runtime_env`` that lets workers import ``equiv`` (and ``tests``) from this checkout."""
    paths = [_package_root()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}


def _start_ray(scale: ScaleConfig) -> bool:
    """Connect to (or start) Ray; True when this call started it (so the driver shuts it down).

    Workers import ``equiv`` from this checkout (``PYTHONPATH``), which covers a local instance
    and clusters on a shared file system; other clusters need the package installed on every
    node (the same image), as Ray's docs recommend.
    """
    try:
        import ray
    except ImportError:
        raise InputError(
            "multi-worker runs need Ray: pip install 'equiv[ray]' (or 'ray[default]')",
            field="scale.workers",
        ) from None
    if ray.is_initialized():
        return False
    runtime_env = ray_runtime_env()
    if scale.ray_address:
        ray.init(address=scale.ray_address, runtime_env=runtime_env, log_to_driver=True)
    else:
        ray.init(runtime_env=runtime_env, include_dashboard=False)
    return True


def run_distributed(
    *,
    algo: str,
    problems: Sequence[Any],
    engine_factory: EngineFactory,
    out_dir: str | Path,
    scale: ScaleConfig,
    search: Any = None,
    run: Any = None,
    pruner: str = "none",
    grader: Any = None,
    tensor_parallel_size: int = 1,
) -> dict[str, Any]:
    """Run (or resume) an evaluation over Ray workers into ``out_dir``; returns the summary.

    The run directory ends up exactly like a single-process one (``results.jsonl`` sorted by
    problem order, ``summary.json``, ``trees/``), so ``compare`` and ``report`` need not know.
    """
    from equiv.search.runner import check_eval_inputs, prepare_resume, summarise

    scale.validate()
    search, run, out = check_eval_inputs(algo, problems, out_dir, search, run)
    order = [(str(p.id), int(s)) for p in problems for s in run.seeds]

    # Resume: fold shards of a killed run into results.jsonl, then let the runner's own resume
    # logic (algo/pruner check, error retry, compaction) decide what is finished.
    merge_run_dir(out, order)
    done, done_records = prepare_resume(out, algo=algo, pruner=pruner, retry_errors=run.retry_errors)
    todo = [p for p in problems if any((str(p.id), int(s)) not in done for s in run.seeds)]
    finished_by_id: dict[str, list[dict[str, Any]]] = {}
    for record in done_records:
        finished_by_id.setdefault(str(record["id"]), []).append(record)

    worker_summaries: list[dict[str, Any]] = []
    if todo:
        started = _start_ray(scale)
        import ray

        try:
            placement = plan_placement(
                scale,
                gpus_available=float(ray.cluster_resources().get("GPU", 0)),
                tensor_parallel_size=tensor_parallel_size,
            )
            # Whole problems (all their seeds) per worker, dealt round-robin.
            shards = [s for s in assign_round_robin(todo, scale.workers) if s]
            actor_cls = ray.remote(ShardWorker)
            actors = [
                actor_cls.options(num_cpus=placement.num_cpus, num_gpus=placement.num_gpus).remote(
                    k, engine_factory, placement
                )
                for k in range(len(shards))
            ]
            pending = [
                actor.run.remote(
                    algo=algo,
                    problems=shard,
                    finished=[r for p in shard for r in finished_by_id.get(str(p.id), [])],
                    out_dir=str(out),
                    search=search,
                    run=run,
                    pruner=pruner,
                    grader=grader,
                )
                for actor, shard in zip(actors, shards)
            ]
            try:
                worker_summaries.extend(ray.get(pending))
            finally:
                for actor in actors:
                    ray.kill(actor)
        finally:
            # Whatever the workers finished is merged even when one of them failed.
            merge_run_dir(out, order)
            if started:
                ray.shutdown()

    records = read_records(out / RESULTS)
    summary = summarise(records, algo=algo, pruner=pruner)
    recorded = {record_key(r) for r in records}
    summary["complete"] = all(k in recorded for k in order)
    summary["workers"] = scale.workers
    summary["engine_calls"] = _sum_counts(s.get("engine_calls") for s in worker_summaries)
    summary["largest_batch"] = _max_counts(s.get("largest_batch") for s in worker_summaries)
    tmp = out / (SUMMARY + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out / SUMMARY)
    if run.wandb_project:  # workers log nothing; the driver logs the merged summary once
        import wandb

        wb = wandb.init(project=run.wandb_project, name=run.wandb_run_name or out.name, dir=str(out), resume="allow")
        wb.summary.update({f"summary/{k}": v for k, v in summary.items() if isinstance(v, (int, float))})
        wb.finish()
    return summary


def placed_engines(build: Callable[[Any], Any], init: Any, placement: Placement) -> Any:
    """Engine factory for ``search_cli.py eval``: the resolved config, adjusted to the placement.

    On a GPU worker the policy gets the planned memory share and tensor parallelism; on CPU the
    config is used as given. ``build`` is :func:`equiv.search.cli.build_engines` (or a test's
    scripted factory).
    """
    init = copy.deepcopy(init)
    if placement.num_gpus > 0:
        init.policy.gpu_memory_utilization = placement.policy_gpu_memory_utilization
        init.policy.tensor_parallel_size = placement.tensor_parallel_size
        if placement.tensor_parallel_size > 1:
            # The actor already holds its GPUs; vLLM's Ray executor would ask Ray for more and
            # wait forever. Its multiprocessing executor uses the GPUs this actor was given.
            kwargs = dict(init.policy.engine_kwargs or {})
            kwargs.setdefault("distributed_executor_backend", "mp")
            init.policy.engine_kwargs = kwargs
    return build(init)


def eval_distributed(algo: str, init: Any, problems: Sequence[Any], out: Path, build: Callable[[Any], Any]) -> dict[str, Any]:
    """``search_cli.py eval`` with ``--scale.workers N`` / ``--scale.ray_address``."""
    from equiv.search.cli import resolve_tiny

    # Build tiny CPU models once here rather than racing in every worker.
    init.policy.model = resolve_tiny(init.policy.model, "policy")
    init.reward.model = resolve_tiny(init.reward.model, "prm")
    return run_distributed(
        algo=algo,
        problems=problems,
        engine_factory=functools.partial(placed_engines, build, init),
        out_dir=out,
        scale=init.scale,
        search=init.search,
        run=init.run,
        pruner=init.pruner.strategy,
        tensor_parallel_size=int(getattr(init.policy, "tensor_parallel_size", 1) or 1),
    )


def _sum_counts(dicts: Iterable[dict[str, int] | None]) -> dict[str, int]:
    total: dict[str, int] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            total[k] = total.get(k, 0) + int(v)
    return total


def _max_counts(dicts: Iterable[dict[str, int] | None]) -> dict[str, int]:
    best: dict[str, int] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            best[k] = max(best.get(k, 0), int(v))
    return best
