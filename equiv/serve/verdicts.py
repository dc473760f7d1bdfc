"""The one place the service asks its judge anything: pairs in, one :class:`PairVerdict` per pair out.

Every endpoint (``/verdicts``, ``/group``, ``/predict``, ``/merge_model_inference``) and the
llm-reasoners adapter go through :func:`verdicts`, so when the judge's decision becomes one
policy with one evaluator returning ``(probability, merged, reason)`` per pair, only this module
changes. Today the decision is :class:`equiv.prune.cached.CachedJudge`'s: the same-step shortcut,
the Levenshtein prefilter, the model, then the claim guard and the statement floor; the reason is
read back from the same rules in the same order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from equiv.prune.cached import CachedJudge, Pair
from equiv.prune.grouping import Grouping, group_equivalent, sibling_pairs
from equiv.text.claims import below_statement_floor, claim_check

REASONS = ("identical", "prefiltered", "guard:numbers", "guard:entities", "floor", "threshold", "below_threshold")
"""Every reason a verdict can carry (the first rule of the policy that decided the pair)."""


@dataclass(frozen=True)
class PairVerdict:
    """The judge's whole decision on one pair.

    ``probability`` is what grouping compares with the threshold (the guard and the floor have
    already zeroed a vetoed pair, as a local judge's ``pair_probabilities`` does); ``score`` is the
    judge's own score before they did; ``model_call`` says whether deciding it took a forward.
    """

    probability: float
    score: float
    merged: bool
    reason: str
    model_call: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _reason(judge: CachedJudge, a: str, b: str, question: str, probability: float, score: float,
            merged: bool) -> str:
    """Which rule decided the pair, checked in the order the judge applies them."""
    if judge.exact_shortcut and judge.same_step_key(a) == judge.same_step_key(b):
        base = "identical"
    elif not judge.needs_model(a, b) and judge.learned:
        return "prefiltered"
    else:
        base = "threshold" if merged else "below_threshold"
    if merged or probability > 0.0:
        return base
    # zeroed after the cache: the guard vetoed it, or the floor held it back (score kept the raw value)
    if judge.claim_guard:
        check = claim_check(a, b, question)
        if check.veto:
            return "guard:numbers" if check.numbers else "guard:entities"
    if below_statement_floor(a, b, score, judge.statement_threshold):
        return "floor"
    return base


def verdicts(judge: CachedJudge, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[PairVerdict]:
    """One verdict per pair, in order, from one batched judge call (``questions``: each pair's
    problem, which the guard and a ``with_question`` judge read; None = unknown)."""
    if not pairs:
        return []
    asked = list(questions) if questions is not None else [""] * len(pairs)
    flags = judge.pair_verdicts(pairs, asked if (questions is not None or judge.reads_question) else None)
    out = []
    for (a, b), question, flag in zip(pairs, asked, flags):
        raw = judge._cache.get(judge._key(a, b, question), (flag.probability, flag.probability))
        probability = float(flag.probability)
        merged = probability > judge.threshold if judge.strict else probability >= judge.threshold
        score = float(raw[1])
        out.append(PairVerdict(probability, score, merged, _reason(judge, a, b, question, probability, score, merged),
                               bool(flag.model_call)))
    return out


@dataclass(frozen=True)
class GroupResult:
    """One problem's siblings grouped: classes, representatives and every pair's verdict."""

    grouping: Grouping
    pairs: list[tuple[int, int]]
    verdicts: list[PairVerdict]


def group_pairs(steps: Sequence[str]) -> list[tuple[int, int]]:
    """The index pairs a set of siblings is judged on (every pair, in :func:`sibling_pairs` order)."""
    return sibling_pairs(len(steps))


def group_from(steps: Sequence[str], found: Sequence[PairVerdict], threshold: float, *,
               mode: str = "greedy") -> GroupResult:
    """Group siblings from the verdicts of their :func:`group_pairs` (judged in a larger batch)."""
    index_pairs = group_pairs(steps)
    grouping = group_equivalent(len(steps), {p: v.probability for p, v in zip(index_pairs, found)},
                                threshold, mode=mode)  # type: ignore[arg-type]
    return GroupResult(grouping, index_pairs, list(found))


def group(judge: CachedJudge, steps: Sequence[str], question: str | None = None, *, mode: str = "greedy") -> GroupResult:
    """Group one problem's sibling steps (every pair judged in one call), as search groups them."""
    index_pairs = group_pairs(steps)
    found = verdicts(judge, [(steps[i], steps[j]) for i, j in index_pairs],
                     None if question is None else [question] * len(index_pairs))
    return group_from(steps, found, judge.threshold, mode=mode)
