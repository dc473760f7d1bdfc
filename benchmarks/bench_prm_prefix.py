"""PRM time with sibling prefix sharing and its caches vs the plain padded path, same process.

Replays the PRM work of a step-level tree search: for each of N GSM8K questions, D depths of
2 parents x 4 children (the children of the first parent group become the next parents), steps
of ``--min_words``..``--max_words`` words. Every mode scores exactly the same requests with the
same tiny Math-Shepherd-style PRM (:func:`equiv.search.tiny.build_tiny_prm`, or ``--prm DIR``):

- ``plain``: the padded path (``share_prefix: false``) -- the baseline;
- ``plain, full head``: the same computing the whole LM head (``candidate_head: false``), as
  before the PRM computed only its two output rows;
- ``shared``: siblings' shared prefix run once, no cache (``head_cache_size: 0``);
- ``shared+question``: plus the questions' key/values kept across calls (the default);
- ``shared+children``: plus every scored child's (``cache_children: true``, capacity 256).

Each mode runs the calls as a search at concurrency 1 makes them (one problem's children per call)
and as concurrency K does (all problems' children of one depth per call), caches cleared before
each; scores are checked against ``plain`` (max difference printed). Prints a table and, last,
``speedup: <x>`` = plain / default (``shared+question``) at concurrency 1, on the deeper workload.

    .venv/bin/python benchmarks/bench_prm_prefix.py --quick     # ~20 s
    .venv/bin/python benchmarks/bench_prm_prefix.py             # depths 4 and 10
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from common import ROOT, SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

MODES = {
    "plain": {"share_prefix": False},
    "plain, full head": {"share_prefix": False, "candidate_head": False},
    "shared": {"head_cache_size": 0},
    "shared+question": {},
    "shared+children": {"head_cache_size": 256, "cache_children": True},
}
WORDS = "Janet sells 16 - 3 - 4 = 9 duck eggs a day . She makes 9 * 2 = $18 every day at the market".split()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="depth 4 only, one repeat")
    p.add_argument("--problems", type=int, default=8)
    p.add_argument("--depths", default="4,10", help="comma-separated search depths to replay")
    p.add_argument("--min_words", type=int, default=5)
    p.add_argument("--max_words", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per cell (the best is shown)")
    p.add_argument("--prm", default=None, help="PRM directory (default: the tiny PRM under .cache/tiny/prm)")
    p.add_argument("--data", default=str(SHARED_DATA / "gsm8k" / "test.jsonl"))
    p.add_argument("--device", default="cpu", help="cpu, cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "auto"],
                   help="PRM dtype (max |diff| against the plain path grows to ~1e-2 in bfloat16)")
    p.add_argument("--shape", default="tiny", choices=["tiny", "qwen2.5-0.5b"],
                   help="size of the built random-init PRM when --prm is not given")
    return p.parse_args(argv)


def questions(path: Path, n: int) -> list[str]:
    if path.exists():
        rows = [json.loads(line) for line in path.read_text().splitlines()[:n]]
        return [r["question"] for r in rows]
    return [f"Tom has {i + 3} apples and buys {2 * i + 1} more. How many apples does he have now?" for i in range(n)]


def replay(qs: list[str], depth: int, lo: int, hi: int, seed: int = 0):
    """calls[(problem, depth)] -> the ScoreRequests a search makes there."""
    from equiv.search.types import ScoreRequest

    rng = random.Random(seed)
    calls = {}
    for p, question in enumerate(qs):
        parents: list[tuple[str, ...]] = [()]
        for d in range(depth):
            reqs = [ScoreRequest(question, parent + (" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))),))
                    for parent in parents for _ in range(4)]
            calls[(p, d)] = reqs
            parents = [reqs[0].steps, reqs[min(5, len(reqs) - 1)].steps]
    return calls


def run_mode(prm, calls, n: int, depth: int, concurrent: bool) -> tuple[float, list]:
    if hasattr(prm, "clear_cache"):
        prm.clear_cache()
    scores = []
    start = time.perf_counter()
    if concurrent:
        for d in range(depth):
            scores += prm.score([q for p in range(n) for q in calls[(p, d)]])
    else:
        for p in range(n):
            for d in range(depth):
                scores += prm.score(calls[(p, d)])
    return time.perf_counter() - start, scores


def reorder(scores: list, n: int, depth: int, calls) -> list:
    """Concurrent-order scores back into problem-major order, to compare with the other order."""
    out, pos = {}, 0
    for d in range(depth):
        for p in range(n):
            k = len(calls[(p, d)])
            out[(p, d)] = scores[pos : pos + k]
            pos += k
    return [s for p in range(n) for d in range(depth) for s in out[(p, d)]]


def max_difference(a: list[list[float]], b: list[list[float]]) -> float:
    """Largest absolute difference between two runs' per-step scores (same requests, same order)."""
    assert [len(x) for x in a] == [len(x) for x in b]
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from equiv.search.rewards import RewardConfig, build_reward_model
    from equiv.search.tiny import build_tiny_prm

    if args.device == "cpu":
        torch.set_num_threads(1)
    suffix = "" if args.shape == "tiny" else f"-{args.shape}"
    prm_dir = args.prm or str(build_tiny_prm(ROOT / ".cache" / "tiny" / f"prm{suffix}", shape=args.shape))
    depths = [4] if args.quick else [int(x) for x in args.depths.split(",")]
    repeats = 1 if args.quick else args.repeats
    qs = questions(Path(args.data), args.problems)
    prms = {m: build_reward_model(RewardConfig(model=prm_dir, device=args.device, dtype=args.dtype, options=dict(o)))
            for m, o in MODES.items()}
    print(f"PRM {prm_dir}; {args.problems} questions, 2 parents x 4 children per depth, steps of "
          f"{args.min_words}-{args.max_words} words; {args.device} {args.dtype}"
          f"{', torch 1 thread' if args.device == 'cpu' else ''}; best of {repeats}")
    header = f"{'depth':>6}  {'mode':<18}{'conc. 1 (s)':>12}{'conc. K (s)':>12}{'vs plain at 1':>15}{'max |diff|':>12}"
    print(header)
    print("-" * len(header))
    speedup = None
    for depth in depths:
        calls = replay(qs, depth, args.min_words, args.max_words)
        for prm in prms.values():  # warm-up
            prm.score(calls[(0, 0)])
        times, reference = {}, None
        for mode, prm in prms.items():
            best1 = bestk = float("inf")
            for _ in range(repeats):
                t1, s1 = run_mode(prm, calls, args.problems, depth, concurrent=False)
                tk, sk = run_mode(prm, calls, args.problems, depth, concurrent=True)
                best1, bestk = min(best1, t1), min(bestk, tk)
            sk = reorder(sk, args.problems, depth, calls)
            if reference is None:
                reference = s1
            diff = max(max_difference(reference, s1), max_difference(reference, sk))
            times[mode] = (best1, bestk)
            print(f"{depth:>6}  {mode:<18}{best1:>12.3f}{bestk:>12.3f}{times['plain'][0] / best1:>14.2f}x{diff:>12.1e}")
        speedup = times["plain"][0] / times["shared+question"][0]
        print(f"depth {depth}: two-row head vs full head (plain path, concurrency 1): "
              f"{times['plain, full head'][0] / times['plain'][0]:.2f}x")
    print(f"speedup: {speedup:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
