"""The one place the service asks its judge anything: pairs in, one :class:`~equiv.judge.decide.Verdict` per pair out.

Every endpoint (``/verdicts``, ``/group``, ``/predict``, ``/merge_model_inference``) and the
llm-reasoners adapter go through :func:`verdicts`. The decision is the judge's own policy, applied
by the one evaluator (:func:`equiv.judge.decide.decide`, through the judge's ``pair_verdicts``):
the rules first -- the same-step shortcut, the Levenshtein prefilter, the guard rules, the
restatement rule -- and only the pairs they leave open go to the model, whose probability meets the
threshold and the statement floor; the reason is the stage that decided. ``/verdicts`` and ``/group``
answer each verdict in its one JSON form (:meth:`~equiv.judge.decide.Verdict.to_json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from equiv.judge.decide import REASONS, Verdict  # noqa: F401  (REASONS: what a verdict's reason can be)
from equiv.prune.cached import CachedJudge, Pair
from equiv.prune.grouping import Grouping, group_equivalent, sibling_pairs


def verdicts(judge: CachedJudge, pairs: Sequence[Pair], questions: Sequence[str] | None = None, *,
             score_ruled: bool = False) -> list[Verdict]:
    """One verdict per pair, in order, from one batched judge call (``questions``: each pair's
    problem, which the guard reads; None = unknown; ``score_ruled``: the probability of the pairs
    a rule decided too, else None)."""
    if not pairs:
        return []
    asked = list(questions) if questions is not None else [""] * len(pairs)
    return judge.pair_verdicts(list(pairs), asked, score_ruled=score_ruled)


@dataclass(frozen=True)
class GroupResult:
    """One problem's siblings grouped: classes, representatives and every pair's verdict."""

    grouping: Grouping
    pairs: list[tuple[int, int]]
    verdicts: list[Verdict]


def group_pairs(steps: Sequence[str]) -> list[tuple[int, int]]:
    """The index pairs transitive grouping judges a set of siblings on (every pair, in
    :func:`sibling_pairs` order)."""
    return sibling_pairs(len(steps))


def group_from(steps: Sequence[str], found: Sequence[Verdict], *, mode: str = "greedy") -> GroupResult:
    """Group siblings from the verdicts of their :func:`group_pairs` (judged in a larger batch)."""
    index_pairs = group_pairs(steps)
    grouping = group_equivalent(len(steps), {p: v.merged for p, v in zip(index_pairs, found)},
                                probs={p: v.probability for p, v in zip(index_pairs, found)},
                                mode=mode)  # type: ignore[arg-type]
    return GroupResult(grouping, index_pairs, list(found))


def greedy_group(judge: CachedJudge, steps: Sequence[str], question: str | None = None) -> GroupResult:
    """Greedy grouping asking only the pairs it reads: each step, in order, against the
    representatives found so far (one judge call per step), so a step joins the first class
    whose representative it matches or founds a new one.

    Why not every pair: greedy grouping (:func:`~equiv.prune.grouping.group_equivalent`) never
    looks at a pair of two members, so judging all n(n-1)/2 pairs did work no answer used (issue
    66: 4,095 pairs held the only worker for 105 s); steps that merge cost one pair each. The
    classes are those of greedy grouping over every pair's verdict: it reads exactly these pairs.
    ``pairs``/``verdicts``: the pairs asked, in the order asked (``i`` a representative, ``i < j``)."""
    representatives: list[int] = []
    asked: list[tuple[int, int]] = []
    found: list[Verdict] = []
    for step in range(len(steps)):
        if representatives:
            pairs = [(rep, step) for rep in representatives]
            answers = verdicts(judge, [(steps[i], steps[j]) for i, j in pairs],
                               None if question is None else [question] * len(pairs))
            asked.extend(pairs)
            found.extend(answers)
            if any(v.merged for v in answers):
                continue
        representatives.append(step)
    grouping = group_equivalent(len(steps), {p: v.merged for p, v in zip(asked, found)},
                                probs={p: v.probability for p, v in zip(asked, found)}, mode="greedy")
    return GroupResult(grouping, asked, found)


def group(judge: CachedJudge, steps: Sequence[str], question: str | None = None, *, mode: str = "greedy") -> GroupResult:
    """Group one problem's sibling steps as search groups them: greedy asks only the pairs it reads
    (:func:`greedy_group`); transitive judges every pair in one call."""
    if mode == "greedy":
        return greedy_group(judge, steps, question)
    index_pairs = group_pairs(steps)
    found = verdicts(judge, [(steps[i], steps[j]) for i, j in index_pairs],
                     None if question is None else [question] * len(index_pairs))
    return group_from(steps, found, mode=mode)
