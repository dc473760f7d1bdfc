"""Process reward models: a registry of kinds, each owning its step format.

``build_reward_model(RewardConfig(kind="math_shepherd", model=...))`` returns an object
implementing :class:`equiv.search.types.RewardModel` (one score per step). A PRM decides how
steps are joined and tagged -- Math-Shepherd puts ``ки`` after each step and reads P(``+``) at
the tags; Qwen2.5-Math-PRM separates steps with ``<extra_0>`` inside its chat template and reads
a two-class head -- so the search never formats PRM input itself.

Registered: ``math_shepherd`` (:mod:`.math_shepherd`), ``qwen25_math_prm`` (:mod:`.qwen_prm`;
the real checkpoint needs ``trust_remote_code: true``) and ``likelihood`` (:mod:`.likelihood`: no
PRM, the policy's own mean token log-probability -- a weak, cheap signal; it is bound to the
policy by :func:`bind_policy_reward`, so ``reward.model`` is ignored). Every kind is a :class:`RewardKind` entry of :data:`REWARDS` (the pattern every extension point
shares, :mod:`equiv.registry`). Adding a PRM::

    REWARDS.add(RewardKind("my_prm", MyPRM.from_config, "what it reads"))  # its own module and step format

and select it with ``--reward.kind my_prm``. Kind-specific settings go in
``RewardConfig.options``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from equiv.devices import check_dtype_name
from equiv.errors import InputError
from equiv.registry import Registry
from equiv.search.types import RewardModel


@dataclass
class RewardConfig:
    """Which process reward model scores the steps, and how it runs."""

    kind: str = "math_shepherd"
    """Registered PRM kind (``math_shepherd``, ``qwen25_math_prm``, ``likelihood`` -- the policy's own
    mean token log-probability, no weights; see :func:`registered_reward_models`)."""
    model: str = "peiyi9979/math-shepherd-mistral-7b-prm"
    """Hub id or local directory of the PRM checkpoint (the paper's PRM by default)."""
    dtype: str = "auto"
    """``auto`` (float32 on CPU, bfloat16 on GPU) or a name in :data:`equiv.devices.DTYPE_NAMES`
    (``bfloat16``, ``float16``, ``float32``, or ``bf16``, ``fp16``, ``fp32``)."""
    batch_size: int = 8
    """Sequences per forward pass (inputs are sorted by length first, so padding is small)."""
    device: str = "auto"
    """``auto`` (cuda if available), ``cpu``, ``cuda``, ``cuda:1``... -- put the PRM on another GPU
    than the policy, or share one and lower ``policy.gpu_memory_utilization``."""
    trust_remote_code: bool = False
    """Allow model code from the checkpoint."""
    attn_implementation: str | None = None
    """Attention kernel for ``from_pretrained`` (``eager``, ``sdpa``, ...); None = transformers'
    default. See :attr:`equiv.search.policies.PolicyConfig.attn_implementation`."""
    options: dict[str, Any] = field(default_factory=dict)
    """Kind-specific settings (Math-Shepherd: ``step_tag``, ``good_token``, ``bad_token``,
    ``share_prefix`` -- run siblings' shared prefix once, default true; ``head_cache_size`` --
    LRU of questions' key/values, default 64; ``cache_children`` -- keep every scored child's too;
    ``candidate_head`` -- compute only the ``+``/``-`` rows of the LM head, default true;
    Qwen2.5-Math-PRM: ``model_class``, ``step_sep``, ``system``; likelihood: ``scope`` -- ``path``
    (default) or ``step``, ``transform`` -- ``prob`` (default, exp of the mean) or ``logprob``)."""

    def validate(self) -> None:
        if not self.model and not REWARDS.get(self.kind).policy_bound:
            raise InputError("a reward model (hub id or directory) is required", field="reward.model")
        if self.batch_size < 1:
            raise InputError(f"must be >= 1, got {self.batch_size}", field="reward.batch_size")
        check_dtype_name(self.dtype, field="reward.dtype")


@dataclass(frozen=True)
class RewardKind:
    """One reward model kind as the runner and the CLI see it."""

    name: str
    """What ``--reward.kind`` selects it by."""
    build: Callable[[RewardConfig], RewardModel] | None
    """Loads the PRM ``reward.model`` names; None for a policy-bound kind."""
    summary: str = ""
    """One line for the docs' table."""
    bind: Callable[[Any, RewardConfig], tuple[Any, RewardModel]] | None = None
    """Policy-bound kinds (no weights of their own): wrap the policy so the reward can read what
    it generated; returns the (policy, reward) pair a run drives. ``reward.model`` is ignored."""

    @property
    def policy_bound(self) -> bool:
        return self.bind is not None


REWARDS: Registry[RewardKind] = Registry("reward model kind", field="reward.kind")

Builder = Callable[[RewardConfig], RewardModel]


def register_reward_model(kind: str) -> Callable[[Builder], Builder]:
    """Decorator: make ``kind`` buildable by :func:`build_reward_model` (a PRM with weights)."""

    def deco(fn: Builder) -> Builder:
        REWARDS.add(RewardKind(kind, fn))
        return fn

    return deco


def registered_reward_models() -> list[str]:
    return sorted(REWARDS.names())


def build_reward_model(cfg: RewardConfig) -> RewardModel:
    """Load the PRM named by ``cfg`` (this loads the model)."""
    cfg.validate()
    entry = REWARDS.get(cfg.kind)
    if entry.build is None:
        raise InputError(f"the {cfg.kind} reward scores with the policy's own model; build it with "
                         "bind_policy_reward(policy, cfg)", field="reward.kind")
    return entry.build(cfg)


def bind_policy_reward(policy: Any, cfg: RewardConfig) -> tuple[Any, RewardModel]:
    """The (policy, reward) pair a run drives: for a policy-bound kind the policy wrapped so the
    reward can read what it generated; otherwise ``policy`` unchanged and the PRM loaded."""
    cfg.validate()
    entry = REWARDS.get(cfg.kind)
    if entry.bind is not None:
        return entry.bind(policy, cfg)
    return policy, build_reward_model(cfg)


def _build_math_shepherd(cfg: RewardConfig) -> RewardModel:
    from equiv.search.rewards.math_shepherd import MathShepherdPRM

    return MathShepherdPRM.from_config(cfg)


def _build_qwen25_math_prm(cfg: RewardConfig) -> RewardModel:
    from equiv.search.rewards.qwen_prm import Qwen25MathPRM

    return Qwen25MathPRM.from_config(cfg)


def _bind_likelihood(policy: Any, cfg: RewardConfig) -> tuple[Any, RewardModel]:
    from equiv.search.rewards.likelihood import bind_likelihood

    return bind_likelihood(policy, cfg)


# The builders import their modules when called: each loads torch and transformers, which
# choosing a kind (the CLI, config validation) must not.
REWARDS.add(RewardKind("math_shepherd", _build_math_shepherd,
                       "Math-Shepherd: P(`+`) at the `ки` tag after each step (the paper's PRM)"))
REWARDS.add(RewardKind("likelihood", None, "no PRM: the policy's own mean token log-probability",
                       bind=_bind_likelihood))
REWARDS.add(RewardKind("qwen25_math_prm", _build_qwen25_math_prm,
                       "Qwen2.5-Math-PRM: a two-class head at `<extra_0>` step separators"))


__all__ = [
    "REWARDS",
    "RewardConfig",
    "RewardKind",
    "bind_policy_reward",
    "build_reward_model",
    "register_reward_model",
    "registered_reward_models",
]
