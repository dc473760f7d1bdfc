"""The one place the service asks its judge anything: pairs in, one :class:`PairVerdict` per pair out.

Every endpoint (``/verdicts``, ``/group``, ``/predict``, ``/merge_model_inference``) and the
llm-reasoners adapter go through :func:`verdicts`. The decision is the judge's own policy, applied
by the one evaluator (:func:`equiv.judge.decide.decide`, through the judge's ``pair_verdicts``):
the same-step shortcut, the Levenshtein prefilter, the model, the guard rules, the threshold and the
statement floor, in that order; the reason is the stage that decided.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from equiv.judge.decide import REASONS
from equiv.prune.cached import CachedJudge, Pair
from equiv.prune.grouping import Grouping, group_equivalent, sibling_pairs


@dataclass(frozen=True)
class PairVerdict:
    """The judge's whole decision on one pair.

    ``probability`` is the model's (1.0 for ``identical``, 0.0 for ``prefiltered``; a guard veto or
    the floor keeps it, so a client sees how sure the model was of a merge the policy refused);
    ``merged`` is the policy's verdict; ``reason`` the stage that decided (``guard:<rule>`` names
    the rule, ``detail`` its short reason); ``model_call`` says whether deciding it took a forward.
    """

    probability: float | None
    merged: bool
    reason: str
    model_call: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.detail:
            del out["detail"]
        return out


def verdicts(judge: CachedJudge, pairs: Sequence[Pair], questions: Sequence[str] | None = None, *,
             score_ruled: bool = False) -> list[PairVerdict]:
    """One verdict per pair, in order, from one batched judge call (``questions``: each pair's
    problem, which the guard reads; None = unknown; ``score_ruled``: the probability of the pairs
    a rule decided too, else None)."""
    if not pairs:
        return []
    asked = list(questions) if questions is not None else [""] * len(pairs)
    return [PairVerdict(None if v.probability is None else float(v.probability), bool(v.merged), v.reason,
                        bool(v.model_call), v.detail)
            for v in judge.pair_verdicts(list(pairs), asked, score_ruled=score_ruled)]


@dataclass(frozen=True)
class GroupResult:
    """One problem's siblings grouped: classes, representatives and every pair's verdict."""

    grouping: Grouping
    pairs: list[tuple[int, int]]
    verdicts: list[PairVerdict]


def group_pairs(steps: Sequence[str]) -> list[tuple[int, int]]:
    """The index pairs a set of siblings is judged on (every pair, in :func:`sibling_pairs` order)."""
    return sibling_pairs(len(steps))


def group_from(steps: Sequence[str], found: Sequence[PairVerdict], *, mode: str = "greedy") -> GroupResult:
    """Group siblings from the verdicts of their :func:`group_pairs` (judged in a larger batch)."""
    index_pairs = group_pairs(steps)
    grouping = group_equivalent(len(steps), {p: v.merged for p, v in zip(index_pairs, found)},
                                probs={p: v.probability for p, v in zip(index_pairs, found)},
                                mode=mode)  # type: ignore[arg-type]
    return GroupResult(grouping, index_pairs, list(found))


def group(judge: CachedJudge, steps: Sequence[str], question: str | None = None, *, mode: str = "greedy") -> GroupResult:
    """Group one problem's sibling steps (every pair judged in one call), as search groups them."""
    index_pairs = group_pairs(steps)
    found = verdicts(judge, [(steps[i], steps[j]) for i, j in index_pairs],
                     None if question is None else [question] * len(index_pairs))
    return group_from(steps, found, mode=mode)
