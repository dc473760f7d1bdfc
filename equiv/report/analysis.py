"""Failure-mode analysis (paper Table 11): how pruning relates to savings, depth and cost.

For a baseline run (no pruning) and a pruned run on the same problems and seeds, each shared
``(id, seed)`` gives one point:

- ``pruning_rate``: candidates the pruner merged away / candidates generated (pruned run);
- ``token_saving``: ``1 - tokens(pruned) / tokens(baseline)`` on that problem and seed (a saving
  of 0.3 = 30% fewer generated tokens; negative when pruning cost tokens);
- ``depth``: the deepest node of the pruned run's saved tree (``trees/``), else the number of
  steps on its chosen path;
- ``tokens``: generated tokens of the pruned run.

:func:`correlations` computes Pearson's r with a two-sided p-value for every pair of these four,
over all points and over the *failure cases* (points where the pruned run's answer is wrong).
The p-value is scipy's when scipy is installed, else the same t-test computed here (Student's t
with n - 2 degrees of freedom through the regularised incomplete beta function). A pair with
fewer than 3 points or a constant side has no r (``None``).

Pure functions over records: ``search_cli.py compare --analysis`` and the HTML report call them.
The report shows a correlation only over :data:`MIN_POINTS` problems or more: over the tour's 3
problems Pearson's r is +-1.000 with p = 0 by arithmetic alone (two free points after the mean),
which reads as a finding and is none; the page says why the table is left out instead.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from equiv.rundir import keyed

VARIABLES = ("pruning_rate", "token_saving", "depth", "tokens")
MIN_POINTS = 10
"""The fewest problems (or failure cases) the report computes a correlation over. Below it r is
noise: at 10 points |r| must exceed 0.63 to reach p < 0.05, at 3 points any two variables give
|r| near 1."""
PAIRS = tuple((a, b) for i, a in enumerate(VARIABLES) for b in VARIABLES[i + 1 :])


@dataclass(frozen=True)
class Point:
    """One problem and seed of the pruned run, against the same problem and seed of the baseline."""

    key: tuple[str, int]
    pruning_rate: float
    token_saving: float
    depth: float
    tokens: float
    failed: bool
    base_failed: bool = False  # the baseline's answer to the same problem and seed is wrong too


@dataclass(frozen=True)
class Correlation:
    """Pearson's r and its two-sided p-value for one pair over ``n`` points (None: undefined)."""

    x: str
    y: str
    subset: str  # "all" or "failures"
    n: int
    r: float | None
    p: float | None


# -- statistics -------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def pearson_fallback(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Pearson's r and the two-sided p-value of the t-test, without scipy."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    df = n - 2
    if abs(r) >= 1.0:
        return r, 0.0
    t2 = r * r * df / (1.0 - r * r)
    return r, betainc(df / 2.0, 0.5, df / (df + t2))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> tuple[float | None, float | None]:
    """``(r, p)``; ``(None, None)`` with fewer than 3 points or a constant variable."""
    if len(xs) != len(ys):
        raise ValueError(f"pearson needs equal lengths, got {len(xs)} and {len(ys)}")
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None, None
    try:
        from scipy.stats import pearsonr
    except ImportError:
        return pearson_fallback(xs, ys)
    result = pearsonr(list(xs), list(ys))
    return float(result[0]), float(result[1])


# -- points from run records ----------------------------------------------------------------------
def tree_depth(run_dir: str | Path, record: Mapping[str, Any]) -> float:
    """Deepest node of the record's saved tree, else the length of its chosen path."""
    name = record.get("tree")
    if name:
        path = Path(run_dir) / str(name)
        try:
            nodes = json.loads(path.read_text(encoding="utf-8")).get("nodes") or []
            if nodes:
                return float(max(int(n.get("depth") or 0) for n in nodes))
        except (OSError, ValueError, TypeError, AttributeError):
            pass
    return float(len(record.get("path") or []))


def points(
    baseline: Mapping[tuple[str, int], Mapping[str, Any]],
    pruned: Mapping[tuple[str, int], Mapping[str, Any]],
    depths: Mapping[tuple[str, int], float] | None = None,
) -> list[Point]:
    """One :class:`Point` per ``(id, seed)`` both runs hold without error, sorted by key.

    ``depths`` (key -> tree depth of the pruned run) defaults to the length of each chosen path.
    """
    out = []
    for key in sorted(set(baseline) & set(pruned)):
        base, rec = baseline[key], pruned[key]
        if base.get("error") or rec.get("error"):
            continue
        base_tokens = float(base.get("generated_tokens") or 0)
        tokens = float(rec.get("generated_tokens") or 0)
        if base_tokens <= 0:
            continue
        candidates = float(rec.get("candidates") or 0)
        rate = float(rec.get("pruned") or 0) / candidates if candidates > 0 else 0.0
        depth = depths[key] if depths and key in depths else float(len(rec.get("path") or []))
        out.append(Point(key, rate, 1.0 - tokens / base_tokens, depth, tokens, not bool(rec.get("correct")),
                         not bool(base.get("correct"))))
    return out


def correlations(pts: Iterable[Point]) -> list[Correlation]:
    """r and p for every pair of :data:`VARIABLES`, over all points and over the failures."""
    pts = list(pts)
    out = []
    for subset, chosen in (("all", pts), ("failures", [p for p in pts if p.failed])):
        for x, y in PAIRS:
            r, p = pearson([getattr(q, x) for q in chosen], [getattr(q, y) for q in chosen])
            out.append(Correlation(x, y, subset, len(chosen), r, p))
    return out


def analyse_runs(
    baseline_dir: str | Path,
    baseline: Mapping[tuple[str, int], Mapping[str, Any]],
    pruned_dir: str | Path,
    pruned: Mapping[tuple[str, int], Mapping[str, Any]],
) -> tuple[list[Point], list[Correlation]]:
    """Points (with tree depths from ``pruned_dir``) and their correlations."""
    depths = {key: tree_depth(pruned_dir, rec) for key, rec in pruned.items()}
    pts = points(baseline, pruned, depths)
    return pts, correlations(pts)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_correlations(name: str, pts: Sequence[Point], corr: Sequence[Correlation]) -> str:
    """A plain-text table: one line per pair, overall and in failure cases."""
    lines = [f"{name}: {answer_counts(pts, 'vs the baseline')}"]
    by = {(c.x, c.y, c.subset): c for c in corr}
    header = ("pair", "r (all)", "p (all)", "r (failures)", "p (failures)")
    rows = []
    for x, y in PAIRS:
        a, f = by[(x, y, "all")], by[(x, y, "failures")]
        rows.append((f"{x} ~ {y}", _fmt(a.r, "+.3f"), _fmt(a.p, ".3g"), _fmt(f.r, "+.3f"), _fmt(f.p, ".3g")))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def correlations_json(pts: Sequence[Point], corr: Sequence[Correlation]) -> dict[str, Any]:
    return {
        "problems": len(pts),
        "failures": sum(p.failed for p in pts),
        "correlations": [c.__dict__ for c in corr],
    }


def answer_counts(pts: Sequence[Point], against: str = "against the baseline") -> str:
    """How many problems, and who answered them wrong, in words that match the two runs: "3
    problem(s) against the baseline, 3 failure case(s) (pruned run wrong; the baseline wrong on 3
    of them too, so pruning lost 0)"."""
    fails = sum(p.failed for p in pts)
    both = sum(p.failed and p.base_failed for p in pts)
    return (f"{len(pts)} problem(s) {against}, {fails} failure case(s) (pruned run wrong; the baseline wrong on "
            f"{both} of them too, so pruning lost {fails - both})")


def correlations_html(name: str, pts: Sequence[Point], corr: Sequence[Correlation]) -> str:
    """The report's version of :func:`format_correlations` (an HTML table), with the statistics
    only where the sample supports them (:data:`MIN_POINTS`): fewer problems leave the table out,
    fewer failure cases leave out its failure columns, and the page says why."""
    from html import escape

    by = {(c.x, c.y, c.subset): c for c in corr}
    fails = sum(p.failed for p in pts)
    counts = f"<p class=muted>{escape(name)}: {escape(answer_counts(pts))}</p>"
    if len(pts) < MIN_POINTS:
        return counts + (f'<p class="left-out">Correlations left out: {len(pts)} problem(s) are fewer than '
                         f"{MIN_POINTS}. Over so few points Pearson's r says nothing (over 3 it is near +-1 "
                         "whatever the variables); run more problems for this table.</p>")
    with_failures = fails >= MIN_POINTS
    rows = []
    for x, y in PAIRS:
        a, f = by[(x, y, "all")], by[(x, y, "failures")]
        cells = [f"{x} ~ {y}", _fmt(a.r, "+.3f"), _fmt(a.p, ".3g")]
        if with_failures:
            cells += [_fmt(f.r, "+.3f"), _fmt(f.p, ".3g")]
        rows.append("<tr>" + "".join(
            f"<td>{escape(c)}</td>" if i == 0 else f"<td class=num>{escape(c)}</td>" for i, c in enumerate(cells)
        ) + "</tr>")
    names = ("pair", "r (all)", "p (all)") + (("r (failures)", "p (failures)") if with_failures else ())
    head = "".join(f"<th>{h}</th>" for h in names)
    note = "" if with_failures else (f'<p class="left-out">The failure-case columns are left out: {fails} failure '
                                     f"case(s) are fewer than {MIN_POINTS}.</p>")
    return (
        counts + note
        + f'<table class="analysis"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def record_map(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], Mapping[str, Any]]:
    """Records keyed by ``(id, seed)`` as ``compare`` keys them (:func:`equiv.rundir.keyed`)."""
    return dict(keyed(dict(r) for r in records))
