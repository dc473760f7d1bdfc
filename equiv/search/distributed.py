"""Data parallelism over problems: the Ray driver and its workers.

Why this shape (docs/design.md §3): one process per GPU (or per tensor-parallel group) holding one engine set --
policy, PRM, judge -- each running its share of the problems through the *same* runner code as
a single-process run, with its own in-process cross-problem batching (``run.concurrency``). Ray
places and starts those processes, on one node or a cluster; there is no home-made process
manager. Each worker writes its own shard, ``workers/<k>/`` -- an ordinary run directory written
by the unchanged :func:`equiv.search.runner.run_eval`, so no two processes ever write one file --
and the driver merges the shards (:func:`equiv.rundir.merge_run_dir`) and finishes the run like
a single-process one (:func:`equiv.search.progress.finish_run`). A killed or interrupted run
resumes from whatever is in ``results.jsonl`` *and* in the shard files, so finished problems are
never run twice and never lost.

Placement and the memory split are planned in :mod:`equiv.search.placement`; the file format
belongs to :mod:`equiv.rundir`. Only :func:`run_distributed` imports Ray.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from equiv.errors import InputError
from equiv.rundir import RESULTS, merge_run_dir, prepare_resume, record_key, shard_dir, write_jsonl_atomic
from equiv.rundir.lock import hold_run_dir
from equiv.search.config import ScaleConfig
from equiv.search.placement import Placement, apply_memory_split, assign_round_robin, plan_placement
from equiv.search.progress import Progress, finish_run
from equiv.search.runner import check_eval_inputs, run_eval

# How long the driver waits for killed workers to be gone before it merges their shards.
_KILL_WAIT_S = 60.0

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


# Model and file settings a Ray worker opens itself (problems are loaded on the driver and shipped).
WORKER_PATHS = (("policy", "model"), ("policy", "fewshot_path"), ("reward", "model"), ("pruner", "model"))


def resolve_paths_on_driver(init: Any) -> None:
    """Make the relative local paths a worker opens absolute, as the driver sees them.

    A worker on another node starts in its own working directory, where ``runs/judge`` names
    nothing (or something else). Only values that exist here are rewritten: a hub id such as
    ``Qwen/Qwen2.5-Math-7B`` is left as it is. The absolute path must still be reachable from
    every node (a shared file system), as docs/scaling.md says.
    """
    for group, name in WORKER_PATHS:
        section = getattr(init, group, None)
        value = getattr(section, name, None) if section is not None else None
        if isinstance(value, str) and value and not Path(value).is_absolute() and Path(value).exists():
            setattr(section, name, str(Path(value).resolve()))


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
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run (or resume) an evaluation over Ray workers into ``out_dir``; returns the summary.

    The run directory ends up exactly like a single-process one (``results.jsonl`` sorted by
    problem order, ``summary.json``, ``trees/``, ``judge_pairs.jsonl``), so ``compare`` and
    ``report`` need not know. An interrupt (Ctrl-C) merges what the workers finished, writes the
    summary (``complete``: false) and propagates, as in a single-process run.
    """
    search, run, out = check_eval_inputs(algo, problems, out_dir, search, run, scale)
    with hold_run_dir(out):  # the driver is the directory's one writer; workers own their shards
        return _run_distributed_held(
            algo=algo, problems=problems, engine_factory=engine_factory, out=out, scale=scale, search=search,
            run=run, pruner=pruner, grader=grader, tensor_parallel_size=tensor_parallel_size, config=config,
        )


def _run_distributed_held(
    *,
    algo: str,
    problems: Sequence[Any],
    engine_factory: EngineFactory,
    out: Path,
    scale: ScaleConfig,
    search: Any,
    run: Any,
    pruner: str,
    grader: Any,
    tensor_parallel_size: int,
    config: dict[str, Any] | None,
) -> dict[str, Any]:
    """:func:`run_distributed` with the run directory's lock held."""
    order = [(str(p.id), int(s)) for p in problems for s in run.seeds]

    # Resume: fold shards of a killed run into results.jsonl, then let the run directory's
    # resume rules (algo/pruner check, error retry, compaction) decide what is finished.
    merge_run_dir(out, order)
    done, done_records = prepare_resume(out, algo=algo, pruner=pruner, retry_errors=run.retry_errors)
    todo = [p for p in problems if any((str(p.id), int(s)) not in done for s in run.seeds)]
    finished_by_id: dict[str, list[dict[str, Any]]] = {}
    for record in done_records:
        finished_by_id.setdefault(str(record["id"]), []).append(record)

    # W&B belongs to the driver (workers log nothing); there is no per-problem bar here.
    wanted = set(order)
    finished_here = [r for r in done_records if record_key(r) in wanted]
    progress = Progress(len(order), finished_here, replace(run, progress=False), out, config)
    worker_summaries: list[dict[str, Any]] = []
    try:
        if todo:
            worker_summaries = _run_workers(
                algo=algo, todo=todo, finished_by_id=finished_by_id, engine_factory=engine_factory, out=out,
                scale=scale, search=search, run=run, pruner=pruner, grader=grader,
                tensor_parallel_size=tensor_parallel_size, order=order,
            )
    finally:
        extra = {
            "workers": scale.workers,
            "engine_calls": _sum_counts(s.get("engine_calls") for s in worker_summaries),
            "largest_batch": _max_counts(s.get("largest_batch") for s in worker_summaries),
        }
        summary = finish_run(out, order=order, algo=algo, pruner=pruner, extra=extra, progress=progress)
    return summary


def _run_workers(
    *,
    algo: str,
    todo: Sequence[Any],
    finished_by_id: dict[str, list[dict[str, Any]]],
    engine_factory: EngineFactory,
    out: Path,
    scale: ScaleConfig,
    search: Any,
    run: Any,
    pruner: str,
    grader: Any,
    tensor_parallel_size: int,
    order: Sequence[tuple[str, int]],
) -> list[dict[str, Any]]:
    """Start Ray, run the shards, merge them (also when a worker fails or on Ctrl-C)."""
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
            return list(ray.get(pending))
        finally:
            for actor in actors:
                ray.kill(actor)
            # ray.kill only asks. A worker that is still alive (one slow to start, or mid-problem)
            # could write into its shard after the merge below has read and removed it. A task of a
            # killed actor resolves, as an error, once its process is gone: wait for that.
            ray.wait(pending, num_returns=len(pending), timeout=_KILL_WAIT_S)
    finally:
        # Whatever the workers finished is merged even when one of them failed.
        merge_run_dir(out, order)
        if started:
            ray.shutdown()


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
