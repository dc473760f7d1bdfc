"""Search, run and scale-out settings (jsonargparse argument groups).

Defaults are the paper's (docs/design.md §1): width 10, depth 50, MCTS 20 simulations per step with
PUCT constant 1.25, SBS beam 3, DFS ``num_sequence`` 3. Settings the paper leaves open carry a
note saying what we chose and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from equiv.errors import InputError, check_choice, check_fraction

PRUNE_STAGES = ("after_prm", "before_prm")
MERGE_VALUES = ("own", "class_max")


@dataclass
class SearchConfig:
    """How the tree is grown (shared by all algorithms; each reads what it needs)."""

    width: int = 10
    """Candidates sampled per expansion (the paper's ``tree_max_width``)."""
    max_depth: int = 50
    """Maximum number of steps in a solution; a step at this depth is treated as terminal."""
    num_simulations: int = 20
    """MCTS: simulations before committing one step."""
    c_puct: float = 1.25
    """MCTS: PUCT exploration constant (the reference's ``pb_c_init``)."""
    c_puct_base: float | None = 19652.0
    """MCTS: the reference's ``pb_c_base``: the exploration weight is
    ``log((N + c_puct_base + 1) / c_puct_base) + c_puct`` with N the parent's visits, as the
    reference computes it (AlphaZero's schedule). None = a flat ``c_puct``."""
    beam_size: int = 3
    """SBS and lookahead: beams kept after each step (also the number of solutions collected)."""
    num_sequence: int = 3
    """DFS: complete solutions to collect before stopping."""
    dfs_max_expansions: int = 100
    """DFS: expansion budget per problem (not in the paper; bounds a search that never ends)."""
    dfs_min_value: float = 0.0
    """DFS: children whose PRM value is below this are not explored (0 = explore all)."""
    lookahead_steps: int = 2
    """Lookahead: greedy rollout steps used to value each candidate (k in Snell et al.)."""
    lookahead_temperature: float = 0.0
    """Lookahead: sampling temperature of the rollouts (0 = greedy, as in Snell et al.)."""
    prune_stage: str = "after_prm"
    """``after_prm`` (paper-faithful: every candidate is scored, then merged) or ``before_prm``
    (only class representatives are scored, saving PRM work)."""
    dedupe_exact: bool = True
    """Drop candidates whose text repeats an earlier sibling's before priors are normalised
    (pruned and unpruned runs alike: the reference keyed children by text)."""
    merge_value: str = "own"
    """Value of a kept node whose class absorbed siblings: ``own`` (the reference, what the
    paper measured: its visit-weighted merge is a no-op at merge time, so the kept node keeps
    its own PRM value) or ``class_max`` (the class's highest PRM value: the class is as good as
    its best-scored phrasing; an option to measure)."""
    expansion_attempts: int = 3
    """Policy calls for one expansion when a call returns candidates but none usable (all cut
    by the token limit) before the node becomes a dead end (the reference retries 3 times)."""

    def validate(self) -> None:
        for name in ("width", "max_depth", "num_simulations", "beam_size", "num_sequence", "dfs_max_expansions",
                     "expansion_attempts"):
            if getattr(self, name) < 1:
                raise InputError(f"must be >= 1, got {getattr(self, name)}", field=f"search.{name}")
        if self.lookahead_steps < 0:
            raise InputError(f"must be >= 0, got {self.lookahead_steps}", field="search.lookahead_steps")
        if self.c_puct < 0:
            raise InputError(f"must be >= 0, got {self.c_puct}", field="search.c_puct")
        if self.c_puct_base is not None and self.c_puct_base <= 0:
            raise InputError(f"must be > 0 or null, got {self.c_puct_base}", field="search.c_puct_base")
        check_choice(self.merge_value, MERGE_VALUES, "search.merge_value")
        check_choice(self.prune_stage, PRUNE_STAGES, "search.prune_stage")


@dataclass
class DataConfig:
    """Which problems to solve."""

    dataset: str = "gsm8k"
    """``math500``, ``gsm8k``, ``aime24``, ``jsonl`` (any JSONL with a problem and an answer),
    ``humaneval`` (code, graded by running its tests in a sandbox) or ``commonsense_qa``
    (multiple choice)."""
    path: str | None = None
    """Local JSONL file, or ``demo:gsm8k`` (5 GSM8K test problems shipped with equiv); without it
    the benchmark is loaded from the Hugging Face Hub."""
    split: str | None = None
    """Hub split (dataset default when omitted)."""
    question_field: str | None = None
    """Field holding the problem text (``jsonl`` datasets)."""
    answer_field: str | None = None
    """Field holding the reference answer (``jsonl`` datasets)."""
    start: int = 0
    """First problem index (inclusive)."""
    end: int | None = None
    """Last problem index (exclusive); None = to the end."""
    kind: str | None = None
    """Grader override: ``gsm8k`` (numeric) or ``math`` (math-verify); default per dataset."""
    hub_id: str | None = None
    """Hugging Face dataset id replacing the dataset's default (e.g. ``commonsense_qa``:
    ``tau/commonsense_qa``); used when no ``path`` is given."""
    sample: int | None = None
    """Keep a seeded random subset of this many problems (file order kept), before start/end;
    the paper's "random 100" (CommonsenseQA, GSM8K with the 14B policy)."""
    sample_seed: int = 0
    """Seed of ``sample``: the same seed picks the same problems in every run."""


@dataclass
class RunConfig:
    """Seeds, batching and bookkeeping of an evaluation run."""

    seeds: list[int] = field(default_factory=lambda: [0])
    """One search per problem and seed; records are keyed by (id, seed)."""
    concurrency: int = 8
    """Problems in flight at once; their engine calls are merged into one batch per engine.
    Results do not depend on it (per-request seeds)."""
    save_trees: bool = False
    """Write trees/<id>.json with every node (for the report's tree viewer)."""
    retry_errors: bool = True
    """On resume, rerun problems whose record holds an error (the old record is replaced)."""
    progress: bool = True
    """Show a progress bar with running accuracy and tokens."""
    wandb_project: str | None = None
    """Log running metrics to this W&B project (set WANDB_MODE=offline to stay local)."""
    wandb_run_name: str | None = None
    """W&B run name (default: the output directory's name)."""

    def validate(self) -> None:
        if self.concurrency < 1:
            raise InputError(f"must be >= 1, got {self.concurrency}", field="run.concurrency")
        if not self.seeds:
            raise InputError("needs at least one seed", field="run.seeds")
        if len(set(self.seeds)) != len(self.seeds):
            raise InputError(f"duplicate seeds in {self.seeds}", field="run.seeds")


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
            check_fraction(getattr(self, name), f"scale.{name}")
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
