"""What pruning saves with a policy that solves problems: four arms, MCTS and SBS, resumable.

The measurement of issue #55. One loaded policy (default ``bundled:qwen2.5-coder-1.5b-instruct``
on the ``llamacpp`` backend), the ``likelihood`` reward (no PRM, see docs/results.md for why),
GSM8K *test* problems from ``--start``, and for each search algorithm four arms on the same
problems and seeds:

- ``unpruned``: every sample is a child, exact copies included (``search.dedupe_exact: false``);
- ``exact``: exact-text dedup only, the free baseline (search-and-learn's ``filter_duplicates``;
  equiv's default ``search.dedupe_exact`` with ``--pruner.strategy none``; there is no ``exact``
  pruner strategy);
- ``formula``: the rule that merges steps whose arithmetic normalises alike (no training);
- ``model``: the shipped judge (``--judge``, default ``outputs/gsm8k_equiv/ensemble``: the two-seed
  recipe of docs/training.md).

Resumable and interruptible: each (algorithm, arm) is an ordinary run directory under ``--out``
(``search_cli.py compare`` / ``report`` read them), the problems go in chunks of ``--chunk``
with every arm brought to the same problems before the next chunk starts, so a run stopped at
any point leaves paired arms, and rerunning the same command continues where it stopped.
Engine seconds per arm accumulate in ``<run>/bench_seconds.json``. A progress bar counts
(chunk, algorithm, arm) units.

Printed per algorithm and arm, over the problems every arm of that algorithm finished:
accuracy, mean generated tokens, the ratio to unpruned with a paired bootstrap spread over
problems, the accuracy difference to unpruned with its spread, the pruner's merges, and the
judge's share of the engines' seconds. Every merged pair of the ``model`` arm goes to
``<out>/<algo>/merges.md`` and ``merges.jsonl``, to be read blind against RUBRIC.md. The last
line is ``token_ratio: <model / unpruned, MCTS>``.

    python benchmarks/bench_policy_search.py --problems 30            # the issue's measurement
    python benchmarks/bench_policy_search.py --problems 2 --algos mcts  # a look (tens of minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench_real_lm import TimedJudge, TimedPolicy, merged_pairs, merges_markdown
from common import ROOT  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.errors import InputError, exit_on_input_error  # noqa: E402
from equiv.rundir.io import is_finite_number, read_json_file, write_atomic  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "gsm8k"
ARMS = ("unpruned", "exact", "formula", "model")
ALGOS = ("mcts", "sbs")
HELD_OUT = range(1050, 1319)  # GSM8K test problems 1050-1318: never used for development
SECONDS = "bench_seconds.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled:qwen2.5-coder-1.5b-instruct", help="policy (a GGUF spelling for llamacpp)")
    ap.add_argument("--backend", default="llamacpp", choices=("llamacpp", "transformers", "vllm"))
    ap.add_argument("--prompt_format", default="auto", help="the policy's prompt format (auto: its chat template)")
    ap.add_argument("--judge", default=str(ROOT / "outputs" / "gsm8k_equiv" / "ensemble"), help="the model arm's judge")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--data", default=str(DATA / "test.jsonl"))
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--problems", type=int, default=30)
    ap.add_argument("--chunk", type=int, default=2, help="problems every arm finishes before the next ones start")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--simulations", type=int, default=2, help="MCTS simulations per committed step")
    ap.add_argument("--beam", type=int, default=2, help="SBS beam size")
    ap.add_argument("--max_depth", type=int, default=10)
    ap.add_argument("--max_new_tokens", type=int, default=160, help="tokens of one step")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--concurrency", type=int, default=2, help="problems in flight per run")
    ap.add_argument("--parallel", type=int, default=8, help="llamacpp slots (sequences decoded together)")
    ap.add_argument("--threads", type=int, default=0, help="llamacpp threads (0 = every core)")
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench_policy_search"))
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    ap.add_argument("--report_only", action="store_true", help="print the table from the runs so far; run nothing")
    return ap.parse_args(argv)


def check_range(start: int, count: int) -> None:
    """Refuse the held-out problems (1050-1318 of GSM8K test) before anything loads."""
    wanted = range(start, start + count)
    if start < 0 or count < 1:
        raise InputError(f"need start >= 0 and problems >= 1, got {start} and {count}", field="problems")
    if wanted.start < HELD_OUT.stop and HELD_OUT.start < wanted.stop:
        raise InputError(f"problems {wanted.start}-{wanted.stop - 1} overlap the held-out 1050-1318 of GSM8K test",
                         field="start")


def read_seconds(run_dir: Path) -> dict[str, float]:
    """The arm's running engine-second totals (``{}`` before its first chunk). A damaged file is one
    line naming it, never a traceback on every rerun, ``--report_only`` included (issue 66, hole 11)."""
    path = run_dir / SECONDS
    if not path.exists():
        return {}
    try:
        totals = read_json_file(path)
        if not isinstance(totals, dict) or not all(is_finite_number(v) for v in totals.values()):
            raise InputError("expected a JSON object of finite seconds", path=path)
    except InputError as err:
        raise InputError(f"{err}; delete it to restart this arm's seconds (its results are kept)") from None
    return {str(k): float(v) for k, v in totals.items()}


def add_seconds(run_dir: Path, **seconds: float) -> dict[str, float]:
    """Add this session's engine seconds to the run's running totals (kept across resumes),
    replaced atomically (temporary file, fsync, rename): a kill mid-write leaves the old totals
    or the new ones, never a torn file."""
    totals = read_seconds(run_dir)
    for key, value in seconds.items():
        totals[key] = float(totals.get(key, 0.0)) + float(value)
    write_atomic(run_dir / SECONDS, json.dumps(totals, indent=2) + "\n")
    return totals


def paired_ratio(base: list[float], arm: list[float], *, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """sum(arm) / sum(base) over problems, and its bootstrap standard deviation (problems resampled)."""
    ratio = sum(arm) / sum(base) if sum(base) else float("nan")
    if len(base) < 2:
        return ratio, float("nan")
    rng = random.Random(seed)
    idx = range(len(base))
    samples = []
    for _ in range(draws):
        pick = [rng.choice(idx) for _ in idx]
        b = sum(base[i] for i in pick)
        if b:
            samples.append(sum(arm[i] for i in pick) / b)
    return ratio, statistics.pstdev(samples) if samples else float("nan")


def paired_difference(base: list[float], arm: list[float], *, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """mean(arm - base) over problems and its bootstrap standard deviation."""
    diffs = [a - b for a, b in zip(arm, base)]
    if not diffs:
        return float("nan"), float("nan")
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean, float("nan")
    rng = random.Random(seed)
    samples = [sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(draws)]
    return mean, statistics.pstdev(samples)


def pruner_for(arm: str, judge: str) -> Any:
    from equiv.prune import PrunerConfig

    if arm in ("unpruned", "exact"):
        return PrunerConfig(strategy="none")
    if arm == "model":
        return PrunerConfig(strategy="model", model=judge, device="cpu")
    return PrunerConfig(strategy=arm)


def search_for(args: argparse.Namespace, algo: str, arm: str) -> Any:
    from equiv.search.config import SearchConfig

    return SearchConfig(
        width=args.width, max_depth=args.max_depth, num_simulations=args.simulations, beam_size=args.beam,
        dedupe_exact=arm != "unpruned",
    )


def table(out: Path, algos: list[str], arms: list[str]) -> dict[str, dict[str, Any]]:
    """Figures per algorithm and arm over the problems every arm of that algorithm finished."""
    from equiv.rundir import read_pairs, read_records

    figures: dict[str, dict[str, Any]] = {}
    for algo in algos:
        by_arm: dict[str, dict[str, dict[str, Any]]] = {}
        for arm in arms:
            path = out / algo / arm / "results.jsonl"
            records = read_records(path)[0] if path.exists() else []
            by_arm[arm] = {str(r["id"]): r for r in records if not r.get("error")}
        shared = set.intersection(*(set(v) for v in by_arm.values())) if by_arm else set()
        common = sorted(shared, key=str)
        rows: dict[str, Any] = {"problems": len(common)}
        base_tokens = [float(by_arm["unpruned"][p]["generated_tokens"]) for p in common] if "unpruned" in by_arm else []
        base_correct = [float(bool(by_arm["unpruned"][p]["correct"])) for p in common] if "unpruned" in by_arm else []
        for arm in arms:
            recs = [by_arm[arm][p] for p in common]
            tokens = [float(r["generated_tokens"]) for r in recs]
            correct = [float(bool(r["correct"])) for r in recs]
            run_dir = out / algo / arm
            seconds = read_seconds(run_dir)
            pairs_path = run_dir / "judge_pairs.jsonl"
            pairs = read_pairs(pairs_path)[0] if pairs_path.exists() else []
            merges = merged_pairs(recs, [p for p in pairs if str(p["id"]) in shared], arm)
            ratio, ratio_sd = paired_ratio(base_tokens, tokens) if base_tokens else (float("nan"), float("nan"))
            acc_diff, acc_sd = paired_difference(base_correct, correct)
            engine_s = float(seconds.get("generation", 0.0)) + float(seconds.get("judge", 0.0))
            rows[arm] = {
                "accuracy": sum(correct) / len(correct) if correct else float("nan"),
                "accuracy_minus_unpruned": acc_diff, "accuracy_sd": acc_sd,
                "mean_tokens": sum(tokens) / len(tokens) if tokens else float("nan"),
                "ratio": ratio, "ratio_sd": ratio_sd,
                "duplicates": sum(int(r.get("duplicates") or 0) for r in recs),
                "pruned": sum(int(r.get("pruned") or 0) for r in recs),
                "candidates": sum(int(r.get("candidates") or 0) for r in recs),
                "merged_pairs": len(merges),
                "judge_share": float(seconds.get("judge", 0.0)) / engine_s if engine_s else 0.0,
                "seconds_per_problem": sum(float(r.get("seconds") or 0.0) for r in recs) / len(recs) if recs else 0.0,
                "merges": merges,
            }
        figures[algo] = rows
    return figures


def print_table(figures: dict[str, dict[str, Any]], arms: list[str]) -> None:
    for algo, rows in figures.items():
        print(f"\n{algo.upper()}: {rows['problems']} problems every arm finished")
        header = (f"{'arm':<9} {'acc %':>6} {'d acc (sd)':>13} {'tokens':>8} {'ratio (sd)':>15} {'dups':>5} "
                  f"{'merged':>6} {'pairs':>6} {'judge %':>8} {'s/problem':>9}")
        print(header)
        print("-" * len(header))
        for arm in arms:
            r = rows[arm]
            print(f"{arm:<9} {100 * r['accuracy']:>6.1f} {100 * r['accuracy_minus_unpruned']:>+6.1f} ({100 * r['accuracy_sd']:>4.1f})"
                  f" {r['mean_tokens']:>8.1f} {r['ratio']:>7.3f} ({r['ratio_sd']:.3f}) {r['duplicates']:>5} {r['pruned']:>6}"
                  f" {r['merged_pairs']:>6} {100 * r['judge_share']:>8.2f} {r['seconds_per_problem']:>9.0f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with exit_on_input_error():
        return run(args)


def run(args: argparse.Namespace) -> int:
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    if set(arms) - set(ARMS) or "unpruned" not in arms:
        raise InputError(f"choose from {', '.join(ARMS)}, including unpruned; got {args.arms}", field="arms")
    if set(algos) - set(ALGOS):
        raise InputError(f"choose from {', '.join(ALGOS)}; got {args.algos}", field="algos")
    check_range(args.start, args.problems)
    out = Path(args.out)
    if not args.report_only:
        measure(args, out, algos, arms)
    figures = table(out, algos, arms)
    print_table(figures, arms)
    for algo in algos if "model" in arms else []:  # a run without the judge's arm keeps the merges file
        merges = figures[algo]["model"].get("merges", [])
        (out / algo).mkdir(parents=True, exist_ok=True)
        (out / algo / "merges.jsonl").write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in merges),
                                                 encoding="utf-8")
        (out / algo / "merges.md").write_text(merges_markdown(merges), encoding="utf-8")
    if args.json:
        slim = {a: {k: ({kk: vv for kk, vv in v.items() if kk != "merges"} if isinstance(v, dict) else v)
                    for k, v in rows.items()} for a, rows in figures.items()}
        Path(args.json).write_text(json.dumps({"args": vars(args), "figures": slim}, indent=2) + "\n")
    first = figures[algos[0]]
    ratio = first.get("model", {}).get("ratio") if "model" in arms else None
    print(f"\ntoken_ratio: {'nan' if ratio is None else f'{ratio:.4f}'}")
    return 0


def measure(args: argparse.Namespace, out: Path, algos: list[str], arms: list[str]) -> None:
    from tqdm import tqdm

    from equiv.data.problems import load_problems
    from equiv.prune import build_judge
    from equiv.search.config import RunConfig
    from equiv.search.policies import PolicyConfig, build_policy
    from equiv.search.rewards import RewardConfig, bind_policy_reward
    from equiv.search.runner import Engines, run_eval
    from equiv.search.tiny import resolve_tiny

    if "model" in arms and not Path(args.judge).exists():
        raise InputError("no trained judge here; build the recommended one first (trainer_cli.py recipe gsm8k, "
                         "about 20 minutes) or pass --judge DIR", path=args.judge)
    problems = load_problems("gsm8k", path=args.data, start=args.start, end=args.start + args.problems)
    started = time.perf_counter()
    policy = build_policy(PolicyConfig(
        backend=args.backend, model=resolve_tiny(args.model, "policy"), prompt_format=args.prompt_format,
        max_new_tokens=args.max_new_tokens, temperature=args.temperature,
        parallel=args.parallel, threads=args.threads, max_model_len=2048, device="cpu",
    ))
    print(f"policy {args.model} ({args.backend}) loaded in {time.perf_counter() - started:.0f} s; "
          f"{len(problems)} problems from {args.start}, arms {', '.join(arms)}, algorithms {', '.join(algos)}", flush=True)
    judges = {arm: build_judge(pruner_for(arm, args.judge)) for arm in arms}
    chunks = [problems[: i + args.chunk] for i in range(0, len(problems), args.chunk)]
    units = [(chunk, algo, arm) for chunk in chunks for algo in algos for arm in arms]
    for chunk, algo, arm in tqdm(units, desc="chunk x algorithm x arm", unit="run"):
        judge = judges[arm]
        timed_judge = TimedJudge(judge) if judge is not None else None
        timed_policy = TimedPolicy(policy)
        bound, reward = bind_policy_reward(timed_policy, RewardConfig(kind="likelihood", model=""))
        run_dir = out / algo / arm
        wall = time.perf_counter()
        run_eval(
            algo=algo, problems=chunk,
            engines=Engines(policy=bound, reward=reward, judge=timed_judge, pruner=pruner_for(arm, args.judge)),
            out_dir=run_dir, search=search_for(args, algo, arm),
            run=RunConfig(seeds=[args.seed], concurrency=args.concurrency, save_trees=True, progress=False),
            pruner=arm,
        )
        add_seconds(
            run_dir, generation=timed_policy.generate.seconds,
            judge=timed_judge.pair_verdicts.seconds if timed_judge is not None else 0.0,
            wall=time.perf_counter() - wall,
        )


if __name__ == "__main__":
    raise SystemExit(main())
