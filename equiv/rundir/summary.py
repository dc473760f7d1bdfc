"""Aggregates over records: ``summary.json``'s numbers and the compare table (``compare``, report)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from equiv.errors import InputError
from equiv.rundir.layout import RESULTS, RecordKey
from equiv.rundir.records import record_key


def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float:
    return sum(float(r.get(key) or 0) for r in records) / len(records) if records else 0.0


def aggregation_accuracy(records: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """Accuracy of each answer aggregation a record carries (``aggregations``), over all records
    (one without it -- an error -- counts as wrong); None when no record has any."""
    names: list[str] = []
    for r in records:
        for name in r.get("aggregations") or {}:
            if name not in names:
                names.append(name)
    if not names or not records:
        return None
    return {
        name: sum(bool(((r.get("aggregations") or {}).get(name) or {}).get("correct")) for r in records) / len(records)
        for name in names
    }


def summarise(records: Sequence[Mapping[str, Any]], *, algo: str, pruner: str) -> dict[str, Any]:
    """``summary.json``'s numbers over all records (an errored record counts as wrong and
    contributes the work it did before failing)."""
    n = len(records)
    expanded = sum(int(r.get("expanded") or 0) for r in records)
    pruned = sum(int(r.get("pruned") or 0) for r in records)
    per_seed: dict[str, dict[str, float]] = {}
    for seed in sorted({record_key(r)[1] for r in records}):
        rs = [r for r in records if record_key(r)[1] == seed]
        per_seed[str(seed)] = {
            "problems": len(rs),
            "accuracy": sum(bool(r.get("correct")) for r in rs) / len(rs),
            "mean_generated_tokens": _mean(rs, "generated_tokens"),
        }
    correct = sum(bool(r.get("correct")) for r in records)
    aggregations = aggregation_accuracy(records)
    return {
        "algo": algo,
        "pruner": pruner,
        "problems": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "errors": sum(1 for r in records if r.get("error")),
        "mean_generated_tokens": _mean(records, "generated_tokens"),
        "mean_prm_calls": _mean(records, "prm_calls"),
        "mean_judge_calls": _mean(records, "judge_calls"),
        "mean_expanded": _mean(records, "expanded"),
        "pruned_per_expansion": pruned / expanded if expanded else 0.0,
        "seconds": sum(float(r.get("seconds") or 0) for r in records),
        "per_seed": per_seed,
        **({} if aggregations is None else {"aggregations": aggregations}),
        **engine_work(records),
    }


def engine_work(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Tokens asked for, tokens an engine generated, and requests the completions cache answered
    (``policy.cache``), summed; a record from before the cache generated all its tokens. Empty when
    no record has the fields, so a summary written before them is reproduced as it was."""
    if not any("engine_tokens" in r for r in records):
        return {}
    return {
        "generated_tokens": sum(int(r.get("generated_tokens") or 0) for r in records),
        "engine_tokens": sum(int(r.get("engine_tokens", r.get("generated_tokens")) or 0) for r in records),
        "cache_hits": sum(int(r.get("cache_hits") or 0) for r in records),
    }


def _percent(accuracies: Mapping[str, float] | None) -> dict[str, float] | None:
    return None if accuracies is None else {k: 100.0 * v for k, v in accuracies.items()}


def compare_rows(runs: Sequence[tuple[str, Mapping[RecordKey, Mapping[str, Any]]]]) -> tuple[list[dict[str, Any]], int]:
    """The paper-style table: one row per ``(name, records by key)`` run, on the (id, seed) keys
    all runs share; ``token_ratio`` is percent of the FIRST run's mean tokens (None when it is 0).

    Comparing on the shared problems is what makes a partly finished run comparable with a
    complete one.
    """
    if not runs:
        raise InputError("no runs to compare")
    for name, records in runs:
        if not records:  # "the runs share no problems" would blame the other runs
            raise InputError(f"holds no records yet ({RESULTS} is empty: the run finished no problem); nothing to compare",
                             path=name)
    shared = set(runs[0][1])
    for _, records in runs[1:]:
        shared &= set(records)
    if not shared:
        raise InputError("the runs share no problems (same ids and seeds); nothing to compare")
    keys = sorted(shared)
    rows = []
    for name, records in runs:
        sel = [records[k] for k in keys]
        n = len(sel)
        expanded = sum(int(r.get("expanded") or 0) for r in sel)
        pruned = sum(int(r.get("pruned") or 0) for r in sel)
        rows.append(
            {
                "run": str(name),
                "algo": sel[0].get("algo", "?"),
                "pruner": sel[0].get("pruner", "?"),
                "problems": n,
                "accuracy": 100.0 * sum(bool(r.get("correct")) for r in sel) / n,
                "mean_generated_tokens": _mean(sel, "generated_tokens"),
                "mean_prm_calls": _mean(sel, "prm_calls"),
                "mean_judge_calls": _mean(sel, "judge_calls"),
                "errors": sum(1 for r in sel if r.get("error")),
                "pruned_per_expansion": pruned / expanded if expanded else None,
                "total_problems": len(records),
                "aggregations": _percent(aggregation_accuracy(sel)),
            }
        )
    base = rows[0]["mean_generated_tokens"]
    for row in rows:
        row["token_ratio"] = 100.0 * row["mean_generated_tokens"] / base if base else None
    return rows, len(keys)
