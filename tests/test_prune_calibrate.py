"""Metrics and threshold sweeps (pure functions behind ``pairs --sweep``)."""

from __future__ import annotations

import pytest

from equiv.prune.calibrate import (
    binary_metrics,
    candidate_thresholds,
    pick_threshold,
    prefilter_sweep,
    threshold_sweep,
)


def test_binary_metrics_by_hand():
    m = binary_metrics([1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
    assert (m.tp, m.fp, m.fn, m.tn) == (2, 1, 1, 1)
    assert m.precision == pytest.approx(2 / 3) and m.recall == pytest.approx(2 / 3)
    assert m.accuracy == pytest.approx(3 / 5) and m.f1 == pytest.approx(2 / 3)
    none = binary_metrics([0, 0], [1, 0])
    assert none.precision == 0.0 and none.f1 == 0.0
    with pytest.raises(ValueError):
        binary_metrics([1], [1, 0])


def test_candidates_are_midpoints_so_strictness_never_matters():
    assert candidate_thresholds([0.2, 0.6, 0.6, 1.0])[1:-1] == pytest.approx([0.4, 0.8])
    assert candidate_thresholds([]) == []


def test_pick_best_f1_and_target_precision():
    scores = [0.95, 0.9, 0.85, 0.8, 0.75, 0.6, 0.5]
    labels = [1, 1, 0, 1, 1, 0, 0]
    points = threshold_sweep(scores, labels)
    best = pick_threshold(points)
    assert 0.6 < best.threshold < 0.75 and best.metrics.f1 == pytest.approx(8 / 9)
    precise = pick_threshold(points, target_precision=1.0)
    assert 0.85 < precise.threshold < 0.9 and precise.metrics.recall == 0.5
    unreachable = pick_threshold(threshold_sweep([0.9, 0.1], [0, 1]), target_precision=1.0)
    assert unreachable.metrics.precision < 1.0  # reported, not hidden: the CLI warns
    with pytest.raises(ValueError, match="empty"):
        pick_threshold([])


def test_prefilter_sweep_rejects_low_ratio_pairs_unseen():
    ratios = [0.9, 0.8, 0.6, 0.55, 0.4]
    probs = [0.9, 0.2, 0.8, 0.7, 0.9]
    labels = [1, 0, 1, 0, 0]
    rows = {r.prefilter: r for r in prefilter_sweep(ratios, probs, labels, [0.0, 0.5, 0.58])}
    assert rows[0.0].resolved == 0.0 and rows[0.5].resolved == pytest.approx(0.2)
    # with prefilter 0.58 the two false positives below it are gone: a perfect split remains
    assert rows[0.58].metrics.f1 == 1.0 and rows[0.58].resolved == pytest.approx(0.4)
    assert rows[0.0].metrics.f1 < 1.0


def test_calibration_summary_is_the_best_f1_threshold_and_its_figures():
    from equiv.judge.calibrate import calibration_summary

    summary = calibration_summary([0.1, 0.4, 0.6, 0.9], [0, 0, 1, 1])
    assert summary == {"decision_threshold": 0.5, "calibration_f1": 1.0, "calibration_precision": 1.0,
                       "calibration_recall": 1.0, "calibration_pairs": 4.0}
    assert calibration_summary([], []) is None  # no pairs: no threshold to choose


def test_an_f1_tolerance_takes_the_highest_threshold_on_the_flat_top():
    """Where the F1 curve is flat, the argmax is decided by a pair or two; within the tolerance the
    highest threshold (fewest merges) is taken, and a zero tolerance keeps the plain best F1."""
    scores = [0.95, 0.9, 0.85, 0.8, 0.75, 0.6, 0.5]
    labels = [1, 1, 0, 1, 1, 0, 0]
    points = threshold_sweep(scores, labels)  # F1 8/9 at 0.675, 0.75 at 0.775, 0.571 at 0.825, 0.667 at 0.875
    assert pick_threshold(points, f1_tolerance=0.0).threshold == pick_threshold(points).threshold
    flat = pick_threshold(points, f1_tolerance=0.15)
    assert 0.75 < flat.threshold < 0.8 and flat.metrics.f1 == pytest.approx(0.75)
    assert 0.85 < pick_threshold(points, f1_tolerance=0.25).threshold < 0.9  # the highest within, not the next
    assert pick_threshold(points, f1_tolerance=0.1).threshold == pick_threshold(points).threshold  # 0.75 < 8/9 - 0.1
    assert pick_threshold(points, target_precision=1.0, f1_tolerance=0.5).metrics.recall == 0.5  # a target ignores it
    with pytest.raises(ValueError, match="f1_tolerance"):
        pick_threshold(points, f1_tolerance=1.0)


def test_average_precision_by_hand_with_ties_and_no_positive():
    from equiv.judge.calibrate import average_precision

    # ranked 1 0 1 0: precision 1 at the first positive, 2/3 at the second
    assert average_precision([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision([0.1, 0.2, 0.3], [0, 1, 1]) == 1.0
    # tied scores enter together: one threshold merges both, precision 1/2
    assert average_precision([0.5, 0.5], [1, 0]) == 0.5
    assert average_precision([0.5, 0.4], [0, 0]) == 0.0
    with pytest.raises(ValueError):
        average_precision([0.5], [1, 0])
