"""Failure-mode analysis (paper Table 11): Pearson r and p-values, the per-problem points, and
``compare --analysis`` / the report on real run directories of the ``eval`` CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from equiv.report.analysis import PAIRS, Point, betainc, correlations, pearson, pearson_fallback, points
from equiv.report.compare import compare_main


def test_fallback_p_value_matches_closed_forms():
    # df = 1 (n = 3): p = 1 - 2/pi * atan|t|;  df = 2 (n = 4): p = 1 - |t| / sqrt(2 + t^2)
    for xs, ys in (([0, 1, 2], [0.3, 0.1, 2.0]), ([0, 1, 2, 3], [1.0, 0.2, 1.5, 1.9]), ([1, 2, 3, 4], [4, 1, 1, 0])):
        r, p = pearson_fallback(xs, ys)
        df = len(xs) - 2
        t = abs(r) * math.sqrt(df / (1 - r * r))
        expected = 1 - 2 / math.pi * math.atan(t) if df == 1 else 1 - t / math.sqrt(2 + t * t)
        assert p == pytest.approx(expected, rel=1e-9)
    assert betainc(2.0, 3.0, 0.0) == 0.0 and betainc(2.0, 3.0, 1.0) == 1.0
    assert betainc(1.0, 1.0, 0.3) == pytest.approx(0.3)  # I_x(1, 1) = x


def test_pearson_agrees_with_the_fallback_and_handles_degenerate_input():
    xs = [0.1, 0.4, 0.35, 0.8, 0.9, 0.2, 0.55]
    ys = [1.0, 2.5, 2.0, 3.9, 4.4, 1.1, 3.0]
    r, p = pearson(xs, ys)
    rf, pf = pearson_fallback(xs, ys)
    assert r == pytest.approx(rf) and p == pytest.approx(pf, rel=1e-6) and r > 0.9 and p < 0.01
    assert pearson([1, 2], [3, 4]) == (None, None)
    assert pearson([1, 1, 1], [1, 2, 3]) == (None, None)
    with pytest.raises(ValueError):
        pearson([1, 2, 3], [1, 2])


def rec(pid, tokens, pruned=0, candidates=10, correct=True, path=2, seed=0, error=None):
    return {"id": pid, "seed": seed, "generated_tokens": tokens, "pruned": pruned, "candidates": candidates,
            "correct": correct, "path": ["s"] * path, "error": error}


def test_points_pair_the_same_problem_and_seed():
    base = {("a", 0): rec("a", 100), ("b", 0): rec("b", 200), ("c", 0): rec("c", 50), ("e", 0): rec("e", 10)}
    pruned = {("a", 0): rec("a", 60, pruned=4, correct=False, path=3), ("b", 0): rec("b", 200, candidates=0),
              ("c", 0): rec("c", 50, error="boom"), ("d", 0): rec("d", 1)}
    pts = points(base, pruned)
    assert [p.key for p in pts] == [("a", 0), ("b", 0)]
    a, b = pts
    assert (a.pruning_rate, a.token_saving, a.depth, a.tokens, a.failed) == (0.4, pytest.approx(0.4), 3.0, 60.0, True)
    assert (b.pruning_rate, b.token_saving, b.failed) == (0.0, 0.0, False)


def test_correlations_cover_every_pair_overall_and_in_failures():
    pts = [Point((str(i), 0), i / 10, i / 20, float(i % 3), 100.0 - i, failed=i % 2 == 0) for i in range(8)]
    corr = correlations(pts)
    assert len(corr) == 2 * len(PAIRS)
    by = {(c.x, c.y, c.subset): c for c in corr}
    assert by[("pruning_rate", "token_saving", "all")].r == pytest.approx(1.0)
    assert by[("pruning_rate", "tokens", "all")].r == pytest.approx(-1.0)
    assert by[("pruning_rate", "depth", "failures")].n == 4


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """A baseline and a pruned MCTS run of 12 problems (the report's correlations need 10), made by the real ``eval`` CLI on the
    scripted engines (tests/helpers/runs.py): real run directories in a fraction of a second. The
    search on real tiny models is tested in tests/test_search_e2e.py; here it is the analysis."""
    from tests.helpers.runs import runner_runs

    return runner_runs(tmp_path_factory.mktemp("analysis"), ("mcts",), n=12)


def test_compare_analysis_on_tiny_model_runs(tiny_runs, capsys):
    base, pruned = tiny_runs
    assert compare_main([str(base), str(pruned), "--analysis", "--json"]) == 0
    (analysis,) = json.loads(capsys.readouterr().out)["analysis"]
    assert analysis["run"] == str(pruned) and analysis["problems"] == 12
    assert len(analysis["correlations"]) == 2 * len(PAIRS)
    # recompute one pair from the records by hand
    recs = {r["id"]: r for r in map(json.loads, (pruned / "results.jsonl").read_text().splitlines())}
    brecs = {r["id"]: r for r in map(json.loads, (base / "results.jsonl").read_text().splitlines())}
    ids = sorted(recs)
    assert any(recs[i]["pruned"] for i in ids)  # the pruned run pruned: the rates are not all zero
    saving = [1 - recs[i]["generated_tokens"] / brecs[i]["generated_tokens"] for i in ids]
    tokens = [float(recs[i]["generated_tokens"]) for i in ids]
    r, _ = pearson(saving, tokens)
    (row,) = [c for c in analysis["correlations"] if (c["x"], c["y"], c["subset"]) == ("token_saving", "tokens", "all")]
    assert r is not None and row["r"] == pytest.approx(r) and 0 <= row["p"] <= 1
    assert compare_main([str(base), str(pruned), "--analysis"]) == 0
    text = capsys.readouterr().out
    assert "failure case(s)" in text and "pruning_rate ~ token_saving" in text


def test_analysis_needs_two_runs(tiny_runs, capsys):
    with pytest.raises(SystemExit) as exc:
        compare_main([str(tiny_runs[0]), "--analysis"])
    assert exc.value.code == 2 and "needs a baseline run" in capsys.readouterr().err


def test_report_has_the_analysis_section(tiny_runs, tmp_path):
    from equiv.report.build import build_report

    files = build_report([str(d) for d in tiny_runs], tmp_path / "report", max_trees=2)
    page = Path(files.html).read_text()
    assert 'id="analysis"' in page and "pruning_rate ~ token_saving" in page
    one = build_report([str(tiny_runs[0])], tmp_path / "one", max_trees=1)
    assert 'id="analysis"' not in Path(one.html).read_text()
