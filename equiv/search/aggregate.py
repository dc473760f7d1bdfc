"""Answer choice over several finished solutions, as the reference's evaluator makes it.

SBS (and lookahead, DFS) finish with several solutions; the EquivPruner reference (OpenR's
``reason/evaluation/evaluator.py`` + ``reason/reranking/vote_utils.py``) does not answer with one
of them picked by the search but aggregates all of them, each way below, and reports each:

- ``majority_vote``: the most frequent answer;
- ``prm_min_max``: the answer of the solution whose lowest step score is highest;
- ``prm_min_vote``: answers weighted by the sum of their solutions' lowest step scores;
- ``prm_last_max`` / ``prm_last_vote``: the same with the last step's score (``prm_last_max`` is
  what equiv answered with before: the finished solution with the best last-step value).

Rules shared with the reference: solutions without an extractable answer take no part (no valid
answer at all: no prediction, graded wrong); answers are compared as extracted strings; ties go
to the answer seen first (solutions in the order the search finished them). Step scores are the
PRM scores the search already computed for each step of the path (a causal PRM scores step i of a
full solution exactly as it scored the prefix ending at i), so aggregation costs no PRM call.

The headline -- the record's ``prediction``/``correct`` and the summary's ``accuracy`` -- is
``majority_vote`` (:data:`HEADLINE`): the one aggregation the reference computes for every
method (a single MCTS path is graded by it alone), so it is the one number the paper can report
for all of its tables alike. Pure functions; no engine, no grading of its own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

AGGREGATIONS: tuple[str, ...] = ("majority_vote", "prm_min_max", "prm_min_vote", "prm_last_max", "prm_last_vote")
HEADLINE = "majority_vote"


@dataclass(frozen=True)
class Solution:
    """One finished solution: its extracted answer (None = none found) and its steps' PRM scores."""

    answer: str | None
    step_scores: tuple[float, ...]


def _score(scores: Sequence[float], how: str) -> float:
    if not scores:
        return -1.0  # the reference's value for a solution the PRM gave no score
    return min(scores) if how == "min" else scores[-1]


def _first_max(weights: dict[str, float]) -> str:
    """The key with the largest weight, first inserted on ties (``max`` over a dict)."""
    return max(weights, key=weights.__getitem__)


def choose(solutions: Sequence[Solution], method: str) -> int | None:
    """Index of the solution ``method`` answers with (the first one holding the chosen answer),
    or None when no solution has an answer."""
    if method not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {method!r}; choose from {', '.join(AGGREGATIONS)}")
    valid = [i for i, s in enumerate(solutions) if s.answer is not None]
    if not valid:
        return None
    if method == "majority_vote":
        counts: dict[str, float] = defaultdict(float)
        for i in valid:
            counts[solutions[i].answer] += 1  # type: ignore[index]
        answer = _first_max(counts)
    else:
        how = "min" if method.startswith("prm_min") else "last"
        scores = [_score(solutions[i].step_scores, how) for i in valid]
        if method.endswith("_max"):
            answer = solutions[valid[scores.index(max(scores))]].answer  # type: ignore[assignment]
        else:
            weights: dict[str, float] = defaultdict(float)
            for i, score in zip(valid, scores):
                weights[solutions[i].answer] += score  # type: ignore[index]
            answer = _first_max(weights)
    return next(i for i in valid if solutions[i].answer == answer)


def aggregate(solutions: Sequence[Solution], grade: Callable[[str | None], bool]) -> dict[str, dict]:
    """Every aggregation's choice: ``{method: {"solution": index|None, "prediction", "correct"}}``."""
    out: dict[str, dict] = {}
    for method in AGGREGATIONS:
        index = choose(solutions, method)
        prediction = None if index is None else solutions[index].answer
        out[method] = {"solution": index, "prediction": prediction,
                       "correct": bool(prediction is not None and grade(prediction))}
    return out
