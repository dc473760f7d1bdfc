"""Binary metrics and threshold sweeps for equivalence judges (pure functions).

A threshold is chosen one way: the best F1 on labelled pairs, ties going to the higher threshold
(fewer merges: a false merge can cut the only correct path, a missed one only costs compute).
Precision is reported beside it rather than targeted: the target-precision and f1-tolerance picks
were measured and not adopted (docs/experiments/2026-11-27-removed-levers.md). Candidate
thresholds are midpoints between consecutive distinct scores, so whether a
strategy compares with ``>`` (Levenshtein, as in the paper) or ``>=`` never changes the result.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class BinaryMetrics:
    """Accuracy, precision, recall, F1 of "equivalent" (label 1) predictions."""

    accuracy: float
    precision: float
    recall: float
    f1: float
    n: int
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def false_merge_rate(self) -> float:
        """False merges over all non-equivalent pairs: the share of distinct steps a search would
        lose (0 when there are none)."""
        return self.fp / (self.fp + self.tn) if self.fp + self.tn else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return dict(asdict(self), false_merge_rate=self.false_merge_rate)


def binary_metrics(predictions: Sequence[int | bool], labels: Sequence[int]) -> BinaryMetrics:
    """Metrics of predictions against 0/1 labels; precision/recall are 0 when undefined."""
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    tp = sum(1 for p, y in zip(predictions, labels) if p and y == 1)
    fp = sum(1 for p, y in zip(predictions, labels) if p and y != 1)
    fn = sum(1 for p, y in zip(predictions, labels) if not p and y == 1)
    tn = len(labels) - tp - fp - fn
    n = len(labels)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = (tp + tn) / n if n else 0.0
    return BinaryMetrics(accuracy, precision, recall, f1, n, tp, fp, fn, tn)


def spread_by_problem(predictions: Sequence[bool], labels: Sequence[int], problems: Sequence[str], *,
                      resamples: int = 1000, seed: int = 0) -> dict[str, float]:
    """Standard deviation of precision, recall, F1 and the false-merge rate over a bootstrap of
    whole problems (pairs of one problem are not independent): how much a figure on this many
    problems moves from sampling alone."""
    by_problem: dict[str, list[int]] = {}
    for i, key in enumerate(problems):
        by_problem.setdefault(key, []).append(i)
    groups = list(by_problem.values())
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {"precision": [], "recall": [], "f1": [], "false_merge_rate": []}
    for _ in range(resamples):
        idx = [i for _ in groups for i in rng.choice(groups)]
        m = binary_metrics([predictions[i] for i in idx], [labels[i] for i in idx])
        for key in draws:
            draws[key].append(float(getattr(m, key)))
    return {f"{key}_spread": statistics.pstdev(values) for key, values in draws.items()}


@dataclass(frozen=True)
class SweepPoint:
    """Metrics when "equivalent" means ``score >= threshold``."""

    threshold: float
    metrics: BinaryMetrics


def candidate_thresholds(scores: Sequence[float]) -> list[float]:
    """Midpoints between consecutive distinct scores, plus one below all and one above all."""
    distinct = sorted(set(float(s) for s in scores))
    if not distinct:
        return []
    mids = [(a + b) / 2 for a, b in zip(distinct, distinct[1:])]
    return [distinct[0] - 1e-6, *mids, distinct[-1] + 1e-6]


def threshold_sweep(scores: Sequence[float], labels: Sequence[int]) -> list[SweepPoint]:
    """Metrics at every candidate threshold, ascending."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    return [
        SweepPoint(t, binary_metrics([s >= t for s in scores], labels)) for t in candidate_thresholds(scores)
    ]


def average_precision(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Average precision: the precision at each distinct score, weighted by the recall it adds
    (tied scores enter together), as scikit-learn's ``average_precision_score`` computes it.

    Threshold-free: where two judges' F1 differ by less than a threshold's draw, whether their
    *scores* rank equivalent pairs above the rest any better is what this says. 0 with no positive.
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    positives = sum(1 for y in labels if y)
    if positives == 0:
        return 0.0
    by_score: dict[float, list[int]] = {}
    for score, label in zip(scores, labels):
        by_score.setdefault(float(score), []).append(1 if label else 0)
    tp = fp = 0
    total = 0.0
    for score in sorted(by_score, reverse=True):
        group = by_score[score]
        gained = sum(group)
        tp += gained
        fp += len(group) - gained
        total += gained / positives * tp / (tp + fp)
    return total


def pick_threshold(points: Sequence[SweepPoint]) -> SweepPoint:
    """The best-F1 point; ties go to the higher threshold (fewer merges)."""
    if not points:
        raise ValueError("no thresholds to choose from (empty data)")
    best = max(p.metrics.f1 for p in points)
    return max((p for p in points if p.metrics.f1 >= best), key=lambda p: p.threshold)


def calibration_summary(probs: Sequence[float], labels: Sequence[int]) -> dict[str, float] | None:
    """The decision threshold chosen on a calibration split, with its figures, as a judge stores
    them (``equiv_metrics.json``); None when no threshold strictly inside (0, 1) separates any pairs."""
    points = [p for p in threshold_sweep(probs, labels) if 0.0 < p.threshold < 1.0]
    if not points:
        return None
    chosen = pick_threshold(points)
    return _stored_summary(round(float(chosen.threshold), 6), chosen.metrics, len(labels))


def fixed_threshold_summary(probs: Sequence[float], labels: Sequence[int], threshold: float) -> dict[str, float]:
    """The figures of a calibration split at a threshold nobody chose on it (a recipe without
    ``threshold_from_val``), in the keys :func:`calibration_summary` stores: the classifier's
    probabilities decided by :func:`equiv.judge.decide.decide` with nothing but that threshold."""
    from equiv.judge.decide import decide
    from equiv.judge.policy import DecisionPolicy

    policy = DecisionPolicy(threshold=float(threshold), prefilter=None, same_step="off")
    pairs = [("", "")] * len(probs)  # the texts are not read: no shortcut, prefilter, guard or floor
    merged = [v.merged for v in decide(pairs, policy, list(probs))]
    return _stored_summary(float(threshold), binary_metrics(merged, labels), len(labels))


def policy_summary(policy: Any, pairs: Sequence[tuple[str, str]], probs: Sequence[float], labels: Sequence[int],
                   questions: Sequence[str] | None = None) -> tuple[dict[str, float], dict[str, int]]:
    """A policy's figures on labelled pairs (``probs``: the model's, one per pair), every stage in
    force, decided by :func:`equiv.judge.decide.decide`: ``policy_calibration_*`` (and with a guard
    rule on, ``guard_calibration_*`` and the vetoes), and the count per reason."""
    from dataclasses import replace

    from equiv.judge.decide import GUARD_PREFIX, decide, reason_counts

    verdicts = decide(pairs, policy, list(probs), questions)
    m = binary_metrics([v.merged for v in verdicts], labels)
    out = {"policy_calibration_precision": m.precision, "policy_calibration_recall": m.recall,
           "policy_calibration_f1": m.f1}
    counts = reason_counts(verdicts)
    if policy.guard:
        plain = binary_metrics([v.merged for v in decide(pairs, replace(policy, guard=()), list(probs), questions)],
                               labels)
        out.update({"guard_calibration_precision": m.precision, "guard_calibration_recall": m.recall,
                    "guard_calibration_f1": m.f1, "unguarded_calibration_f1": plain.f1,
                    "unguarded_calibration_precision": plain.precision,
                    "guard_calibration_vetoes": float(sum(n for r, n in counts.items() if r.startswith(GUARD_PREFIX)))})
    return out, counts


def choose_threshold(policy: Any, pairs: Sequence[tuple[str, str]], verdicts: Sequence[Any],
                     labels: Sequence[int]) -> SweepPoint:
    """The one calibration step: the best-F1 threshold for ``policy`` on labelled pairs it has
    decided (``verdicts``: :func:`equiv.judge.decide.decide`'s, at any threshold;
    :func:`pick_threshold`), with every other stage of the policy in force. Returns the chosen
    sweep point (``threshold`` and its metrics); use ``policy.with_knobs(threshold=...)``."""
    from equiv.judge.decide import sweep_scores

    scores = sweep_scores(pairs, verdicts, policy)
    # Thresholds live in (0, 1]: a pair a stage kept apart scores 0 and must stay apart.
    points = [p for p in threshold_sweep(scores, labels) if 0.0 < p.threshold <= 1.0]
    if not points:
        raise ValueError("no threshold in (0, 1] separates these pairs")
    return pick_threshold(points)


def _stored_summary(threshold: float, metrics: BinaryMetrics, pairs: int) -> dict[str, float]:
    return {
        "decision_threshold": threshold,
        "calibration_f1": metrics.f1,
        "calibration_precision": metrics.precision,
        "calibration_recall": metrics.recall,
        "calibration_pairs": float(pairs),
    }


@dataclass(frozen=True)
class PrefilterPoint:
    """The best decision threshold when pairs with ratio <= ``prefilter`` are rejected unseen."""

    prefilter: float
    threshold: float
    metrics: BinaryMetrics
    resolved: float  # fraction of pairs the prefilter decides without the model


def prefilter_sweep(
    ratios: Sequence[float],
    probs: Sequence[float],
    labels: Sequence[int],
    prefilters: Sequence[float],
) -> list[PrefilterPoint]:
    """For each prefilter, the threshold :func:`pick_threshold` picks on the remaining pairs.

    ``probs`` must be the model's probabilities for ALL pairs (scored with the prefilter off),
    so one model pass serves the whole grid. A prefiltered pair scores 0 (never equivalent).
    """
    if not len(ratios) == len(probs) == len(labels):
        raise ValueError("ratios, probs and labels must have the same length")
    out = []
    for pf in prefilters:
        scores = [0.0 if r <= pf else p for r, p in zip(ratios, probs)]
        points = [p for p in threshold_sweep(scores, labels) if 0.0 < p.threshold <= 1.0]
        if not points:
            continue
        best = pick_threshold(points)
        resolved = sum(r <= pf for r in ratios) / len(ratios) if ratios else 0.0
        out.append(PrefilterPoint(pf, best.threshold, best.metrics, resolved))
    return out
