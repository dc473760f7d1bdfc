"""Threshold sweeps for pruning strategies: re-exported from :mod:`equiv.judge.calibrate`.

The functions live in the judge layer because ``trainer_cli.py fit --threshold_from_val`` picks
the exported judge's threshold with them, and the judge layer must not import the pruning layer.
"""

from equiv.judge.calibrate import (
    BinaryMetrics,
    PrefilterPoint,
    SweepPoint,
    binary_metrics,
    candidate_thresholds,
    pick_threshold,
    prefilter_sweep,
    spread_by_problem,
    threshold_sweep,
)

__all__ = [
    "BinaryMetrics",
    "PrefilterPoint",
    "SweepPoint",
    "binary_metrics",
    "candidate_thresholds",
    "pick_threshold",
    "prefilter_sweep",
    "spread_by_problem",
    "threshold_sweep",
]
