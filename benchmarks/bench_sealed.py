"""Judges on the sealed test split, side by side with the `formula` rule: the figure for new problems.

The sealed split (``benchmarks/data/sealed/``, provenance in its README) holds labelled pairs of
GSM8K train problems no other file uses, made before any choice of the round that made it. It is
scored **once per adopted change**, never to choose between candidates: run this after adopting a
judge, record the table in ``docs/experiments/`` with the date and the change it checked, and do
not tune anything on what it prints.

For each sealed file one table, one row per strategy, every pair decided through
``search_cli.py pairs``' own path (``equiv.prune.cli.run_pairs``: the judge's export policy, the
one evaluator):

- ``formula`` -- the rule baseline (the same normalised formulas; no threshold, no training);
- ``guard alone`` -- "merge unless a guard rule vetoes" (the first judge's model run at a
  threshold that merges every scored pair, prefilter and floor off): what the guard decides by
  itself;
- each ``--judge NAME=DIR``, with the policy its export stores.

Columns: pairs and equivalent pairs, precision / recall / F1 with their spread (standard deviation
over a bootstrap of whole problems), the false-merge rate (false merges over non-equivalent
pairs), merges and false merges, and **F1 - formula** with the spread of that paired difference
(the same problem resamples for both). A false merge can cut the only correct path; a missed merge
costs tokens.

    python benchmarks/bench_sealed.py --judge ensemble=outputs/gsm8k_equiv/ensemble --judge s42=outputs/gsm8k_equiv/judge
    python benchmarks/bench_sealed.py --quick        # CI-sized: the demo judge on the demo pairs
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Sequence

from common import ROOT  # noqa: E402  (offline env, this checkout on sys.path)

SEALED = ROOT / "benchmarks" / "data" / "sealed"
RESAMPLES = 1000


def _run(data: Path, strategy: str, model: str | None, extra: Sequence[str] = ()) -> dict[str, Any]:
    from equiv.prune.cli import build_parser, run_pairs

    argv = ["--data.path", str(data), "--pruner.strategy", strategy, "--pruner.device", "cpu", *extra]
    if model:
        argv += ["--pruner.model", model]
    return run_pairs(build_parser().parse_args(argv))


def _f1(rows: Sequence[dict[str, Any]]) -> float:
    tp = sum(1 for r in rows if r["merged"] and r["label"] == 1)
    fp = sum(1 for r in rows if r["merged"] and r["label"] == 0)
    fn = sum(1 for r in rows if not r["merged"] and r["label"] == 1)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def paired_difference(rows: Sequence[dict[str, Any]], base: Sequence[dict[str, Any]], problems: Sequence[str],
                      *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """F1(rows) - F1(base) on the same pairs, and its standard deviation over a bootstrap of whole
    problems drawn once for both (so the spread is of the difference, not of each figure)."""
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(problems):
        groups.setdefault(key, []).append(i)
    members = list(groups.values())
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        idx = [i for _ in members for i in rng.choice(members)]
        draws.append(_f1([rows[i] for i in idx]) - _f1([base[i] for i in idx]))
    mean = sum(draws) / len(draws)
    spread = (sum((d - mean) ** 2 for d in draws) / len(draws)) ** 0.5
    return _f1(rows) - _f1(base), spread


def score_file(data: Path, judges: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One row per strategy on ``data`` (formula first: the baseline the others are compared with)."""
    from equiv.data.records import problem_key, read_pair_records

    problems_by_source = {r.source: problem_key(r) for r in read_pair_records(data)[0]}
    arms: list[tuple[str, str, str | None, list[str]]] = [("formula", "formula", None, [])]
    if judges:
        arms.append(("guard alone", "model", judges[0][1],
                     ["--pruner.threshold", "1e-9", "--pruner.prefilter", "0", "--pruner.floor", "0", "--pruner.guard", "true"]))
    arms += [(name, "model", path, []) for name, path in judges]
    rows = []
    base_pairs: list[dict[str, Any]] | None = None
    for name, strategy, model, extra in arms:
        out = _run(data, strategy, model, extra)
        pairs = out["_pairs"]
        problems = [problems_by_source[p["source"]] for p in pairs]
        if base_pairs is None:
            base_pairs = pairs
        diff, diff_spread = paired_difference(pairs, base_pairs, problems)
        rows.append({
            "arm": name, "n": out["n"], "equivalent": out["tp"] + out["fn"], "problems": out["problems"],
            "precision": out["precision"], "precision_spread": out.get("precision_spread", 0.0),
            "recall": out["recall"], "recall_spread": out.get("recall_spread", 0.0),
            "f1": out["f1"], "f1_spread": out.get("f1_spread", 0.0), "false_merge_rate": out["false_merge_rate"],
            "merges": out["tp"] + out["fp"], "false_merges": out["fp"], "f1_minus_formula": diff,
            "f1_minus_formula_spread": diff_spread, "reasons": out.get("reasons", {}),
        })
    return rows


def print_table(data: Path, rows: Sequence[dict[str, Any]]) -> None:
    first = rows[0]
    print(f"\n{data.name}: {first['n']} pairs ({first['equivalent']} equivalent), {first['problems']} problems; "
          "spreads: bootstrap over problems")
    print(f"  {'arm':<14} {'precision':>15} {'recall':>15} {'F1':>15} {'false-merge':>11} {'merges/false':>12} "
          f"{'F1 - formula':>17}")
    for r in rows:
        print(f"  {r['arm']:<14} {r['precision']:>7.3f} ± {r['precision_spread']:.3f} {r['recall']:>7.3f} ± "
              f"{r['recall_spread']:.3f} {r['f1']:>7.3f} ± {r['f1_spread']:.3f} {r['false_merge_rate']:>11.3f} "
              f"{r['merges']:>6}/{r['false_merges']:<5} {r['f1_minus_formula']:>+9.3f} ± {r['f1_minus_formula_spread']:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge", action="append", default=[], metavar="NAME=DIR",
                        help="an exported judge to score (repeatable; the first also runs 'guard alone')")
    parser.add_argument("--data", action="append", type=Path, help="labelled files (default: every sealed file)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--quick", action="store_true", help="the demo judge (outputs/demo/judge) on the demo pairs")
    parser.add_argument("--verbose", action="store_true", help="also show the libraries' own logs and progress bars")
    args = parser.parse_args(argv)
    from equiv.quiet import configure

    configure(verbose=args.verbose)
    judges = []
    for spec in args.judge:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            parser.error(f"--judge takes NAME=DIR, got {spec!r}")
        judges.append((name, path))
    files = args.data or sorted(SEALED.glob("*.jsonl"))
    if args.quick:
        files = args.data or [ROOT / "equiv" / "data" / "demo_data" / "valid.jsonl"]
    if not files:
        parser.error(f"no labelled files (none under {SEALED})")
    from equiv.errors import exit_on_input_error

    results = {}
    with exit_on_input_error():
        for data in files:
            rows = score_file(data, judges)
            print_table(data, rows)
            results[str(data)] = rows
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
