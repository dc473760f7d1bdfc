"""One llama.cpp request for a prompt's samples (``n_cmpl``) against one request per sample.

The ``llamacpp`` backend asks for the ``n`` samples of a prompt in one ``/completion`` request:
llama.cpp evaluates the prompt once and copies its KV cache to the other samples' slots. Before,
each sample was its own request, and each slot evaluated the prompt (or the part its last task had
not left in its cache) itself. The policy still asks that way of a server that ignores ``n_cmpl``
(same seeds, same samples), which is the baseline here: ``per_sample`` runs the policy with that
path forced, ``n_cmpl`` as it runs in search. The workload is a walk like the search's: several
GSM8K test problems at once (one ``generate`` call, as the search batches them), each expanded at
``--width`` samples ``--depth`` times along its first sample. Each run starts a fresh server; the
two ways alternate ``--runs`` times. Printed: one row per run (seconds, tokens generated), the
ratio of the mean seconds, ``n_cmpl`` / ``per_sample``, and ``speedup:`` its inverse.

    python benchmarks/bench_llamacpp_n_cmpl.py                      # the bundled 1.5B, 2 problems, width 10
    python benchmarks/bench_llamacpp_n_cmpl.py --model gguf:gemma3-270m --width 3 --depth 2 --runs 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

WAYS = ("per_sample", "n_cmpl")


def walk(policy, questions: list[str], width: int, depth: int) -> int:
    """Expand every question ``depth`` times along its first sample; the tokens generated."""
    from equiv.search.types import StepRequest

    steps: list[tuple[str, ...]] = [() for _ in questions]
    tokens = 0
    for d in range(depth):
        answers = policy.generate([StepRequest(q, s, n=width, seed=1000 + d) for q, s in zip(questions, steps)])
        for i, candidates in enumerate(answers):
            tokens += sum(c.num_tokens for c in candidates)
            steps[i] = steps[i] + (candidates[0].text,)
    return tokens


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled:qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--data", default=str(SHARED_DATA / "gsm8k" / "test.jsonl"))
    ap.add_argument("--start", type=int, default=2, help="the first problem (GSM8K test line)")
    ap.add_argument("--problems", type=int, default=2, help="problems at once")
    ap.add_argument("--width", type=int, default=10)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2, help="runs of each way, alternating")
    ap.add_argument("--parallel", type=int, default=20, help="llama.cpp slots (policy.parallel)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max_new_tokens", type=int, default=160)
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    from equiv.data.problems import load_problems
    from equiv.search.policies import PolicyConfig, build_policy

    problems = load_problems("gsm8k", path=args.data, start=args.start, end=args.start + args.problems)
    questions = [p.question for p in problems]
    rows = []
    for run in range(args.runs):
        for way in WAYS:
            policy = build_policy(PolicyConfig(backend="llamacpp", model=args.model, max_new_tokens=args.max_new_tokens,
                                               parallel=args.parallel, threads=args.threads, max_model_len=2048,
                                               temperature=0.7))
            try:
                policy.one_request_per_sample = way == "per_sample"  # the path a server without n_cmpl gets
                started = time.perf_counter()
                tokens = walk(policy, questions, args.width, args.depth)
                rows.append({"way": way, "run": run, "seconds": time.perf_counter() - started, "tokens": tokens})
            finally:
                policy.close()
            print(f"{way:>10}  run {run}  {rows[-1]['seconds']:8.1f} s  {tokens:7d} tokens", flush=True)
    mean = {w: sum(r["seconds"] for r in rows if r["way"] == w) / args.runs for w in WAYS}
    ratio = mean["n_cmpl"] / mean["per_sample"]
    print(f"mean seconds: per_sample {mean['per_sample']:.1f}, n_cmpl {mean['n_cmpl']:.1f}")
    print(f"ratio: n_cmpl / per_sample = {ratio:.2f}")
    print(f"speedup: {1 / ratio:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "rows": rows, "ratio": ratio}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
