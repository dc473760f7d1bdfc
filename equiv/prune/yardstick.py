"""The cross-validation table: out-of-fold scores -> precision, recall, F1 and false merges per fold.

Reads the ``oof.jsonl`` of :mod:`equiv.prune.crossval` (one row per pair and fold part) and scores
each *decision policy* per fold, so every figure comes with its spread over folds. Each policy of
the table is a :class:`YardstickPolicy`: a :class:`~equiv.judge.policy.DecisionPolicy` over one
score of the rows, decided by the one evaluator :func:`equiv.judge.decide.decide` -- the function
the live judge decides with, so a figure here describes a judge that can ship
(``tests/test_prune_crossval.py`` checks that the two decide a labelled file alike). Its
threshold is the fold export's stored one, a fixed one, or chosen again on the fold's
calibration rows by :func:`equiv.judge.calibrate.choose_threshold`:

- the baseline rules (no training; the same pairs, for comparison): every strategy the registry
  marks ``baseline`` (:data:`equiv.prune.strategies.STRATEGIES`: ``formula``, ``levenshtein``),
  scored and decided as the strategy does (``levenshtein 0.95``: its default threshold);
- ``judge`` -- each fold's export as ``--strategy model`` uses it, at
  its stored threshold; ``raw`` -- its plain classifier at the stored threshold;
- ``+guard`` -- the same with every guard rule (:mod:`equiv.text.guard`) in force;
- ``@f1`` -- the threshold chosen again on that fold's *calibration* rows (the fit's own
  calibration split, never the held-out fold) by best F1, as ``fit --threshold_from_val true``
  chooses it (without the guard and floor, which apply after);
- ``@tT`` -- a fixed threshold ``T`` for every fold, nothing chosen on the calibration rows;
- ``+floorS`` -- the same with the statement floor ``S`` (``+floorS+planP``: numbered plans held
  to ``P``, :attr:`~equiv.judge.policy.DecisionPolicy.plan_floor`; the recipe's is
  ``+floor0.7+plan0.9``).
  This is honest: the classifier never trained on those rows.

The rows' probabilities already hold the export's same-step shortcut and prefilter (1 and 0); a
row that stores the export's ``policy`` has those two stages re-applied from it (so the reasons
match the live judge's), a row without one is read with them off.

The false-merge rate is false merges over all non-equivalent pairs: the share of distinct sibling
steps a search would lose. Pure functions over rows; no model is loaded.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from equiv.errors import InputError
from equiv.judge.calibrate import BinaryMetrics, average_precision, binary_metrics, choose_threshold, spread_by_problem
from equiv.judge.decide import Verdict, VerdictJSONError, decide, sweep_scores, verdict_from_json
from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge
from equiv.prune.strategies import STRATEGIES, PrunerConfig, Strategy, build_judge
from equiv.rundir.io import read_json_lines
from equiv.text.guard import guard_veto, rule_names

METRICS = ("precision", "recall", "f1", "false_merge_rate")
DEFAULT_STATEMENT_FLOORS = (0.7,)  # the recipe's floor (configs/gsm8k_equiv.yaml)
DEFAULT_PLAN_FLOOR = 0.9  # the recipe's floor for numbered plans (configs/gsm8k_equiv.yaml: plan_floor)
DEFAULT_FIXED_THRESHOLDS = (0.5,)  # the classifier's own boundary: fit's threshold without threshold_from_val
Row = dict[str, Any]
BARE = DecisionPolicy(threshold=0.5, prefilter=None, same_step="off")
"""No stage but the threshold: what a yardstick policy adds its guard, floor and threshold to."""
THRESHOLD_KEYS = {"prob": "threshold", "raw_prob": "raw_threshold"}


def read_oof(path: str | Path) -> list[Row]:
    """The rows of an ``oof.jsonl`` (each needs fold, label, the judge's verdict, threshold, raw_prob,
    raw_threshold). The judge's verdict is in its one JSON form (``probability``; read by
    :func:`equiv.judge.decide.verdict_from_json`, which also reads the ``prob`` of files written
    before 2026-11-29); the yardstick's policies read its probability as the ``prob`` score
    (:func:`row_score`)."""
    need = ("fold", "label", "threshold", "raw_prob", "raw_threshold", "sentence1", "sentence2")
    found, _ = read_json_lines(path)
    for number, row in found:
        for name in need:
            if name not in row:
                raise InputError("missing", path=path, line=number, field=name)
        try:
            probability = verdict_from_json(row).probability
        except VerdictJSONError as err:
            raise InputError(err.message, path=path, line=number, field=err.field) from None
        if probability is None:
            raise InputError("null: a scored row needs the judge's probability", path=path, line=number,
                             field="probability")
    rows = [row for _, row in found]
    if not rows:
        raise InputError("holds no rows", path=path)
    return rows


def vetoed(row: Row) -> bool:
    """Whether any guard rule vetoes this pair (cached on the row)."""
    if "_veto" not in row:
        row["_veto"] = guard_veto(row["sentence1"], row["sentence2"], row.get("question") or "") is not None
    return bool(row["_veto"])


def metrics_of(predictions: Sequence[bool], labels: Sequence[int]) -> dict[str, float]:
    m: BinaryMetrics = binary_metrics(predictions, labels)
    return {"precision": m.precision, "recall": m.recall, "f1": m.f1, "false_merge_rate": m.false_merge_rate,
            "tp": m.tp, "fp": m.fp, "fn": m.fn, "tn": m.tn}


def baseline_judge(name: str) -> CachedJudge:
    """The baseline strategy ``name`` as search builds it with its defaults (its score, its policy)."""
    return _built(STRATEGIES.get(name))


@cache
def _built(entry: Strategy) -> CachedJudge:
    """One judge per registry entry (keyed on the entry: a re-registered name builds anew)."""
    judge = build_judge(PrunerConfig(strategy=entry.name))
    if judge is None or not entry.baseline or not hasattr(judge, "score"):
        raise ValueError(f"strategy {entry.name!r} is no baseline rule (baseline=True, a judge with score(a, b))")
    return judge


def baselines() -> tuple[str, ...]:
    """The rule strategies the table scores beside the judge: those the registry marks ``baseline``."""
    return tuple(entry.name for entry in STRATEGIES.entries() if entry.baseline)


def row_score(row: Row, score: str) -> float:
    """The score a policy reads from a row: a stored probability (``prob``, ``raw_prob``), or a
    baseline rule's score of the pair (its strategy's name)."""
    if score == "prob":  # the judge's verdict's probability: its one JSON form, or an older row's "prob"
        return float(row["probability"] if "probability" in row else row["prob"])
    if score in THRESHOLD_KEYS:
        return float(row[score])
    return float(baseline_judge(score).score(row["sentence1"], row["sentence2"]))


@dataclass(frozen=True)
class YardstickPolicy:
    """One policy of the table: ``policy`` over the rows' ``score`` (``prob``, ``raw_prob``, or a
    baseline strategy's name), its threshold taken from ``threshold_from``: ``policy`` (its
    own), ``stored`` (the fold export's, per fold) or ``repick`` (best F1 on the fold's calibration
    rows; ``sweep_guarded`` False chooses with the guard and floor off and applies them after, as
    ``fit`` does)."""

    policy: DecisionPolicy
    score: str = "raw_prob"
    threshold_from: str = "policy"
    sweep_guarded: bool = True

    def fold_policy(self, test: list[Row], calibration: list[Row]) -> DecisionPolicy:
        """The policy one fold's held-out rows are decided with."""
        policy = self.policy
        stored = test[0].get("policy") if test and self.score in THRESHOLD_KEYS else None
        if isinstance(stored, dict):  # the export's same-step shortcut and prefilter, as the live judge
            export = DecisionPolicy.from_dict(stored)
            policy = replace(policy, same_step=export.same_step, prefilter=export.prefilter)
        if self.threshold_from == "stored":
            policy = policy.with_knobs(threshold=float(test[0][THRESHOLD_KEYS[self.score]]))
        elif self.threshold_from == "repick":
            if not calibration:
                raise InputError("needs calibration rows (part: calibration) in oof.jsonl", field="part")
            sweep = policy if self.sweep_guarded else replace(policy, guard=(), floor=None, plan_floor=None)
            verdicts = self.decide(calibration, sweep)
            chosen = choose_threshold(sweep, _pairs(calibration), verdicts, [int(r["label"]) for r in calibration])
            policy = policy.with_knobs(threshold=chosen.threshold)
        return policy

    def decide(self, rows: list[Row], policy: DecisionPolicy) -> list[Verdict]:
        """The evaluator's verdicts on ``rows`` under ``policy`` (their scores and questions)."""
        return decide(_pairs(rows), policy, [row_score(r, self.score) for r in rows],
                      [r.get("question") or "" for r in rows])

    def __call__(self, test: list[Row], calibration: list[Row]) -> list[bool]:
        """Merge or not per held-out row of one fold (its calibration rows feed a re-pick)."""
        if not test:
            return []
        return [v.merged for v in self.decide(test, self.fold_policy(test, calibration))]


def _pairs(rows: Sequence[Row]) -> list[tuple[str, str]]:
    return [(r["sentence1"], r["sentence2"]) for r in rows]


def policies(floors: Sequence[float] = DEFAULT_STATEMENT_FLOORS,
             fixed: Sequence[float] = DEFAULT_FIXED_THRESHOLDS,
             plan_floor: float | None = DEFAULT_PLAN_FLOOR) -> dict[str, YardstickPolicy]:
    """Name -> policy; each is called as ``(test rows, calibration rows) -> merge or not``.
    ``plan_floor`` goes with every floor that differs from it (None: plans held to the floor)."""
    guarded = replace(BARE, guard=rule_names())
    out: dict[str, YardstickPolicy] = {}
    for name in baselines():
        # the strategy's own cut (threshold and comparison); a 0/1 rule also with the guard
        own = baseline_judge(name).policy
        policy = replace(BARE, threshold=own.threshold, compare=own.compare)
        if STRATEGIES.get(name).threshold:
            out[f"{name} {own.threshold:g}"] = YardstickPolicy(policy, name)
        else:
            out[name] = YardstickPolicy(policy, name)
            out[f"{name}+guard"] = YardstickPolicy(replace(policy, guard=rule_names()), name)
    out.update({
        "judge": YardstickPolicy(BARE, "prob", "stored"),
        "judge+guard": YardstickPolicy(guarded, "prob", "stored"),
        "raw": YardstickPolicy(BARE, "raw_prob", "stored"),
        "raw+guard": YardstickPolicy(guarded, "raw_prob", "stored"),
    })
    out["raw+guard@f1"] = YardstickPolicy(guarded, "raw_prob", "repick", sweep_guarded=False)
    out["judge+guard@f1"] = YardstickPolicy(guarded, "prob", "repick", sweep_guarded=False)
    out["judge@f1"] = YardstickPolicy(BARE, "prob", "repick")
    def floored(floor: float) -> tuple[str, DecisionPolicy]:
        plan = plan_floor if plan_floor is not None and plan_floor != floor else None
        return f"+floor{floor:g}" + (f"+plan{plan:g}" if plan else ""), replace(guarded, floor=floor, plan_floor=plan)

    for floor in floors:
        name, policy = floored(floor)
        out[f"raw+guard{name}@f1"] = YardstickPolicy(policy, "raw_prob", "repick", sweep_guarded=False)
    for threshold in fixed:
        for floor in floors:
            name, policy = floored(floor)
            out[f"raw+guard{name}@t{threshold:g}"] = YardstickPolicy(replace(policy, threshold=threshold), "raw_prob")
    return out


def shipped_policy(score: str = "prob") -> YardstickPolicy:
    """Each fold's judge decided exactly as its export's stored policy says (threshold, guard,
    floor, shortcut, prefilter): the judge that ships, as the yardstick scores it."""
    return _Shipped(BARE, score, "stored")


@dataclass(frozen=True)
class _Shipped(YardstickPolicy):
    def fold_policy(self, test: list[Row], calibration: list[Row]) -> DecisionPolicy:
        stored = test[0].get("policy") if test else None
        if not isinstance(stored, dict):
            raise InputError("rows carry no export policy (oof.jsonl written before equiv.policy)", field="policy")
        return DecisionPolicy.from_dict(stored)


def _decided(rows: Iterable[Row], policy: YardstickPolicy
             ) -> list[tuple[list[Row], list[bool]]]:
    """Per fold (in fold order), its held-out (``test``) rows and ``policy``'s verdicts on them,
    the fold's ``calibration`` rows feeding ``policy``; folds without held-out rows are left out."""
    by_fold: dict[int, dict[str, list[Row]]] = {}
    for row in rows:
        by_fold.setdefault(int(row["fold"]), {"test": [], "calibration": []})[row.get("part", "test")].append(row)
    return [(parts["test"], policy(parts["test"], parts["calibration"]))
            for _, parts in sorted(by_fold.items()) if parts["test"]]


def per_fold(rows: Iterable[Row], policy: YardstickPolicy) -> list[dict[str, float]]:
    """One metrics dict per fold (test rows only; calibration rows feed ``policy``)."""
    return [metrics_of(verdicts, [int(r["label"]) for r in test]) for test, verdicts in _decided(rows, policy)]


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


def _applicable(rows: list[Row]) -> Iterator[tuple[str, YardstickPolicy]]:
    """The policies these rows can score: a re-picked (``@``) one needs calibration rows, so
    without them it is left out rather than silently scored."""
    has_calibration = any(r.get("part") == "calibration" for r in rows)
    return ((name, policy) for name, policy in policies().items()
            if policy.threshold_from != "repick" or has_calibration)


def yardstick_table(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Policy -> mean and population spread over folds of :data:`METRICS`, plus pooled counts."""
    table: dict[str, dict[str, Any]] = {}
    for name, policy in _applicable(rows):
        folds = per_fold(rows, policy)
        agg: dict[str, Any] = {"folds": len(folds)}
        for key in METRICS:
            agg.update(mean_and_spread(key, [f[key] for f in folds]))
        for key in ("tp", "fp", "fn", "tn"):
            agg[key] = sum(int(f[key]) for f in folds)
        table[name] = agg
    return table


def pooled_table(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Policy -> the held-out rows' figures pooled over folds (each fold decided with its own
    calibration rows), ± the spread of a bootstrap over whole problems.

    For a set whose equivalent pairs are few and bunched in a few problems -- sibling pairs from
    search, a few dozen merges -- a fold may hold no equivalent pair and a per-fold mean is
    noise; the pooled figure is the estimate, and how far it moves when other problems are drawn
    is its honest spread (one problem's template can make several false merges at once)."""
    table: dict[str, dict[str, Any]] = {}
    for name, policy in _applicable(rows):
        decided = _decided(rows, policy)
        held_out = [r for test, _ in decided for r in test]
        predictions = [verdict for _, verdicts in decided for verdict in verdicts]
        labels = [int(r["label"]) for r in held_out]
        problems = [str(r.get("problem") or r.get("question") or r.get("id", "")) for r in held_out]
        agg: dict[str, Any] = {"problems": len(set(problems)), **metrics_of(predictions, labels)}
        agg.update(spread_by_problem(predictions, labels, problems))
        table[name] = agg
    return table


RANKED_SCORES = {"raw": YardstickPolicy(BARE, "raw_prob"),
                 "raw+guard": YardstickPolicy(replace(BARE, guard=rule_names()), "raw_prob")}


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
    for name, ranked in RANKED_SCORES.items():
        values = [average_precision(sweep_scores(_pairs(test), ranked.decide(test, ranked.policy), ranked.policy),
                                    [int(r["label"]) for r in test]) for _, test in sorted(by_fold.items())]
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
