"""Every property test's example count goes through ``tests.helpers.examples.examples``, so the
default suite draws a quarter of it and CI's thorough stage (``EQUIV_HYPOTHESIS=thorough``, which
selects the files that import hypothesis) draws it all; a bare ``max_examples=300`` would make
the default suite pay for the thorough count, and one in a file CI's grep misses would never run
thoroughly."""

from __future__ import annotations

import re

import pytest

from tests.helpers import examples as examples_module
from tests.helpers.paths import REPO_ROOT

TESTS = sorted(p for p in (REPO_ROOT / "tests").glob("test_*.py") if p.name != "test_property_counts.py")


def test_every_example_count_goes_through_the_helper_in_a_file_ci_selects():
    bare, unselected = [], []
    for path in TESTS:
        text = path.read_text(encoding="utf-8")
        for line_no, line in enumerate(text.splitlines(), 1):
            if re.search(r"max_examples\s*=\s*\d", line):
                bare.append(f"{path.name}:{line_no}")
        if "max_examples" in text and not re.search(r"^from hypothesis", text, re.M):
            unselected.append(path.name)
    assert not bare, f"wrap these counts in examples(...): {bare}"
    assert not unselected, f"CI's thorough stage selects files by '^from hypothesis': {unselected}"


def test_the_default_suite_draws_a_quarter_at_least_25_and_thorough_draws_all(monkeypatch):
    monkeypatch.setattr(examples_module, "THOROUGH", False)
    assert [examples_module.examples(n) for n in (10, 60, 100, 300, 400)] == [10, 25, 25, 75, 100]
    monkeypatch.setattr(examples_module, "THOROUGH", True)
    assert [examples_module.examples(n) for n in (10, 60, 300)] == [10, 60, 300]
    with pytest.raises(ValueError, match="at least one example"):
        examples_module.examples(0)
