"""The learned strategy ``model``: the trained pair classifier behind the paper's two-stage check."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

from equiv.devices import resolve_autocast_dtype, resolve_device
from equiv.errors import InputError
from equiv.judge.policy import policy_from_settings
from equiv.prune.cached import CachedJudge, Pair, check_threshold
from equiv.prune.loading import load_classifier, model_token_limit


class ModelJudge(CachedJudge):
    """The trained pair classifier, behind the paper's two-stage check (see module docstring).

    Loaded with :func:`equiv.prune.loading.load_classifier` from an exported Hugging Face
    directory (``config.json`` key ``equiv`` holds the training-time settings) or a Lightning
    checkpoint. The export's decision policy (``equiv.policy``; an older export's settings
    converted) is the default, ``threshold``, ``prefilter``, ``guard``, ``floor``, ``plan_floor`` and ``plan_items`` knobs on
    top of it; ``max_length`` defaults to its
    ``max_length`` (else the model's limit); a ``max_length`` beyond what the model's position
    embeddings allow is lowered to that limit with a warning, never run into an index error.
    An ensemble export (:mod:`equiv.judge.ensemble`: ``equiv.members``) loads every member and
    scores each pair with each, at its own length; the probability is the sigmoid of their mean
    logit, and one forward batch per member is counted.
    """

    name = "model"
    learned = True

    def __init__(
        self,
        path: str | Path,
        *,
        threshold: float | None = None,
        prefilter: float | None = None,
        batch_size: int = 64,
        max_length: int | None = None,
        device: str = "auto",
        dtype: str = "auto",
        guard: bool | list[str] | None = None,
        floor: float | None = None,
        plan_floor: float | None = None,
        restate: bool | None = None,
        plan_items: float | None = None,
    ) -> None:
        super().__init__()
        self.path = str(path)
        self.device = resolve_device(device)
        self.autocast_dtype = resolve_autocast_dtype(dtype, self.device)
        model, tokenizer, settings = load_classifier(path)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.settings = settings
        self.positive_index = int(settings.get("positive_index", 1))
        stored = policy_from_settings(settings, source=Path(self.path) / "config.json")
        self.policy = stored.with_knobs(threshold=None if threshold is None else check_threshold(threshold, self.name),
                                        prefilter=prefilter, guard=guard, floor=floor,
                                        plan_floor=plan_floor, restate=restate, plan_items=plan_items)
        if batch_size < 1:
            raise InputError(f"must be >= 1, got {batch_size}", field="batch_size")
        self.batch_size = int(batch_size)
        limit = model_token_limit(self.model, tokenizer)
        wanted = max_length or settings.get("max_length") or limit
        if int(wanted) < 8:
            raise InputError(f"must be >= 8 tokens, got {wanted}", field="max_length")
        if int(wanted) > limit:
            warnings.warn(f"max_length {wanted} is beyond the model's {limit} positions; using {limit}", stacklevel=2)
            wanted = limit
        self.max_length = int(wanted)
        from equiv.judge.members import Member, member_dirs  # torch: only when a model judge is built

        self.members = [Member.from_settings(self.model, tokenizer, settings, self.max_length, source=path)]
        for extra in member_dirs(path)[1:]:
            m_model, m_tokenizer, m_settings = load_classifier(extra)
            limit = min(self.max_length, model_token_limit(m_model, m_tokenizer))
            self.members.append(Member.from_settings(m_model.to(self.device).eval(), m_tokenizer, m_settings, limit,
                                                    source=extra))

    @property
    def prefilter(self) -> float:
        """The Levenshtein prefilter (``policy.prefilter``; 0 when off)."""
        return self.policy.prefilter or 0.0

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        """The members' combined probability of pairs the policy sent to the model."""
        if not pairs:
            return []
        from equiv.judge.members import score_members

        probs = score_members(self.members, pairs, batch_size=self.batch_size, autocast_dtype=self.autocast_dtype)
        self.stats.forward_batches += math.ceil(len(pairs) / self.batch_size) * len(self.members)
        return [(float(p), float(p)) for p in probs]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.path, "prefilter": self.prefilter, "max_length": self.max_length,
                "members": len(self.members)}
