"""How many generated examples a property test draws (hypothesis' ``max_examples``).

Each property test names the count it was written for (``examples(300)``). The default suite
runs a quarter of it, at least 25: the eight property-test files took 28.3 s of CPU serially
with every example and take 21.0 s with the quarter (imports included; the whole suite is about
210 s of CPU on a 2-core machine where its goal is 100 s of wall time). CI's slow stage
runs the same files with ``EQUIV_HYPOTHESIS=thorough``, which draws every example the test
names, so no generated case a test was written to reach goes unchecked before a merge.
Hypothesis explores fresh examples on every run either way (no example database is kept
between CI runs), so the quarter still finds a regression that is common, and the thorough run
one that is rare.
"""

from __future__ import annotations

import os

THOROUGH = os.environ.get("EQUIV_HYPOTHESIS", "").strip().lower() == "thorough"
QUICK_SHARE = 4  # the default suite draws 1/QUICK_SHARE of the named count
QUICK_FLOOR = 25


def examples(count: int) -> int:
    """``count`` under ``EQUIV_HYPOTHESIS=thorough``; otherwise a quarter of it, at least 25
    (never more than ``count``)."""
    if count < 1:
        raise ValueError(f"a property test draws at least one example, got {count}")
    if THOROUGH:
        return count
    return min(count, max(QUICK_FLOOR, count // QUICK_SHARE))
