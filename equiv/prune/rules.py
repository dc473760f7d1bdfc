"""The rule strategies: ``levenshtein`` and ``formula`` (no model, no forward).

``formula`` is a 0/1 rule (no threshold to choose: the base class's 0.5 reads its 0.0/1.0
right); ``levenshtein`` is the paper's "ratio > 0.95" baseline with a strict
threshold.

Each rule's score of one pair is its :meth:`score` (a plain function of the two texts), so the
cross-validation yardstick (:mod:`equiv.prune.yardstick`) scores the baselines it takes from the
strategy registry exactly as the strategies do.
"""

from __future__ import annotations

from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge, Pair, check_threshold
from equiv.text.formula import formulas_equivalent
from equiv.text.levenshtein import levenshtein_ratio

DEFAULT_LEVENSHTEIN_THRESHOLD = 0.95  # the paper's "Levenshtein ratio > 0.95" baseline


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

    @staticmethod
    def score(a: str, b: str) -> float:
        """The Levenshtein ratio of the two texts."""
        return levenshtein_ratio(a, b)

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        return [(self.score(a, b),) * 2 for a, b in pairs]


class FormulaJudge(CachedJudge):
    """Equivalent iff both steps compute the same normalised formulas (see :mod:`.formula`)."""

    name = "formula"

    @staticmethod
    def score(a: str, b: str) -> float:
        """1 when both steps compute the same normalised formulas, else 0."""
        return 1.0 if formulas_equivalent(a, b) else 0.0

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        return [(self.score(a, b),) * 2 for a, b in pairs]
