"""The aligned-plan stage's cut-off on development siblings: the grid, and its choice by
cross-validation by problem (docs/experiments/2026-12-01-plans-item-by-item.md).

Two numbered plans merge when every pair of their sub-goals, in order, reads alike at a cosine of
at least ``plan_items`` in the bundled sentence model (``equiv.judge.decide``, stage 4b). This
script scores each labelled file once per cut-off through the judge's own path
(``ModelJudge.pair_verdicts`` with the export's policy and ``plan_items`` set; the judge's
probabilities are cached, so each pair costs one forward), prints precision / recall (merges /
false) per file and pooled over the ``--pool`` files beside the stage off, and then chooses the
cut-off by cross-validation by problem over the pooled files: on the training folds, the lowest
cut-off at which the merges the stage adds (those the judge without it does not make) reach
``--precision``, read two ways -- the point estimate, and the Wilson lower bound at ``--z``
(``equiv adapt``'s rule) -- and scores the choice on the held-out fold.

    python benchmarks/bench_plan_items.py                      # the shipped judge on the 1.5B's development files
    python benchmarks/bench_plan_items.py --quick --judge DIR  # CI-sized: the demo pairs
    python benchmarks/bench_plan_items.py --data mine=FILE     # another labelled file (pooled)

Development files only: never the sealed split (benchmarks/data/sealed/), which is scored once per
adopted change by bench_sealed.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import replace
from pathlib import Path

from common import ROOT  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.errors import InputError, exit_on_input_error  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
DEV_FILES = {
    "1.5B width 10": DATA / "gsm8k_train_siblings_qwen_w10.jsonl",
    "1.5B first steps": DATA / "gsm8k_train_siblings_qwen_w10_first_steps.jsonl",
    "1.5B width 4": DATA / "gsm8k_train_siblings_qwen15b.jsonl",
    "gemma held-out": DATA / "gsm8k_train_siblings_gemma270m_heldout.jsonl",
    "solution pairs": DATA / "gsm8k_train_solution_pairs.jsonl",
}
POOL = ("1.5B width 10", "1.5B first steps", "1.5B width 4")
GRID = (0.7, 0.75, 0.8, 0.825, 0.85, 0.875, 0.9, 0.925, 0.95)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", default=str(ROOT / "outputs" / "gsm8k_equiv" / "ensemble"))
    ap.add_argument("--grid", default=",".join(str(t) for t in GRID), help="cut-offs to score, comma-separated")
    ap.add_argument("--precision", type=float, default=0.95, help="what the added merges must reach on training folds")
    ap.add_argument("--z", type=float, default=1.0, help="standard errors of the Wilson bound (adapt's rule)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", action="append", default=[], metavar="NAME=FILE",
                    help="a labelled pair file to score instead of the development files (repeatable; all are pooled)")
    ap.add_argument("--quick", action="store_true", help="the demo pairs (equiv/data/demo_data/valid.jsonl) alone")
    return ap.parse_args(argv)


def read_rows(path: Path) -> list[dict]:
    """The labelled pairs of a file with a MathEquiv level of 0, 1, 3 or 4 (2 says neither)."""
    if not path.is_file():
        raise InputError("no such file", path=path)
    rows = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"not JSON: {err.msg}", path=f"{path}:{line_no}") from None
        if row.get("result") not in (0, 1, 3, 4, 2):
            raise InputError(f"must be a level 0-4, got {row.get('result')!r}", path=f"{path}:{line_no}", field="result")
        if row["result"] != 2:
            rows.append(row)
    return rows


def problem_of(row: dict) -> str:
    return str(row.get("problem") or row.get("id", "").rsplit("-", 1)[0])


def fold_of(problem: str, folds: int, seed: int) -> int:
    return int(hashlib.sha256(f"{seed}:{problem}".encode()).hexdigest(), 16) % folds


def counts(merged: list[bool], labels: list[bool]) -> tuple[int, int, int]:
    tp = sum(m and e for m, e in zip(merged, labels))
    fp = sum(m and not e for m, e in zip(merged, labels))
    return tp, fp, sum(labels)


def cell(tp: int, fp: int, positives: int) -> str:
    return f"{tp / max(1, tp + fp):.3f} / {tp / max(1, positives):.3f} ({tp + fp}/{fp})"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with exit_on_input_error():
        from equiv.prune.adapt import wilson_lower
        from equiv.prune.model_judge import ModelJudge

        grid = [float(t) for t in args.grid.split(",") if t.strip()]
        if args.data:
            bad = [d for d in args.data if "=" not in d]
            if bad:
                raise InputError(f"must be NAME=FILE, got {bad[0]!r}", field="data")
            files = dict(d.split("=", 1) for d in args.data)
        elif args.quick:
            files = {"demo pairs": ROOT / "equiv" / "data" / "demo_data" / "valid.jsonl"}
        else:
            files = dict(DEV_FILES)
        pool = tuple(files) if args.data or args.quick else POOL
        judge = ModelJudge(args.judge, device="cpu")
        base = replace(judge.policy, plan_items=None)
        cuts: list[float | None] = [None, *grid]
        merged: dict[str, dict[float | None, list[bool]]] = {}
        labels: dict[str, list[bool]] = {}
        problems: dict[str, list[str]] = {}
        print(f"judge: {args.judge}; policy without the stage: {json.dumps(base.to_dict())}")
        print(f"{'file':18s} {'pairs':>6s}  " + "  ".join(f"{'off' if t is None else t:>26}" for t in cuts))
        for name, path in files.items():
            rows = read_rows(Path(path))
            pairs = [(r["sentence1"], r["sentence2"]) for r in rows]
            questions = [str(r.get("question") or "") for r in rows]
            labels[name] = [r["result"] >= 3 for r in rows]
            problems[name] = [problem_of(r) for r in rows]
            merged[name] = {}
            for t in cuts:
                judge.policy = replace(base, plan_items=t)
                merged[name][t] = [v.merged for v in judge.pair_verdicts(pairs, questions)]
            print(f"{name:18s} {len(rows):6d}  "
                  + "  ".join(f"{cell(*counts(merged[name][t], labels[name])):>26}" for t in cuts))
        flat_merged = {t: [m for name in pool for m in merged[name][t]] for t in cuts}
        flat_labels = [e for name in pool for e in labels[name]]
        flat_problems = [p for name in pool for p in problems[name]]
        print(f"{'pooled':18s} {len(flat_labels):6d}  "
              + "  ".join(f"{cell(*counts(flat_merged[t], flat_labels)):>26}" for t in cuts))

        fold = [fold_of(p, args.folds, args.seed) for p in flat_problems]
        print(f"\ncross-validation by problem over {', '.join(pool)}: {len(set(flat_problems))} problems, "
              f"{args.folds} folds (seed {args.seed}); the added merges must reach precision {args.precision}")
        for rule in ("point estimate", f"Wilson bound, z={args.z:g}"):
            chosen, held = [], [0, 0, 0, 0, 0]  # tp, fp, positives, added right, added wrong
            for k in range(args.folds):
                train = [i for i, f in enumerate(fold) if f != k]
                test = [i for i, f in enumerate(fold) if f == k]
                pick = None
                for t in grid:
                    added = [i for i in train if flat_merged[t][i] and not flat_merged[None][i]]
                    right = sum(flat_labels[i] for i in added)
                    estimate = right / len(added) if added else 0.0
                    bound = wilson_lower(right, len(added), args.z) if added else 0.0
                    if (estimate if rule == "point estimate" else bound) >= args.precision:
                        pick = t
                        break
                chosen.append(pick)
                tp, fp, positives = counts([flat_merged[pick][i] for i in test], [flat_labels[i] for i in test])
                added = [i for i in test if flat_merged[pick][i] and not flat_merged[None][i]]
                for slot, value in enumerate((tp, fp, positives, sum(flat_labels[i] for i in added),
                                              sum(not flat_labels[i] for i in added))):
                    held[slot] += value
            off = counts([flat_merged[None][i] for i in range(len(fold))], flat_labels)
            print(f"  {rule:22s} chosen {', '.join('off' if t is None else f'{t:g}' for t in chosen)}; held out, "
                  f"pooled: {cell(held[0], held[1], held[2])} (stage off: {cell(*off)}); added {held[3] + held[4]}, "
                  f"{held[4]} wrong")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
