"""Model forwards and judge time with the rules before the model, against the old order.

The one evaluator (``equiv.judge.decide``) used to score every pair the prefilter passed and then
apply the guard and the restatement rule, which do not read the probability. Now the rules run
first and the model scores only the pairs they leave open. This script runs a real exported
judge over the shipped sibling pair files (``benchmarks/data/*siblings*.jsonl``, read in place)
with the recipe's policy (every guard rule, floor 0.9, restatement on) both ways, in one process:

- **old order**: ``pair_verdicts(..., score_ruled=True)`` on the pairs past the prefilter scores
  every one of them, exactly the model work the old order did (the verdicts are the same either
  way; checked);
- **new order**: ``pair_verdicts(...)``, the default.

A fresh judge (empty cache) per file and order; each row is the best of ``--repeats`` runs. The
judge is ``--model DIR`` (an export) or, by default, a tiny random-init Longformer built with
:func:`equiv.judge.tiny.build_tiny_judge` at ``--hidden``/``--layers`` (its verdicts mean
nothing; its forwards cost what a forward costs). Prints a table and ``ratio: <x>`` (the old
order's model pairs over the new's, all files) and ``speedup: <x>`` (judge seconds, old / new)::

    python benchmarks/bench_decide_order.py [--model DIR] [--device cpu] [--repeats 3] [--quick]
"""

from __future__ import annotations

import common  # noqa: F401  (offline env, this checkout on sys.path)

import argparse
import json
import tempfile
import time
from pathlib import Path

from common import ROOT

FILES = sorted((ROOT / "benchmarks" / "data").glob("*siblings*.jsonl"))


def read_pairs(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(r["sentence1"], r["sentence2"]) for r in rows], [r.get("question") or "" for r in rows]


def run(model: str, device: str, pairs: list, questions: list, score_ruled: bool) -> tuple[dict, list, float]:
    """One order's verdicts, stats and seconds. The old order (``score_ruled``) scores every pair
    the prefilter passes; since 2026-12-01 the prefilter runs after the rules, so a pair it holds
    is asked without ``score_ruled`` (the old order never scored it)."""
    from equiv.judge.decide import prefiltered
    from equiv.prune import ModelJudge

    judge = ModelJudge(model, device=device, guard=True, floor=0.9, restate=True)
    held = [prefiltered(judge.policy, a, b) for a, b in pairs] if score_ruled else [False] * len(pairs)
    groups = {flag: [i for i, h in enumerate(held) if h == flag] for flag in (False, True)}
    verdicts: list = [None] * len(pairs)
    start = time.perf_counter()
    for flag, idx in groups.items():
        if idx:
            got = judge.pair_verdicts([pairs[i] for i in idx], [questions[i] for i in idx],
                                      score_ruled=score_ruled and not flag)
            for i, v in zip(idx, got):
                verdicts[i] = v
    seconds = time.perf_counter() - start
    return judge.stats.to_dict(), [(v.merged, v.reason) for v in verdicts], seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="an exported judge directory (default: a tiny judge built here)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256, help="the tiny judge's hidden size")
    ap.add_argument("--layers", type=int, default=4, help="the tiny judge's layers")
    ap.add_argument("--quick", action="store_true", help="a toy judge, one run (the test's setting)")
    args = ap.parse_args(argv)
    if args.quick:
        args.hidden, args.layers, args.repeats = 32, 2, 1
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from equiv.judge.tiny import build_tiny_judge

            model = str(build_tiny_judge(Path(tmp) / "judge", hidden_size=args.hidden, num_layers=args.layers,
                                         num_heads=4, attention_window=32, max_positions=256))
        print(f"judge {args.model or f'tiny Longformer hidden {args.hidden}, {args.layers} layers'} on {args.device}; "
              "policy: every guard rule, floor 0.9, restate on")
        print(f"{'file':52} {'pairs':>5} {'open':>5} {'old fwd':>7} {'new fwd':>7} {'old s':>7} {'new s':>7}")
        totals = {"old": [0, 0.0], "new": [0, 0.0]}
        for path in FILES:
            pairs, questions = read_pairs(path)
            best: dict[str, tuple[dict, float]] = {}
            decided: dict[str, list] = {}
            for _ in range(args.repeats):
                for order, score_ruled in (("old", True), ("new", False)):
                    stats, verdicts, seconds = run(model, args.device, pairs, questions, score_ruled)
                    decided[order] = verdicts
                    if order not in best or seconds < best[order][1]:
                        best[order] = (stats, seconds)
            if decided["old"] != decided["new"]:
                raise SystemExit(f"{path.name}: the two orders decide differently")
            old, new = best["old"], best["new"]
            for order, (stats, seconds) in best.items():
                totals[order][0] += stats["scored"]
                totals[order][1] += seconds
            print(f"{path.name:52} {len(pairs):5d} {new[0]['scored']:5d} {old[0]['scored']:7d} {new[0]['scored']:7d} "
                  f"{old[1]:7.3f} {new[1]:7.3f}")
        (old_fwd, old_s), (new_fwd, new_s) = totals["old"], totals["new"]
        print(f"{'all':52} {'':5} {'':5} {old_fwd:7d} {new_fwd:7d} {old_s:7.3f} {new_s:7.3f}")
        print(f"ratio: {old_fwd / max(new_fwd, 1):.2f}")
        print(f"speedup: {old_s / max(new_s, 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
