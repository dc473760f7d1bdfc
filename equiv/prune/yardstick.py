"""The cross-validation table: out-of-fold scores -> precision, recall, F1 and false merges per fold.

Reads the ``oof.jsonl`` of :mod:`equiv.prune.crossval` (one row per pair and fold part) and scores
each *decision policy* per fold, so every figure comes with its spread over folds:

- ``formula`` / ``levenshtein`` -- the rules (no training; the same pairs, for comparison);
- ``judge`` -- each fold's export as ``--strategy model`` uses it (hybrid combiner when stored), at
  its stored threshold; ``raw`` -- its plain classifier at the stored ``decision_threshold``;
- ``+guard`` -- the same with the claim guard (:mod:`equiv.text.claims`) vetoing merges;
- ``@P`` -- the threshold chosen again on that fold's *calibration* rows (the fit's own calibration
  split, never the held-out fold) as the highest-recall threshold reaching precision ``P``;
  ``@f1-T`` -- likewise, the highest threshold whose F1 there is within ``T`` of the best
  (``fit --threshold_f1_tolerance T``; the guard is applied after the pick, as the fit does);
- ``@tT`` -- a fixed threshold ``T`` for every fold, nothing chosen on the calibration rows (``fit
  --threshold_from_val false --model.decision_threshold T``; the guard applied after, as ever);
- ``+floorS`` -- the same with the statement floor ``S``: a pair of steps that both compute
  nothing merges only at probability ``S`` or above (``fit --statement_threshold S``,
  :func:`equiv.text.claims.below_statement_floor`; applied after the pick, as the judge does).
  For ``raw`` this is honest: the classifier never trained on those rows. For ``judge`` (the
  hybrid) it is slightly optimistic: its combiner was fitted on them.

The false-merge rate is false merges over all non-equivalent pairs: the share of distinct sibling
steps a search would lose. Pure functions over rows; no model is loaded.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from equiv.errors import InputError
from equiv.judge.calibrate import (BinaryMetrics, average_precision, binary_metrics, pick_threshold, spread_by_problem,
                                   threshold_sweep)
from equiv.rundir.io import read_json_lines
from equiv.text.claims import below_statement_floor, claim_check
from equiv.text.formula import formulas_equivalent
from equiv.text.levenshtein import levenshtein_ratio

METRICS = ("precision", "recall", "f1", "false_merge_rate")
DEFAULT_TARGETS = (0.95,)
DEFAULT_F1_TOLERANCES = (0.005,)
DEFAULT_STATEMENT_FLOORS = (0.9,)  # the recipe's statement_threshold (configs/gsm8k_equiv.yaml)
DEFAULT_FIXED_THRESHOLDS = (0.5,)  # the classifier's own boundary: fit's decision_threshold without threshold_from_val
Row = dict[str, Any]


def read_oof(path: str | Path) -> list[Row]:
    """The rows of an ``oof.jsonl`` (each needs fold, label, prob, threshold, raw_prob, raw_threshold)."""
    need = ("fold", "label", "prob", "threshold", "raw_prob", "raw_threshold", "sentence1", "sentence2")
    found, _ = read_json_lines(path)
    for number, row in found:
        for name in need:
            if name not in row:
                raise InputError("missing", path=path, line=number, field=name)
    rows = [row for _, row in found]
    if not rows:
        raise InputError("holds no rows", path=path)
    return rows


def vetoed(row: Row) -> bool:
    """Whether the claim guard vetoes this pair (cached on the row)."""
    if "_veto" not in row:
        row["_veto"] = claim_check(row["sentence1"], row["sentence2"], row.get("question") or "").veto
    return bool(row["_veto"])


def metrics_of(predictions: Sequence[bool], labels: Sequence[int]) -> dict[str, float]:
    m: BinaryMetrics = binary_metrics(predictions, labels)
    return {"precision": m.precision, "recall": m.recall, "f1": m.f1, "false_merge_rate": m.false_merge_rate,
            "tp": m.tp, "fp": m.fp, "fn": m.fn, "tn": m.tn}


def _guarded(score: float, row: Row, guard: bool) -> float:
    return 0.0 if guard and vetoed(row) else score


def _repicked(key: str, guard: bool, target: float | None = None, tolerance: float = 0.0,
              guard_calibration: bool = True) -> Callable[[list[Row], list[Row]], list[bool]]:
    """Pick the threshold again on the fold's calibration rows (``pick_threshold(target,
    tolerance)``), then decide its test rows. ``guard_calibration``: sweep the guarded scores (the
    ``@P`` policies: a precision target for the guarded policy) or the judge's own (``@f1-T``: as
    ``fit`` picks, the guard applied after)."""
    def decide(test: list[Row], calibration: list[Row]) -> list[bool]:
        if not calibration:
            raise InputError("needs calibration rows (part: calibration) in oof.jsonl", field="part")
        scores = [_guarded(r[key], r, guard and guard_calibration) for r in calibration]
        points = [p for p in threshold_sweep(scores, [r["label"] for r in calibration]) if 0.0 < p.threshold <= 1.0]
        threshold = pick_threshold(points, target, tolerance).threshold
        return [_guarded(r[key], r, guard) >= threshold for r in test]
    return decide


def _stored(key: str, threshold_key: str, guard: bool) -> Callable[[list[Row], list[Row]], list[bool]]:
    return lambda test, _: [_guarded(r[key], r, guard) >= r[threshold_key] for r in test]


def _fixed(key: str, threshold: float) -> Callable[[list[Row], list[Row]], list[bool]]:
    """The guarded ``key`` score at ``threshold`` in every fold (the calibration rows unused)."""
    return lambda test, _: [_guarded(r[key], r, True) >= threshold for r in test]


def _floored(decide: Callable[[list[Row], list[Row]], list[bool]], key: str, floor: float
             ) -> Callable[[list[Row], list[Row]], list[bool]]:
    """``decide``, then the statement floor on the rows' ``key`` scores."""
    def floored(test: list[Row], calibration: list[Row]) -> list[bool]:
        return [merge and not below_statement_floor(r["sentence1"], r["sentence2"], r[key], floor)
                for r, merge in zip(test, decide(test, calibration))]
    return floored


def policies(targets: Sequence[float] = DEFAULT_TARGETS,
             tolerances: Sequence[float] = DEFAULT_F1_TOLERANCES,
             floors: Sequence[float] = DEFAULT_STATEMENT_FLOORS,
             fixed: Sequence[float] = DEFAULT_FIXED_THRESHOLDS) -> dict[str, Callable[[list[Row], list[Row]], list[bool]]]:
    """Name -> decision function ``(test rows, calibration rows) -> merge or not`` per test row."""
    out: dict[str, Callable[[list[Row], list[Row]], list[bool]]] = {
        "formula": lambda test, _: [formulas_equivalent(r["sentence1"], r["sentence2"]) for r in test],
        "formula+guard": lambda test, _: [formulas_equivalent(r["sentence1"], r["sentence2"]) and not vetoed(r)
                                          for r in test],
        "levenshtein 0.95": lambda test, _: [levenshtein_ratio(r["sentence1"], r["sentence2"]) > 0.95 for r in test],
        "judge": _stored("prob", "threshold", False),
        "judge+guard": _stored("prob", "threshold", True),
        "raw": _stored("raw_prob", "raw_threshold", False),
        "raw+guard": _stored("raw_prob", "raw_threshold", True),
    }
    for target in targets:
        out[f"raw+guard@{target:g}"] = _repicked("raw_prob", True, target)
        out[f"judge+guard@{target:g}"] = _repicked("prob", True, target)
        out[f"judge@{target:g}"] = _repicked("prob", False, target)
    for tolerance in tolerances:
        out[f"raw+guard@f1-{tolerance:g}"] = _repicked("raw_prob", True, tolerance=tolerance, guard_calibration=False)
        out[f"judge+guard@f1-{tolerance:g}"] = _repicked("prob", True, tolerance=tolerance, guard_calibration=False)
        for floor in floors:
            out[f"raw+guard+floor{floor:g}@f1-{tolerance:g}"] = _floored(
                out[f"raw+guard@f1-{tolerance:g}"], "raw_prob", floor)
    for threshold in fixed:
        for floor in floors:
            out[f"raw+guard+floor{floor:g}@t{threshold:g}"] = _floored(_fixed("raw_prob", threshold), "raw_prob", floor)
    return out


def _decided(rows: Iterable[Row], decide: Callable[[list[Row], list[Row]], list[bool]]
             ) -> list[tuple[list[Row], list[bool]]]:
    """Per fold (in fold order), its held-out (``test``) rows and ``decide``'s verdicts on them,
    the fold's ``calibration`` rows feeding ``decide``; folds without held-out rows are left out."""
    by_fold: dict[int, dict[str, list[Row]]] = {}
    for row in rows:
        by_fold.setdefault(int(row["fold"]), {"test": [], "calibration": []})[row.get("part", "test")].append(row)
    return [(parts["test"], decide(parts["test"], parts["calibration"]))
            for _, parts in sorted(by_fold.items()) if parts["test"]]


def per_fold(rows: Iterable[Row], decide: Callable[[list[Row], list[Row]], list[bool]]) -> list[dict[str, float]]:
    """One metrics dict per fold (test rows only; calibration rows feed ``decide``)."""
    return [metrics_of(verdicts, [int(r["label"]) for r in test]) for test, verdicts in _decided(rows, decide)]


def source_file(row: Row) -> str:
    """The resolved path of the file a row's pair came from (``source`` is ``PATH:LINE``)."""
    return str(Path(str(row.get("source", "")).rsplit(":", 1)[0]).resolve())


def split_by_source(rows: list[Row], files: Sequence[str | Path]) -> dict[str, list[Row]]:
    """The rows as one group per file of ``files`` and one for the rest (``"recipe"``: the
    recipe's own pairs), so a pooled distribution (solution pairs with sibling pairs from search)
    is also scored one distribution at a time. Only the held-out (``test``) rows are split; every
    group keeps all calibration rows, on which a threshold is picked as the pooled fit would."""
    wanted = {str(Path(f).resolve()): str(f) for f in files}
    calibration = [r for r in rows if r.get("part") == "calibration"]
    groups: dict[str, list[Row]] = {"recipe": [], **{name: [] for name in wanted.values()}}
    for row in rows:
        if row.get("part", "test") == "test":
            groups[wanted.get(source_file(row), "recipe")].append(row)
    return {name: group + calibration for name, group in groups.items() if group}


def _applicable(rows: list[Row], targets: Sequence[float]
                ) -> Iterator[tuple[str, Callable[[list[Row], list[Row]], list[bool]]]]:
    """The policies these rows can score: a re-picked (``@``) one needs calibration rows, so
    without them it is left out rather than silently scored."""
    has_calibration = any(r.get("part") == "calibration" for r in rows)
    return ((name, decide) for name, decide in policies(targets).items() if "@" not in name or has_calibration)


def yardstick_table(rows: list[Row], targets: Sequence[float] = DEFAULT_TARGETS) -> dict[str, dict[str, Any]]:
    """Policy -> mean and population spread over folds of :data:`METRICS`, plus pooled counts."""
    table: dict[str, dict[str, Any]] = {}
    for name, decide in _applicable(rows, targets):
        folds = per_fold(rows, decide)
        agg: dict[str, Any] = {"folds": len(folds)}
        for key in METRICS:
            agg.update(mean_and_spread(key, [f[key] for f in folds]))
        for key in ("tp", "fp", "fn", "tn"):
            agg[key] = sum(int(f[key]) for f in folds)
        table[name] = agg
    return table


def pooled_table(rows: list[Row], targets: Sequence[float] = DEFAULT_TARGETS) -> dict[str, dict[str, Any]]:
    """Policy -> the held-out rows' figures pooled over folds (each fold decided with its own
    calibration rows), ± the spread of a bootstrap over whole problems.

    For a set whose equivalent pairs are few and bunched in a few problems -- sibling pairs from
    search, a few dozen merges -- a fold may hold no equivalent pair and a per-fold mean is
    noise; the pooled figure is the estimate, and how far it moves when other problems are drawn
    is its honest spread (one problem's template can make several false merges at once)."""
    table: dict[str, dict[str, Any]] = {}
    for name, decide in _applicable(rows, targets):
        decided = _decided(rows, decide)
        held_out = [r for test, _ in decided for r in test]
        predictions = [verdict for _, verdicts in decided for verdict in verdicts]
        labels = [int(r["label"]) for r in held_out]
        problems = [str(r.get("problem") or r.get("question") or r.get("id", "")) for r in held_out]
        agg: dict[str, Any] = {"problems": len(set(problems)), **metrics_of(predictions, labels)}
        agg.update(spread_by_problem(predictions, labels, problems))
        table[name] = agg
    return table


RANKED_SCORES = {"raw": ("raw_prob", False), "raw+guard": ("raw_prob", True)}


def ranking_table(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Score -> average precision on each fold's held-out rows, mean and spread over folds.

    The decision tables above depend on a threshold picked on a few hundred calibration pairs; two
    judges whose F1 differs by that pick's draw may rank pairs alike. AP compares the scores
    themselves: the plain classifier's, and the same with the claim guard's vetoes set to 0. A
    fold with no equivalent held-out pair has no AP and is left out (``folds`` counts the rest)."""
    by_fold: dict[int, list[Row]] = {}
    for row in rows:
        if row.get("part", "test") == "test":
            by_fold.setdefault(int(row["fold"]), []).append(row)
    by_fold = {k: test for k, test in by_fold.items() if any(int(r["label"]) for r in test)}
    table: dict[str, dict[str, Any]] = {}
    for name, (key, guard) in RANKED_SCORES.items():
        values = [average_precision([_guarded(r[key], r, guard) for r in test], [int(r["label"]) for r in test])
                  for _, test in sorted(by_fold.items())]
        table[name] = {"folds": len(values), **mean_and_spread("ap", values)}
    return table


def format_ranking(table: dict[str, dict[str, Any]]) -> str:
    """:func:`ranking_table` as text."""
    lines = [f"{'score':<20} {'folds':>8} {'average precision':>17}", "-" * 47]
    lines += [f"{name:<20} {agg['folds']:>8} {mean_spread_cell(agg, 'ap'):>17}" for name, agg in table.items()]
    return "\n".join(lines)


def mean_and_spread(key: str, values: Sequence[float]) -> dict[str, float]:
    """``{key: mean, key_spread: population s.d.}`` over folds or seeds (spread 0 for one value):
    the "mean ± spread" every quality table in docs/results.md reports."""
    return {key: statistics.fmean(values), key + "_spread": statistics.pstdev(values) if len(values) > 1 else 0.0}


def mean_spread_cell(agg: dict[str, Any], key: str) -> str:
    """``0.901 ± 0.011``: a figure of :func:`mean_and_spread` as a table cell."""
    return f"{agg[key]:.3f} ± {agg[key + '_spread']:.3f}"


def format_table(table: dict[str, dict[str, Any]], count: str = "folds") -> str:
    """The table as text: one row per policy, mean ± spread over folds (``count="problems"``: a
    :func:`pooled_table`, pooled ± bootstrap over problems), pooled merges."""
    width = max([20, *(len(name) for name in table)])
    head = f"{'policy':<{width}} {count:>8} " + " ".join(f"{m:>17}" for m in METRICS) + f" {'merges':>7} {'false':>6}"
    lines = [head, "-" * len(head)]
    for name, agg in table.items():
        cells = " ".join(mean_spread_cell(agg, m).rjust(17) for m in METRICS)
        lines.append(f"{name:<{width}} {agg[count]:>8} {cells} {agg['tp'] + agg['fp']:>7} {agg['fp']:>6}")
    return "\n".join(lines)
