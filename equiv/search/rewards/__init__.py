"""Process reward models: a registry of kinds, each owning its step format.

``build_reward_model(RewardConfig(kind="math_shepherd", model=...))`` returns an object
implementing :class:`equiv.search.types.RewardModel` (one score per step). A PRM decides how
steps are joined and tagged -- Math-Shepherd puts ``ки`` after each step and reads P(``+``) at
the tags; Qwen2.5-Math-PRM separates steps with ``<extra_0>`` inside its chat template and reads
a two-class head -- so the search never formats PRM input itself.

Registered: ``math_shepherd`` (:mod:`.math_shepherd`), ``qwen25_math_prm`` (:mod:`.qwen_prm`;
the real checkpoint needs ``trust_remote_code: true``) and ``likelihood`` (:mod:`.likelihood`: no
PRM, the policy's own mean token log-probability -- a weak, cheap signal; it is bound to the
policy by :func:`bind_policy_reward`, so ``reward.model`` is ignored). Adding a PRM::

    @register_reward_model("my_prm")
    def _build(cfg: RewardConfig) -> RewardModel:
        return MyPRM.from_config(cfg)   # its own module, its own step format

and select it with ``--reward.kind my_prm``. Kind-specific settings go in
``RewardConfig.options``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from equiv.errors import InputError
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
    """``auto`` (float32 on CPU, bfloat16 on GPU), ``bfloat16``, ``float16``, ``float32``."""
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
        if self.kind not in _REGISTRY:
            raise InputError(
                f"unknown reward model kind {self.kind!r}; choose from {', '.join(sorted(_REGISTRY))}",
                field="reward.kind",
            )
        if not self.model and self.kind not in POLICY_BOUND:
            raise InputError("a reward model (hub id or directory) is required", field="reward.model")
        if self.batch_size < 1:
            raise InputError(f"must be >= 1, got {self.batch_size}", field="reward.batch_size")
        if self.dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise InputError(
                f"unknown dtype {self.dtype!r}; choose from auto, bfloat16, float16, float32", field="reward.dtype"
            )


POLICY_BOUND = ("likelihood",)
"""Kinds that score with the policy's own model: built with the policy (:func:`bind_policy_reward`)."""

Builder = Callable[[RewardConfig], RewardModel]
_REGISTRY: dict[str, Builder] = {}


def register_reward_model(kind: str) -> Callable[[Builder], Builder]:
    """Decorator: make ``kind`` buildable by :func:`build_reward_model`."""

    def deco(fn: Builder) -> Builder:
        if kind in _REGISTRY and _REGISTRY[kind] is not fn:
            raise ValueError(f"reward model kind {kind!r} is already registered")
        _REGISTRY[kind] = fn
        return fn

    return deco


def registered_reward_models() -> list[str]:
    return sorted(_REGISTRY)


def build_reward_model(cfg: RewardConfig) -> RewardModel:
    """Load the PRM named by ``cfg`` (this loads the model)."""
    cfg.validate()
    return _REGISTRY[cfg.kind](cfg)


@register_reward_model("math_shepherd")
def _build_math_shepherd(cfg: RewardConfig) -> RewardModel:
    from equiv.search.rewards.math_shepherd import MathShepherdPRM

    return MathShepherdPRM.from_config(cfg)


@register_reward_model("likelihood")
def _build_likelihood(cfg: RewardConfig) -> RewardModel:
    raise InputError("the likelihood reward scores with the policy's own model; build it with "
                     "bind_policy_reward(policy, cfg)", field="reward.kind")


def bind_policy_reward(policy: Any, cfg: RewardConfig) -> tuple[Any, RewardModel]:
    """The (policy, reward) pair a run drives: for a policy-bound kind the policy wrapped so the
    reward can read what it generated; otherwise ``policy`` unchanged and the PRM loaded."""
    cfg.validate()
    if cfg.kind == "likelihood":
        from equiv.search.rewards.likelihood import bind_likelihood

        return bind_likelihood(policy, cfg)
    return policy, build_reward_model(cfg)


@register_reward_model("qwen25_math_prm")
def _build_qwen25_math_prm(cfg: RewardConfig) -> RewardModel:
    from equiv.search.rewards.qwen_prm import Qwen25MathPRM

    return Qwen25MathPRM.from_config(cfg)


__all__ = [
    "POLICY_BOUND",
    "RewardConfig",
    "bind_policy_reward",
    "build_reward_model",
    "register_reward_model",
    "registered_reward_models",
]
