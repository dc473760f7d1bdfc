"""Where a multi-worker run's engines go: per-worker reservation, GPU memory split, problem shards.

Pure planning (no Ray import): the Ray driver (:mod:`equiv.search.distributed`) asks
:func:`plan_placement` what each worker reserves, deals problems with
:func:`assign_round_robin`, and each worker applies :func:`apply_memory_split` and builds its
engines through :func:`placed_engines`.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from equiv.errors import InputError
from equiv.search.config import ScaleConfig
from equiv.search.policies import BACKENDS


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
    error instead. ``scale`` is validated already (:func:`equiv.search.runner.check_settings`).
    """
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


def assign_round_robin(items: Sequence[Any], workers: int) -> list[list[Any]]:
    """Deal items to workers in turn: item i goes to worker i % workers.

    Round-robin rather than contiguous blocks because benchmark files are often ordered by
    difficulty (MATH-500 levels); dealing keeps the shards' running times similar.
    """
    if workers < 1:
        raise InputError(f"must be >= 1, got {workers}", field="scale.workers")
    return [list(items[k::workers]) for k in range(workers)]


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


def placed_engines(build: Callable[[Any], Any], init: Any, placement: Placement) -> Any:
    """Engine factory for ``search_cli.py eval``: the resolved config, adjusted to the placement.

    On a GPU worker an engine that takes its own GPU share (:attr:`Backend.gpu_share
    <equiv.search.policies.Backend.gpu_share>`: vLLM) gets the planned memory share and tensor
    parallelism; otherwise (CPU, or a policy in the worker's torch) the config is used as given. ``build`` is :func:`equiv.search.cli.build_engines` (or a test's
    scripted factory).
    """
    init = copy.deepcopy(init)
    if placement.num_gpus > 0 and BACKENDS.get(init.policy.backend).gpu_share:
        init.policy.gpu_memory_utilization = placement.policy_gpu_memory_utilization
        init.policy.tensor_parallel_size = placement.tensor_parallel_size
        if placement.tensor_parallel_size > 1:
            # The actor already holds its GPUs; vLLM's Ray executor would ask Ray for more and
            # wait forever. Its multiprocessing executor uses the GPUs this actor was given.
            kwargs = dict(init.policy.engine_kwargs or {})
            kwargs.setdefault("distributed_executor_backend", "mp")
            init.policy.engine_kwargs = kwargs
    return build(init)
