"""Search with a real language model: how much redundancy real sampling creates, what pruning saves.

Same problems, same seeds, one loaded policy, MCTS with the ``likelihood`` reward (the policy's
own mean token log-probability; no PRM), once without pruning and once per pruning strategy:

- ``model``: the trained equivalence judge (``--judge``, default ``outputs/gsm8k_equiv/judge``,
  written by ``python trainer_cli.py fit --config configs/gsm8k_equiv.yaml``);
- ``levenshtein`` at 0.95 (the paper's baseline), ``embedding`` (the bundled all-MiniLM-L6-v2 at
  its default 0.9), ``formula``.

Policy: ``--model`` (default ``gguf:gemma3-270m``, Google's gemma-3-270m base model from the
``[gguf]`` extra), few-shot prompts from GSM8K *train*, problems from the start of GSM8K *test*.
Every run keeps its run directory under ``--out`` (``results.jsonl``, trees, ``judge_pairs.jsonl``
with the pairs the judge merged and those it kept apart near the threshold), so ``search_cli.py
compare`` and ``report`` work on them.

Printed per strategy: accuracy, mean generated tokens per problem, the token ratio to the
unpruned run, the share of candidates merged as exact duplicates and by the judge, how many
sibling pairs the pruner merged and how many merges the claim guard vetoed, judge seconds as a
share of generation seconds, and wall seconds. The last line is
``token_ratio: <pruned/unpruned for the model judge>``.

A token saving is only worth what the merges behind it are worth, so every merged pair is also
written for reading: ``<out>/merges.jsonl`` (one MathEquiv-format line per merged pair:
``sentence1``, ``sentence2``, the ``question``, the pruner, its probability, the problem ``id``
and ``seed``; add a ``result`` 0-4 against ``../shared/data/gsm8k_equiv/RUBRIC.md`` and
``search_cli.py pairs --data`` scores any pruner on them) and ``<out>/merges.md`` (the same, as
a list to read). Label them before quoting the token ratio.

A 270M base model solves almost no GSM8K problem: accuracy near zero is expected. The token
ratio and the merge shares are the point -- they measure real redundancy among sampled steps.

    python benchmarks/bench_real_lm.py            # 3 problems, width 4, 2 simulations, depth 3
    python benchmarks/bench_real_lm.py --quick    # 1 problem, width 3, 1 simulation, depth 2 (~3.5 min)

Sizes are small because a 270M model with a 262k-token vocabulary generates slowly on a CPU
(one call of 3 problems x 4 samples x 32 tokens: tens of seconds on 2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from common import ROOT  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.errors import InputError, exit_on_input_error  # noqa: E402
from equiv.judge.decide import VerdictJSONError, verdict_from_json  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "gsm8k"
STRATEGIES = ("model", "levenshtein", "embedding", "formula")


class Timed:
    """Wraps one engine method and sums the seconds spent in it."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


class TimedPolicy:
    """The policy with its ``generate`` timed (everything else passed through)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.generate = Timed(policy.generate)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


class TimedJudge:
    def __init__(self, judge: Any) -> None:
        self.judge = judge
        self.pair_verdicts = Timed(judge.pair_verdicts)  # what the dispatcher calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self.judge, name)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gguf:gemma3-270m", help="policy: gguf:<file>, gguf:gemma3-270m, a HF dir, tiny:DIR")
    ap.add_argument("--judge", default=str(ROOT / "outputs" / "gsm8k_equiv" / "judge"), help="exported judge (model strategy)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated; 'model' is required")
    ap.add_argument("--data", default=str(DATA / "test.jsonl"))
    ap.add_argument("--fewshot", default=str(DATA / "train.jsonl"), help="exemplars (a training split)")
    ap.add_argument("--fewshot_count", type=int, default=2)
    ap.add_argument("--problems", type=int, default=3)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seeds", default="0", help="comma-separated run seeds")
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--simulations", type=int, default=2)
    ap.add_argument("--max_depth", type=int, default=3)
    ap.add_argument("--max_new_tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench_real_lm"), help="run directories go here")
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    ap.add_argument("--quick", action="store_true", help="1 problem, width 3, 1 simulation, depth 2, 1 shot, 24 tokens")
    args = ap.parse_args(argv)
    if args.quick:
        args.problems, args.width, args.simulations, args.max_depth = 1, 3, 1, 2
        args.fewshot_count, args.max_new_tokens = 1, 24
    return args


def merged_pairs(records: list[dict[str, Any]], pairs: list[dict[str, Any]], pruner: str) -> list[dict[str, Any]]:
    """The sibling pairs a run merged (``judge_pairs.jsonl``'s ``merged`` lines) as MathEquiv-format
    pairs to label: the two steps, the problem's question (from its record), the pruner, its
    probability, and the problem's ``id`` and ``seed``. Pairs of problems without a record are
    an error: they would be merges no one can place."""
    questions = {(str(r["id"]), int(r.get("seed") or 0)): r.get("question", "") for r in records}
    out: list[dict[str, Any]] = []
    for pair in pairs:
        if pair.get("kind") != "merged":
            continue
        key = (str(pair["id"]), int(pair.get("seed") or 0))
        if key not in questions:
            raise InputError(f"merged pair of problem {key[0]} seed {key[1]} has no record", field="id")
        try:  # the verdict's one JSON form, or the ``prob`` of pair logs written before it
            prob = verdict_from_json(pair).probability
        except VerdictJSONError as err:
            raise InputError(err.message, field=err.field) from None
        out.append({
            "sentence1": pair["a"], "sentence2": pair["b"], "question": questions[key],
            "pruner": pruner, "prob": prob, "depth": pair.get("depth"),
            "id": key[0], "seed": key[1],
        })
    return out


def merges_markdown(merges: list[dict[str, Any]]) -> str:
    """``merges.md``: every merged pair, grouped by pruner, as a list a person reads."""
    lines = ["# Sibling steps merged by each pruner", "",
             "Label each against ../shared/data/gsm8k_equiv/RUBRIC.md before quoting the token ratio.", ""]
    by_pruner: dict[str, list[dict[str, Any]]] = {}
    for m in merges:
        by_pruner.setdefault(m["pruner"], []).append(m)
    for pruner, rows in by_pruner.items():
        lines += [f"## {pruner}: {len(rows)} merged pairs", ""]
        for i, m in enumerate(rows, 1):
            prob = "-" if m["prob"] is None else f"{float(m['prob']):.3f}"
            lines += [f"{i}. problem {m['id']} seed {m['seed']}, depth {m['depth']}, probability {prob}",
                      f"   - a: {m['sentence1']!r}", f"   - b: {m['sentence2']!r}", ""]
    return "\n".join(lines) + "\n"


def figures(records: list[dict[str, Any]], gen_s: float, judge_s: float, wall_s: float) -> dict[str, Any]:
    """One table row from a run's records and its engine timings."""
    n = len(records)
    candidates = sum(int(r.get("candidates") or 0) for r in records)
    return {
        "problems": n,
        "errors": sum(1 for r in records if r.get("error")),
        "accuracy": sum(bool(r.get("correct")) for r in records) / n if n else 0.0,
        "mean_generated_tokens": sum(int(r.get("generated_tokens") or 0) for r in records) / n if n else 0.0,
        "candidates": candidates,
        "duplicate_share": sum(int(r.get("duplicates") or 0) for r in records) / candidates if candidates else 0.0,
        "judge_merge_share": sum(int(r.get("pruned") or 0) for r in records) / candidates if candidates else 0.0,
        "generation_seconds": gen_s,
        "judge_seconds": judge_s,
        "judge_share": judge_s / gen_s if gen_s else 0.0,
        "wall_seconds": wall_s,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with exit_on_input_error():
        return run(args)


def run(args: argparse.Namespace) -> int:
    import torch

    from equiv.data.problems import load_problems
    from equiv.prune import PrunerConfig, build_judge
    from equiv.search.tiny import resolve_tiny
    from equiv.search.config import RunConfig, SearchConfig
    from equiv.search.policies import PolicyConfig, build_policy
    from equiv.search.rewards import RewardConfig, bind_policy_reward
    from equiv.rundir import read_pairs, read_records
    from equiv.search.runner import Engines, run_eval

    if args.threads:
        torch.set_num_threads(args.threads)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = set(strategies) - set(STRATEGIES)
    if unknown or "model" not in strategies:
        raise InputError(f"choose from {', '.join(STRATEGIES)}, including model; got {args.strategies}", field="strategies")
    if "model" in strategies and not Path(args.judge).exists():
        raise InputError("no trained judge here; train it first: python trainer_cli.py fit --config "
                         "configs/gsm8k_equiv.yaml (or pass --judge DIR)", path=args.judge)
    seeds = [int(s) for s in args.seeds.split(",")]
    problems = load_problems("gsm8k", path=args.data, start=args.start, end=args.start + args.problems)
    search = SearchConfig(width=args.width, max_depth=args.max_depth, num_simulations=args.simulations)
    out = Path(args.out)

    started = time.perf_counter()
    policy_cfg = PolicyConfig(
        backend="transformers", model=resolve_tiny(args.model, "policy"), device=args.device,
        prompt_format="fewshot", fewshot_path=args.fewshot, fewshot_count=args.fewshot_count,
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, batch_requests=True,
    )
    policy = build_policy(policy_cfg)
    load_s = time.perf_counter() - started
    print(f"policy {args.model} loaded in {load_s:.1f} s; {len(problems)} problems x {len(seeds)} seed(s), "
          f"MCTS width {args.width}, {args.simulations} simulations, depth {args.max_depth}, "
          f"{args.fewshot_count} shots, torch threads {torch.get_num_threads()}", flush=True)

    rows: dict[str, dict[str, Any]] = {}
    merges: list[dict[str, Any]] = []
    for name in ["none", *strategies]:
        if name == "model":
            pruner = PrunerConfig(strategy="model", model=args.judge, device=args.device)
        elif name == "levenshtein":
            pruner = PrunerConfig(strategy="levenshtein", threshold=0.95)
        else:
            pruner = PrunerConfig(strategy=name, device=args.device) if name == "embedding" else PrunerConfig(strategy=name)
        judge = build_judge(pruner)
        timed_judge = TimedJudge(judge) if judge is not None else None
        timed_policy = TimedPolicy(policy)
        bound, reward = bind_policy_reward(timed_policy, RewardConfig(kind="likelihood", model=""))
        run_dir = out / ("unpruned" if name == "none" else name)
        if (run_dir / "results.jsonl").exists():
            (run_dir / "results.jsonl").unlink()  # a fresh measurement, not a resume
            (run_dir / "judge_pairs.jsonl").unlink(missing_ok=True)
        start = time.perf_counter()
        run_eval(
            algo="mcts", problems=problems,
            engines=Engines(policy=bound, reward=reward, judge=timed_judge, pruner=pruner),
            out_dir=run_dir, search=search, run=RunConfig(seeds=seeds, concurrency=args.concurrency, save_trees=True,
                                                          progress=False),
            pruner=name,
        )
        wall = time.perf_counter() - start
        records, _ = read_records(run_dir / "results.jsonl")
        judge_s = timed_judge.pair_verdicts.seconds if timed_judge is not None else 0.0
        rows[name] = figures(records, timed_policy.generate.seconds, judge_s, wall)
        rows[name]["run_dir"] = str(run_dir)
        pairs_path = run_dir / "judge_pairs.jsonl"
        run_merges = merged_pairs(records, read_pairs(pairs_path)[0] if pairs_path.exists() else [], name)
        merges.extend(run_merges)
        rows[name]["merged_pairs"] = len(run_merges)
        stats = getattr(judge, "stats", None)  # None for the unpruned run
        rows[name]["guard_vetoes"] = int(getattr(stats, "guarded", 0) or 0)
        rows[name]["floored"] = int(getattr(stats, "floored", 0) or 0)
        print(f"  {name}: done in {wall:.0f} s", flush=True)

    base = rows["none"]["mean_generated_tokens"]
    for row in rows.values():
        row["token_ratio"] = row["mean_generated_tokens"] / base if base else None
    print()
    header = (f"{'pruner':<12} {'acc %':>6} {'tokens':>8} {'ratio':>6} {'dup %':>6} {'judge %':>8} {'merges':>7} "
              f"{'vetoes':>7} {'floored':>7} {'judge s/gen s':>14} {'wall s':>7}")
    print(header)
    print("-" * len(header))
    for name, r in rows.items():
        ratio = "-" if r["token_ratio"] is None else f"{r['token_ratio']:.3f}"
        print(f"{'unpruned' if name == 'none' else name:<12} {100 * r['accuracy']:>6.1f} {r['mean_generated_tokens']:>8.1f} "
              f"{ratio:>6} {100 * r['duplicate_share']:>6.1f} {100 * r['judge_merge_share']:>8.1f} "
              f"{r['merged_pairs']:>7} {r['guard_vetoes']:>7} {r['floored']:>7} {r['judge_share']:>14.3f} "
              f"{r['wall_seconds']:>7.0f}")
    errors = sum(r["errors"] for r in rows.values())
    out.mkdir(parents=True, exist_ok=True)
    (out / "merges.jsonl").write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in merges), encoding="utf-8")
    (out / "merges.md").write_text(merges_markdown(merges), encoding="utf-8")
    print(f"\ndup % / judge %: candidates merged as exact duplicates / by the pruner, of all candidates; "
          f"merges: sibling pairs the pruner merged (directly or through a third sibling); vetoes: merges "
          f"the claim guard refused; floored: merges of two non-computing steps the statement floor held back; "
          f"errors: {errors}; runs in {out}")
    print(f"merged pairs to read and label: {out / 'merges.md'} ({len(merges)} pairs; {out / 'merges.jsonl'})")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "load_seconds": load_s, "rows": rows}, indent=2) + "\n")
    ratio = rows["model"]["token_ratio"]
    print(f"token_ratio: {'nan' if ratio is None else f'{ratio:.4f}'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
