"""Metrics and threshold sweeps (pure functions behind ``pairs --sweep``)."""

from __future__ import annotations

import pytest

from equiv.judge.calibrate import (
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


def test_pick_best_f1_ties_to_the_higher_threshold():
    scores = [0.95, 0.9, 0.85, 0.8, 0.75, 0.6, 0.5]
    labels = [1, 1, 0, 1, 1, 0, 0]
    points = threshold_sweep(scores, labels)
    best = pick_threshold(points)
    assert 0.6 < best.threshold < 0.75 and best.metrics.f1 == pytest.approx(8 / 9)
    # F1 2/3 both above 0.8 (one merge, right) and below 0.6 (four merges, two wrong): the higher
    # threshold, fewer merges, is taken
    tied = pick_threshold(threshold_sweep([0.9, 0.8, 0.7, 0.6], [1, 0, 0, 1]))
    assert tied.metrics.f1 == pytest.approx(2 / 3) and 0.8 < tied.threshold < 0.9 and tied.metrics.fp == 0
    with pytest.raises(ValueError, match="empty"):
        pick_threshold([])
    with pytest.raises(TypeError):  # the target-precision and f1-tolerance picks were removed (#45)
        pick_threshold(points, target_precision=1.0)  # type: ignore[call-arg]


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
