"""The rule strategies: ``exact``, ``levenshtein`` and ``formula`` (no model, no forward).

``exact`` and ``formula`` are 0/1 rules (no threshold to choose: the base class's 0.5 reads
their 0.0/1.0 right); ``levenshtein`` is the paper's "ratio > 0.95" baseline with a strict
threshold.
"""

from __future__ import annotations

from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge, Pair, check_threshold
from equiv.text.formula import formulas_equivalent
from equiv.text.levenshtein import levenshtein_ratio

DEFAULT_LEVENSHTEIN_THRESHOLD = 0.95  # the paper's "Levenshtein ratio > 0.95" baseline


class ExactJudge(CachedJudge):
    """Equivalent iff the texts are equal after whitespace normalisation."""

    name = "exact"

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        return [(0.0, 0.0)] * len(pairs)  # whitespace-equal pairs were resolved by the shortcut


class LevenshteinJudge(CachedJudge):
    """Equivalent iff ``1 - distance/max(len) > threshold`` (strict, as in the paper: the policy's
    ``compare`` is ``>``); the probability is the ratio itself."""

    name = "levenshtein"
    # the baseline is the ratio alone, even for whitespace-only differences: no same-step shortcut
    default_policy = DecisionPolicy(threshold=DEFAULT_LEVENSHTEIN_THRESHOLD, prefilter=None, same_step="off",
                                    compare=">")

    def __init__(self, threshold: float | None = None) -> None:
        super().__init__()
        self.threshold = check_threshold(DEFAULT_LEVENSHTEIN_THRESHOLD if threshold is None else threshold, self.name)

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        out = []
        for a, b in pairs:
            ratio = levenshtein_ratio(a, b)
            out.append((ratio, ratio))
        return out


class FormulaJudge(CachedJudge):
    """Equivalent iff both steps compute the same normalised formulas (see :mod:`.formula`)."""

    name = "formula"

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        return [(1.0, 1.0) if formulas_equivalent(a, b) else (0.0, 0.0) for a, b in pairs]
