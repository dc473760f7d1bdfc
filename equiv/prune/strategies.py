"""Pruning strategies, registered by name (``--pruner.strategy``, ``pairs --strategy``), and the
settings and factory that build one.

A :class:`Strategy` entry declares its builder and what it takes -- a threshold, a model, a
prefilter -- and whether a new pair costs a learned model's forward; :func:`build_judge`
checks a :class:`PrunerConfig` against those flags, so an option a strategy would silently
ignore is an error. Every judge implements the one judge interface,
:class:`equiv.prune.boundary.SiblingJudge` (sibling families in, classes out: its ``group`` is
:func:`~equiv.prune.boundary.group_families`, the one place a merge is decided); each pair is
decided by the judge's policy, the rules before the model. The judges live one job per module:
:mod:`.cached` (the local judges' base: policy, cache, stats), :mod:`.rules` (``levenshtein``,
``formula``), :mod:`.embedding`, :mod:`.model_judge` (``model``). Adding one is a
module with a :class:`~equiv.prune.cached.CachedJudge` subclass and one ``STRATEGIES.add``
(docs/contributing.md, "Extending equiv").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from equiv.errors import InputError, check_fraction
from equiv.judge.policy import check_restate, guard_setting
from equiv.prune.cached import CachedJudge, check_statement_floor, check_threshold
from equiv.prune.embedding import EmbeddingJudge
from equiv.prune.model_judge import ModelJudge
from equiv.prune.remote import RemoteJudge
from equiv.prune.rules import FormulaJudge, LevenshteinJudge
from equiv.registry import Registry


@dataclass(frozen=True)
class Strategy:
    """One pruning strategy as search, ``pairs`` and the docs see it."""

    name: str
    """What ``--pruner.strategy`` / ``pairs --strategy`` select it by."""
    build: Callable[["PrunerConfig"], CachedJudge | RemoteJudge | None]
    """The judge for a validated config whose options this entry accepts (None: no pruning)."""
    summary: str
    """One line for the docs' table."""
    learned: bool = False
    """A new pair costs a learned model's forward (counted as the record's ``judge_calls``)."""
    threshold: bool = True
    """Takes a threshold (False: a 0/1 rule, nothing to set or sweep)."""
    model: bool = False
    """Takes ``model`` (an export, a checkpoint or an encoder)."""
    prefilter: bool = False
    """Takes the Levenshtein ``prefilter`` (pairs at or below it are "not equivalent", free)."""
    export_settings: bool = False
    """Reads its defaults (threshold, prefilter, claim guard) from the judge export."""
    baseline: bool = False
    """A rule the cross-validation yardstick (:mod:`equiv.prune.yardstick`) scores beside the
    judge: no model, its judge's ``score(a, b)`` and default policy are the whole rule."""

    @property
    def prunes(self) -> bool:
        """False only for ``none``: no judge, nothing merged."""
        return self.name != "none"


STRATEGIES: Registry[Strategy] = Registry("strategy", field="strategy")
REMOVED_STRATEGIES = {
    "exact": "strategy 'exact' was removed in 2026-11: exact-text dedup is the search setting, on by "
             "default; use --search.dedupe_exact true with --pruner.strategy none",
}
"""Strategies taken out of the registry, each refused by name with what to use instead
(docs/experiments/2026-11-27-removed-levers.md): ``exact`` could never merge a pair, since
``search.dedupe_exact`` drops exact copies before the judge is asked."""


@dataclass
class PrunerConfig:
    """How search (and ``pairs``) prunes equivalent siblings.

    Attributes:
        strategy: which judge, a name in :data:`STRATEGIES` (docs/pruning.md lists them);
            ``none`` turns pruning off. ``model`` uses the exported classifier with its policy.
        model: exported judge directory or Lightning checkpoint (``model``), or a
            sentence-transformers model (``embedding``; default the bundled all-MiniLM-L6-v2).
        threshold: equivalent iff probability >= threshold; None = the strategy's default
            (levenshtein 0.95, embedding 0.9, model: the export's policy).
        prefilter: Levenshtein ratio <= prefilter is "not equivalent" without the model; None =
            the export's policy (the paper's 0.75 for an old export without one).
        batch_size: pairs per forward pass.
        max_length: token limit per pair; None = the export's, else the model's limit.
        device: ``auto`` (CUDA if visible), ``cpu``, ``cuda``, ``cuda:N``.
        dtype: ``auto`` (bf16 autocast on CUDA, fp32 on CPU), ``float32``, ``bfloat16``, ``float16``.
        grouping: ``greedy`` (the paper: merge into the first matching class) or ``transitive``.
        representative: which member keeps a class: ``first``, highest ``prior``, or highest ``score``.
        guard: the guard rules that keep a pair apart before the model is asked (:mod:`equiv.text.guard`): true = every rule,
            false = none, or rule names (a list, or comma-separated: ``RULE,RULE``); None = the export's policy for
            ``model`` (off for the other strategies).
        floor: the statement floor: a pair of steps that both compute nothing
            (:func:`equiv.judge.decide.below_floor`) merges only at this probability or
            above; None = the export's policy for ``model`` (none for
            the other strategies), 0 = no floor. It leaves ``restate`` as it is.
        plan_floor: the floor of such a pair where a step is a numbered plan
            (:func:`equiv.text.guard.numbered_plan`); None = the export's policy for ``model``,
            0 = plans held to ``floor`` like every statement.
        plan_items: the aligned-plan stage: two numbered plans that compute nothing merge when every
            pair of their sub-goals, in order, reads alike at this cosine or above
            (:func:`equiv.judge.decide.aligned_plan_verdicts`); None = the export's policy for
            ``model`` (off for the other strategies), 0 = off.
        restate: the restatement rule: two steps that compute nothing and restate each other
            (:mod:`equiv.text.restate`) merge without the model; None = the export's policy for
            ``model`` (on where it has a floor), off for the other strategies.
        url: the judge service's address (``remote``: ``search_cli.py serve``; docs/serving.md).
        judge_fingerprint: ``remote``: the served judge this run is bound to; eval fills it from
            the service's ``/info``, so a resume against another judge is refused.
    """

    strategy: str = "none"
    model: str | None = None
    threshold: float | None = None
    prefilter: float | None = None
    batch_size: int = 64
    max_length: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    grouping: Literal["greedy", "transitive"] = "greedy"
    representative: Literal["first", "prior", "score"] = "first"
    guard: bool | list[str] | str | None = None
    floor: float | None = None
    plan_floor: float | None = None
    plan_items: float | None = None
    restate: bool | None = None
    url: str | None = None
    judge_fingerprint: str | None = None

    def validate(self) -> None:
        """Each setting on its own (:func:`build_judge` checks which the strategy takes)."""
        strategy_entry(self.strategy)
        if self.grouping not in ("greedy", "transitive"):
            raise InputError(f"unknown grouping {self.grouping!r}; choose greedy or transitive", field="grouping")
        if self.representative not in ("first", "prior", "score"):
            raise InputError(
                f"unknown representative rule {self.representative!r}; choose first, prior or score", field="representative"
            )
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputError(f"must be a positive integer, got {self.batch_size!r}", field="batch_size")
        if self.threshold is not None:
            check_threshold(self.threshold, self.strategy)
        if self.prefilter is not None:
            check_fraction(float(self.prefilter), "prefilter")
        check_statement_floor(self.floor)
        check_statement_floor(self.plan_floor, field="plan_floor")
        if self.plan_items is not None:
            check_fraction(float(self.plan_items), "plan_items")
        if self.restate is not None:
            check_restate(self.restate)
        if self.guard is not None:
            guard_setting(self.guard)


def strategy_entry(name: str) -> Strategy:
    """The registry's entry called ``name``; a removed strategy is refused with what replaces it,
    an unknown one with every choice (one :class:`~equiv.errors.InputError` naming ``strategy``)."""
    if name in REMOVED_STRATEGIES:
        raise InputError(REMOVED_STRATEGIES[name], field="strategy")
    return STRATEGIES.get(name)


def build_judge(cfg: PrunerConfig) -> CachedJudge | RemoteJudge | None:
    """The judge ``cfg`` describes, or None for ``strategy: none``.

    Options that would silently do nothing (a threshold for a 0/1 rule, a prefilter or a model
    for a strategy without one) are errors, not no-ops: the entry's flags say what it takes.
    """
    cfg.validate()
    entry = STRATEGIES.get(cfg.strategy)
    if not entry.prunes:
        if cfg.guard:
            raise InputError("strategy 'none' merges nothing; there is nothing for the claim guard to veto",
                             field="guard")
        for name in ("floor", "plan_floor"):
            if getattr(cfg, name):
                raise InputError("strategy 'none' merges nothing; there is nothing for a statement floor to hold "
                                 "back", field=name)
        if cfg.restate:
            raise InputError("strategy 'none' merges nothing; the restatement rule would merge nothing either",
                             field="restate")
        if cfg.plan_items:
            raise InputError("strategy 'none' merges nothing; aligned plans would merge nothing either",
                             field="plan_items")
        return None
    s = cfg.strategy
    if cfg.prefilter is not None and not entry.prefilter:
        raise InputError(f"only the model strategy has a prefilter (strategy is {s!r})", field="prefilter")
    if cfg.model is not None and not entry.model:
        raise InputError(f"strategy {s!r} takes no model", field="model")
    if (cfg.url is not None or cfg.judge_fingerprint is not None) and s != "remote":
        raise InputError(f"only the remote strategy takes a service url and fingerprint (strategy is {s!r})",
                         field="url" if cfg.url is not None else "judge_fingerprint")
    if cfg.threshold is not None and not entry.threshold:
        raise InputError(f"strategy {s!r} is a 0/1 rule and takes no threshold", field="threshold")
    judge = entry.build(cfg)
    assert judge is not None
    if not entry.export_settings:  # a model judge took them over its export's policy when built
        judge.policy = judge.policy.with_knobs(guard=cfg.guard, floor=cfg.floor, plan_floor=cfg.plan_floor,
                                               restate=cfg.restate, plan_items=cfg.plan_items)
    return judge


def _classifier(cfg: PrunerConfig) -> CachedJudge:
    """``model``: the exported (or checkpointed) classifier with its export's policy."""
    if cfg.model is None:
        raise InputError(f"the {cfg.strategy} strategy needs a judge: an exported directory or a .ckpt file",
                         field="model")
    return ModelJudge(
        cfg.model,
        threshold=cfg.threshold,
        prefilter=cfg.prefilter,
        batch_size=cfg.batch_size,
        max_length=cfg.max_length,
        device=cfg.device,
        dtype=cfg.dtype,
        guard=cfg.guard,
        floor=cfg.floor,
        plan_floor=cfg.plan_floor,
        restate=cfg.restate,
        plan_items=cfg.plan_items,
    )


def _remote(cfg: PrunerConfig) -> RemoteJudge:
    """``remote``: the service applies its judge's whole policy; settings it would ignore are errors."""
    for name in ("guard", "floor", "plan_floor", "restate", "plan_items"):
        if getattr(cfg, name) is not None:
            raise InputError("the remote strategy uses the served judge's own policy; set it where the judge is "
                             "exported", field=name)
    return RemoteJudge(cfg.url, expected_fingerprint=cfg.judge_fingerprint)


STRATEGIES.add(Strategy("none", lambda cfg: None, "no pruning (the baseline)", threshold=False))
STRATEGIES.add(Strategy("levenshtein", lambda cfg: LevenshteinJudge(cfg.threshold),
                        "Levenshtein ratio > threshold (default 0.95, the paper's baseline)", baseline=True))
STRATEGIES.add(Strategy(
    "embedding",
    lambda cfg: EmbeddingJudge(cfg.model, threshold=cfg.threshold, batch_size=cfg.batch_size, device=cfg.device),
    "cosine of sentence embeddings >= threshold (default 0.9; the SBERT baseline)", learned=True, model=True))
STRATEGIES.add(Strategy("formula", lambda cfg: FormulaJudge(), "the same normalised formulas", threshold=False,
                        baseline=True))
STRATEGIES.add(Strategy("model", _classifier, "the trained judge, after its policy's rules (shortcut, guard, restatement, aligned plans) and prefilter",
                        learned=True, model=True, prefilter=True, export_settings=True))
STRATEGIES.add(Strategy("remote", _remote, "the judge of a running `search_cli.py serve` (its whole policy), over HTTP",
                        learned=True, threshold=False, export_settings=True))
