"""The local judges' shared machinery, behind the one judge interface
(:class:`equiv.prune.boundary.SiblingJudge`).

Callers hand a judge sibling families and get their classes back (:meth:`CachedJudge.group`:
:func:`equiv.prune.boundary.group_families`, which asks greedy grouping's pairs in rounds, each
round one batched :meth:`~CachedJudge.pair_verdicts` call across every family). Each judge has

- ``name`` and ``policy`` (:class:`equiv.judge.policy.DecisionPolicy`): how a pair is decided,
  applied by the one evaluator :func:`equiv.judge.decide.decide`;
- ``pair_verdicts(pairs, questions)``: per pair the probability, whether it merges, the reason
  (the stage that decided: ``identical``, ``prefiltered``, ``guard:<rule>``, ``restated``,
  ``below_threshold``, ``floor``, ``threshold``) and whether deciding it took a learned model's
  forward (the rules decide before the model, so a pair they decide takes none) -- what
  search counts as a problem's ``judge_calls``, so the judge alone says what its work was;
- ``pair_probabilities(pairs)``: the verdicts' probabilities (the Levenshtein ratio, the cosine
  clipped at 0, the model's probability; 0/1 for ``formula``);
- ``pair_scores(pairs)``: the continuous score a threshold is swept over;
- ``stats`` (:class:`JudgeStats`): pairs asked, cache hits, and how each new pair was decided,
  so search can report judge work apart from PRM work.

Every judge caches per pair with an order-insensitive key, so within a search a pair of step
texts is scored once however often and in whichever order it is asked; the key is the pair's
canonical order (:func:`equiv.data.tokenize.canonical_pair`), the one order every pair is
scored in, so the cached probability is the same whichever order came first. The score reads the two
steps only. The rules decide first, in :func:`equiv.judge.decide.decide`, on every ask: identical
steps are equivalent (free), a Levenshtein ratio <= ``prefilter`` is not equivalent (free), the
claim guard (which also reads each pair's question) and the restatement rule settle what they
can; only the pairs they leave open are scored -- from the cache, else by the classifier in one
batched, length-sorted, dynamically padded, no-grad call (bf16 autocast on GPU) -- and that
probability meets the threshold and the statement floor. "Identical" means equal
after whitespace normalisation for the rules, and equal up to formatting
(:func:`equiv.text.formatting.format_key`: digit grouping, currency signs, ``12.0`` vs ``12``,
spaces around operators, a final full stop, case) for the trained judges, which the rubric they
are trained on counts as the same step and which the classifier alone sometimes misses.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Sequence

from equiv.errors import InputError, check_fraction
from equiv.data.tokenize import canonical_pair
from equiv.judge.decide import IDENTICAL, PREFILTERED, Verdict, decide
from equiv.judge.policy import DecisionPolicy
from equiv.prune.boundary import GroupsSiblings
from equiv.prune.lru import BoundedLRU, text_bytes
from equiv.prune.stats import JudgeStats

Pair = tuple[str, str]


def pair_key(a: str, b: str) -> Pair:
    """The order-insensitive identity of a pair (the judge's cache key): its canonical order, the
    order it is scored in."""
    return canonical_pair(a, b)


def checked_pairs(pairs: Sequence[Pair], questions: Sequence[str] | None) -> list[str]:
    """Each pair must be two strings and ``questions`` (None: unknown) one per pair; returns the
    questions ("" each when unknown). What every judge checks first."""
    if questions is not None and len(questions) != len(pairs):
        raise ValueError(f"{len(questions)} questions for {len(pairs)} pairs")
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise InputError(f"pair {i} must be two strings, got {pair!r}"[:200], field="pairs")
    return list(questions) if questions is not None else [""] * len(pairs)


def check_threshold(value: float, strategy: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InputError(f"must be a number, got {value!r}", field="threshold")
    if not 0.0 < float(value) <= 1.0:
        raise InputError(f"must be in (0, 1] for strategy {strategy!r}, got {value}", field="threshold")
    return float(value)


def check_statement_floor(value: float | None, path: str | None = None, field: str = "floor") -> float | None:
    """A statement floor (``field``: ``floor`` or ``plan_floor``) as a judge keeps it: in [0, 1],
    and 0 (like ``None``) meaning none."""
    if value is None:
        return None
    return check_fraction(value, field, path) or None


class CachedJudge(GroupsSiblings):
    """Shared machinery: the decision policy, an order-insensitive score cache, stats, and
    :meth:`group` (sibling families -> classes, :func:`equiv.prune.boundary.group_families`).

    Subclasses implement :meth:`_judge_new` for pairs not scored before and return ``(probability,
    score)`` per pair; the policy (:attr:`policy`, applied by :func:`equiv.judge.decide.decide`)
    turns the probability into a verdict. The cache key ignores order, and a new pair reaches
    :meth:`_judge_new` in that key's order (:func:`~equiv.data.tokenize.canonical_pair`), never in
    the order it was first asked, so what the cache holds does not depend on which sibling came
    first.
    """

    name: str = "base"
    learned: bool = False  # True: a new pair costs a model forward (model, embedding); False: a rule
    # The policy a rule strategy decides with: whitespace-equal steps are the same step, no
    # prefilter, no guard or floor unless the config asks; threshold 0.5 reads a 0/1 rule right.
    default_policy = DecisionPolicy(threshold=0.5, prefilter=None, same_step="whitespace")

    def __init__(self) -> None:
        self.stats = JudgeStats()
        self.policy: DecisionPolicy = self.default_policy
        # what this judge has decided, per pair key: (probability, score) once scored, None when
        # decided without a score (the shortcut, the prefilter, a rule); bounded (equiv.prune.lru)
        self.cache: BoundedLRU[Pair, tuple[float, float] | None] = BoundedLRU(size_of=lambda key, _: text_bytes(*key))

    # The knobs, read and set on the policy (what ``describe``, the CLIs and older callers use).
    @property
    def threshold(self) -> float:
        return self.policy.threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        self.policy = replace(self.policy, threshold=check_threshold(value, self.name))

    def clear_cache(self) -> None:
        """Forget judged pairs (benchmarks; a new search over unrelated problems)."""
        self.cache.clear()

    def cache_info(self) -> dict[str, int]:
        """The cache's entries, estimated bytes, bounds and evictions (the service's ``/metrics``)."""
        return self.cache.info()

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        """``(probability, score)`` of pairs not judged before: what a strategy implements."""
        raise NotImplementedError

    def needs_model(self, a: str, b: str) -> bool:
        """Whether a pair the policy sent to be scored costs a learned model's forward: every one
        for a learned judge, unless a subclass decides some inside :meth:`_judge_new` for free."""
        return self.learned

    def _results(self, pairs: list[Pair], fresh: set[Pair]) -> list[tuple[float, float]]:
        """``(probability, score)`` of each pair the policy sends to the model: cached ones from the
        cache, new ones in one :meth:`_judge_new` call; the keys scored now go into ``fresh``."""
        keys = [pair_key(a, b) for a, b in pairs]
        known: dict[Pair, tuple[float, float]] = {}
        new, asked = [], []
        for key, pair in zip(keys, pairs):
            if key in known:
                continue
            cached = self.cache.get(key)
            if cached is not None:
                known[key] = cached
                continue
            fresh.add(key)
            new.append(key)
            asked.append(key)  # the canonical order, whatever order the caller used
            known[key] = (0.0, 0.0)  # a placeholder until the batch below is scored
        if new:
            for key, result in zip(new, self._judge_new(asked)):
                known[key] = result
                self.cache.put(key, result)
        return [known[key] for key in keys]

    def _scores(self, pairs: list[Pair], fresh: set[Pair]) -> list[float]:
        """The probabilities :meth:`_results` gives (the scorer :func:`decide` calls)."""
        return [probability for probability, _ in self._results(pairs, fresh)]

    def pair_verdicts(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None, *,
                      score_ruled: bool = False) -> list[Verdict]:
        """The policy's verdict per pair, in order, with whether it took a model forward.

        ``questions``: the problem each pair belongs to (search and labelled files know it), which
        the guard reads for restated givens and the problem's entities; without it the guard
        checks the steps alone. A cached pair is scored once however often it is asked.
        ``score_ruled``: also score the pairs a rule decided (guard, restatement) for their
        probability; off, they cost no forward and their probability is None.
        """
        asked_questions = checked_pairs(pairs, questions)
        start = time.perf_counter()
        asked = [(a, b) for a, b in pairs]  # decide() puts each in canonical order
        scored_now: set[Pair] = set()
        keys = [pair_key(a, b) for a, b in asked]
        seen = {key for key in keys if key in self.cache}  # decided before this call
        verdicts = decide(asked, self.policy, lambda todo: self._scores(todo, scored_now), asked_questions,
                          score_ruled=score_ruled)
        out: list[Verdict] = []
        fresh: list[bool] = []
        for (a, b), key, verdict in zip(asked, keys, verdicts):
            if verdict.scored:
                fresh.append(key in scored_now)
                scored_now.discard(key)  # a repeat in this call is a cache hit
                out.append(replace(verdict, model_call=self.needs_model(a, b)))
            else:  # decided free or by a rule: new work the first time this judge saw the pair
                fresh.append(key not in seen)
                seen.add(key)  # a repeat in this call is a cache hit
                if key in self.cache:
                    self.cache.get(key)  # used: now the most recent
                else:
                    self.cache.put(key, None)
                out.append(verdict)
        self.stats.count(out, fresh, time.perf_counter() - start)
        return out

    def pair_probabilities(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """The probability per pair, in order (the verdicts' ``merged`` is what decides); every pair
        the shortcut and the prefilter leave is scored, those the rules decide too."""
        return [float(v.probability) for v in self.pair_verdicts(pairs, questions, score_ruled=True)]

    def pair_scores(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """The continuous score a threshold is swept over (the cached ``score`` of each scored
        pair: the Levenshtein ratio, the cosine, the model's probability), per pair, in order."""
        verdicts = self.pair_verdicts(pairs, questions, score_ruled=True)
        out = []
        for (a, b), v in zip(pairs, verdicts):
            if v.reason in (IDENTICAL, PREFILTERED):
                out.append(float(v.probability or 0.0))
                continue
            cached = self.cache.get(pair_key(a, b))  # None only if evicted since: scored again
            out.append((cached or self._results([pair_key(a, b)], set())[0])[1])
        return out

    def describe(self) -> dict[str, Any]:
        """Settings to record beside results (what exactly judged the pairs)."""
        return {"strategy": self.name, "threshold": self.threshold, "policy": self.policy.to_dict()}

