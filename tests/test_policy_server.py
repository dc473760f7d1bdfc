"""A policy server that is not what ``--policy.url`` claims (issue 66, holes 4, 5 and 11).

``search_cli.py eval --policy.backend llamacpp --policy.url URL`` against small servers on
loopback: one answering 404, ``{}``, a negative ``tokens_predicted``, NaN log-probabilities, a
body past the cap or a gzip bomb, or trickling its answer a byte at a time. Each stops the run in
one line naming the server, with exit 2, and leaves the run directory as a later good run can
resume and ``compare`` can read. The GGUF file is a tokenizer-only one (tests.helpers.gguf_files; the policy
reads it for its prompts; the server does the generating)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import search_cli
from tests.helpers.gguf_files import write_gguf
from tests.helpers.hostile_http import Answer, gzip_bomb, send, send_json, serving, trickle, within
from tests.helpers.runs import sigint_at_default

REPO = Path(__file__).resolve().parents[1]
GOOD = {"content": "The answer is 7", "tokens_predicted": 5, "stop_type": "eos",
        "completion_probabilities": [{"logprob": -0.1}] * 4}


@pytest.fixture()
def setup(tmp_path, monkeypatch) -> dict[str, Any]:
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "cache"))  # the converted tokenizer
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({"question": q, "answer": "#### 7"}) + "\n" for q in (
        "Tom has 3 apples and buys 4 more. How many apples does he have?",
        "Ann has 2 pens and buys 5 more. How many pens does she have?")))
    return {"gguf": write_gguf(tmp_path / "tok.gguf", tokenizer=True), "problems": problems, "out": tmp_path / "run",
            "env": dict(os.environ, EQUIV_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO),
                        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")}


def eval_args(setup: dict[str, Any], url: str, *extra: str) -> list[str]:
    return ["eval", "--algo", "mcts", "--out", str(setup["out"]), "--policy.backend", "llamacpp",
            "--policy.model", str(setup["gguf"]), "--policy.url", url, "--policy.prompt_format", "plain",
            "--policy.step_delimiter", "\n", "--policy.max_new_tokens", "16", "--reward.kind", "likelihood",
            "--reward.model", "", "--data.dataset", "jsonl", "--data.path", str(setup["problems"]),
            "--search.width", "2", "--search.num_simulations", "1", "--search.max_depth", "3",
            "--pruner.strategy", "none", *extra]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def records(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def answering(payload: Any) -> Answer:
    return lambda handler, _: send_json(handler, payload)


def not_found(handler, _: bytes) -> None:
    send(handler, 404, b"File Not Found", {"Content-Type": "text/plain"})


def test_a_server_that_is_not_llama_cpp_stops_the_run_and_a_good_rerun_resumes(setup):
    """Before: an error record for every problem and exit 0. Now exit 2 and one line naming the
    server and what it answered; no record is written, so the same directory resumed against a
    well-formed server completes, and ``compare`` reads it. (In process; the real processes are
    the slow twin below.)"""
    with serving(not_found) as (url, _):
        bad = search_cli(*eval_args(setup, url))
    assert bad.returncode == 2, bad.stderr[-2000:]
    (line,) = error_lines(bad.stderr)
    assert url in line and "404" in line and "first batch" in line and "policy.url" in line
    assert records(setup["out"]) == []
    with serving(answering(GOOD)) as (url, _):
        assert search_cli(*eval_args(setup, url)).returncode == 0
    assert [r["error"] for r in records(setup["out"])] == [None, None]
    assert search_cli("compare", str(setup["out"]), "--json").returncode == 0


@pytest.mark.slow
def test_a_server_that_is_not_llama_cpp_stops_the_real_cli_and_a_good_rerun_resumes(setup):
    """The same through ``search_cli.py eval`` in real processes."""
    with serving(not_found) as (url, asked):
        bad = subprocess.run([sys.executable, "search_cli.py", *eval_args(setup, url)], cwd=REPO, env=setup["env"],
                             capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2, bad.stderr[-2000:]
    (line,) = error_lines(bad.stderr)
    assert url in line and "404" in line and "first batch" in line and "policy.url" in line
    assert "Traceback" not in bad.stderr and records(setup["out"]) == []
    asked_before = len(asked)
    assert asked_before >= 1

    with serving(answering(GOOD)) as (url, _):
        good = subprocess.run([sys.executable, "search_cli.py", *eval_args(setup, url)], cwd=REPO,
                              env=setup["env"], capture_output=True, text=True, timeout=600)
    assert good.returncode == 0, good.stderr[-2000:]
    done = records(setup["out"])
    assert len(done) == 2 and all(r["error"] is None and r["generated_tokens"] > 0 for r in done)
    compared = search_cli("compare", str(setup["out"]), "--json")
    assert compared.returncode == 0, compared.stderr


SCHEMA_CASES = [
    ({}, "field 'content' missing"),
    ({**GOOD, "tokens_predicted": -1000000}, "field 'tokens_predicted' -1000000"),
    ({**GOOD, "tokens_predicted": 10**9}, "field 'tokens_predicted' 1000000000"),
    ({**GOOD, "tokens_predicted": True}, "field 'tokens_predicted' true"),
    ({**GOOD, "content": 7}, "field 'content' as int"),
    ({**GOOD, "stop_type": "banana"}, "field 'stop_type' \"banana\""),
    ({**GOOD, "stop_type": None}, "field 'stop_type' missing"),
    ({**GOOD, "completion_probabilities": [{"logprob": math.nan}]}, "field 'completion_probabilities[0].logprob' NaN"),
    ({**GOOD, "completion_probabilities": [{"logprob": math.inf}]}, "completion_probabilities[0].logprob' Infinity"),
    ({**GOOD, "completion_probabilities": [{"logprob": 3.0}]}, "completion_probabilities[0].logprob' 3.0"),
    ({**GOOD, "completion_probabilities": [{"prob": 0.5}]}, "completion_probabilities[0].logprob' null"),
    ({**GOOD, "completion_probabilities": {"logprob": -1}}, "field 'completion_probabilities' as dict"),
    ([GOOD], "answered list, not an object"),
]


@pytest.mark.parametrize(("payload", "field"), SCHEMA_CASES, ids=[f"case{i}" for i in range(len(SCHEMA_CASES))])
def test_every_answer_is_checked_against_the_completion_schema(payload, field):
    from equiv.search.policies.llamacpp_policy import LlamaCppServerError, completion

    with pytest.raises(LlamaCppServerError) as failed:
        completion(payload, "http://server:1", 16)
    assert "llama.cpp server at http://server:1" in str(failed.value) and field in str(failed.value)
    raw = completion(GOOD, "http://server:1", 16)
    assert (raw.text, raw.num_tokens, raw.eos, raw.stopped) == ("The answer is 7", 5, True, False)
    assert raw.logprob == pytest.approx(-0.4)


# Every schema case is checked at the function (above); through a whole eval one case shows the path
# in the default suite, the other two ride in the slow stage (a real server and run each).
@pytest.mark.parametrize(("payload", "field"), [pytest.param(*SCHEMA_CASES[0], marks=pytest.mark.slow),
                                                pytest.param(*SCHEMA_CASES[1], marks=pytest.mark.slow),
                                                SCHEMA_CASES[7]],
                         ids=["empty", "negative-tokens", "nan-logprob"])
def test_an_answer_outside_the_schema_stops_eval_in_one_line_naming_server_and_field(setup, payload, field):
    """Before: ``{}`` was a 0-token dead end (accuracy 0, exit 0), ``tokens_predicted: -1000000``
    became ``generated_tokens: -4000000`` and poisoned the directory, NaN was summed."""
    with serving(answering(payload)) as (url, _):
        result = search_cli(*eval_args(setup, url))
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = error_lines(result.stderr)
    assert f"llama.cpp server at {url}" in line and field in line, line
    assert records(setup["out"]) == []  # nothing poisoned: no record at all


@pytest.mark.parametrize("encoding", [pytest.param("identity", marks=pytest.mark.slow), "gzip"])  # gzip: the cap on inflation too
def test_an_answer_past_the_cap_is_refused_as_it_streams(setup, encoding):
    """Issue 66, hole 11: a 300 MB answer used to be read whole (2 GB resident). The cap for 16
    new tokens is about 1.1 MB; the gzip bomb (200 MB inflated, 200 KB sent) is inflated no
    further than the cap."""
    if encoding == "gzip":
        body, headers = gzip_bomb(), {"Content-Encoding": "gzip"}
    else:
        body, headers = b'{"content": "' + b"x" * 4_000_000 + b'"}', {}
    with serving(lambda h, _: send(h, 200, body, headers)) as (url, _):
        result = search_cli(*eval_args(setup, url))
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = error_lines(result.stderr)
    assert f"llama.cpp server at {url}" in line and "bytes" in line and "refused" in line


def test_a_trickled_answer_ends_at_the_request_timeout(setup):
    """Issue 66, hole 5: urllib's timeout is per read, so a server trickling a byte every 0.5 s
    held a search past ``--policy.request_timeout_s``. Now the whole request ends at it. (Here a
    byte every 0.1 s against a 0.3 s timeout: no single read waits as long as the timeout.)"""
    with serving(trickle(0.1)) as (url, _):
        result = within(120, lambda: search_cli(*eval_args(setup, url, "--policy.request_timeout_s", "0.3")))
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = error_lines(result.stderr)
    assert f"llama.cpp server at {url} did not answer within 0.3 s" in line


def test_a_server_that_fails_after_its_first_batch_fails_that_problem_only(setup):
    """A server that answered well once is a llama.cpp server having trouble: a later failure is
    the failing problem's error record (retried on a rerun), not the end of the run."""
    calls = {"n": 0}

    def flaky(handler, body):
        calls["n"] += 1
        if calls["n"] <= 2:  # the first problem's first expansion (width 2): its answer
            send_json(handler, GOOD)
        else:
            send_json(handler, {**GOOD, "tokens_predicted": -5})

    with serving(flaky) as (url, _):
        result = search_cli(*eval_args(setup, url, "--run.concurrency", "1"))
    assert result.returncode == 0, result.stderr[-2000:]
    first, second = records(setup["out"])
    assert first["error"] is None and first["correct"]
    assert "field 'tokens_predicted' -5" in second["error"] and url in second["error"]
    assert all(r["generated_tokens"] >= 0 for r in records(setup["out"]))


def _hold_the_second_problem() -> tuple[threading.Event, threading.Event, Any]:
    """A policy server's handler that answers the first problem's expansion (width 2) and holds the
    next request until ``release`` is set (``held`` says it is holding): a completion pending when
    Ctrl-C comes."""
    held, release, calls = threading.Event(), threading.Event(), {"n": 0}

    def slow_second_problem(handler, _body):
        calls["n"] += 1
        if calls["n"] > 2 and not release.is_set():
            held.set()
            release.wait(600)
        send_json(handler, GOOD)

    return held, release, slow_second_problem


def test_ctrl_c_during_a_slow_completion_stops_eval_and_the_run_resumes(setup):
    """Ctrl-C used to wait for the pending completion: the policy sat in ``Future.result()`` while
    ``asyncio.run`` had only cancelled the run's task, so ``search_cli.py eval`` went on until the
    server answered (up to ``request_timeout_s``). Here the server holds the second problem's first
    request, and a real SIGINT reaches the eval running in this process's main thread (where
    ``asyncio.run`` installs its Ctrl-C handler, as in a real process): exit 130 while the
    completion is still pending, the first problem's record whole, and the same command resumes
    the run to the end. The held request is let go only after the eval returned, or by a watchdog
    60 s after the SIGINT (which fails the test). The same through a real process is the slow twin
    below."""
    held, release, slow_second_problem = _hold_the_second_problem()
    watchdog_fired = threading.Event()

    def ctrl_c() -> None:
        if not held.wait(300):
            return
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        if not release.wait(60):  # only the answer could end the eval now: let it, and fail below
            watchdog_fired.set()
            release.set()

    with serving(slow_second_problem) as (url, _):
        argv = eval_args(setup, url, "--run.concurrency", "1")
        # SIGINT at its default, as in a shell's foreground command (an xdist worker or a suite
        # started in the background may have it ignored, and asyncio.run would not install its handler).
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        killer = threading.Thread(target=ctrl_c, daemon=True)
        killer.start()
        try:
            interrupted = search_cli(*argv)
        finally:
            signal.signal(signal.SIGINT, previous)
            release.set()
            killer.join(5)
        assert held.is_set(), "the eval never reached the second problem"
        assert not watchdog_fired.is_set(), "search_cli.py eval still ran 60 s after Ctrl-C, waiting for the pending completion"
        assert interrupted.returncode == 130, interrupted.stderr[-2000:]
        assert "interrupted: 1 record(s) kept" in interrupted.stderr, interrupted.stderr[-2000:]
        assert "Traceback" not in interrupted.stderr, interrupted.stderr[-2000:]
        (first,) = records(setup["out"])  # every line whole (json.loads on each)
        assert first["error"] is None

        resumed = search_cli(*argv)  # the same command: resumes
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    done = records(setup["out"])
    assert len(done) == 2 and done[0] == first and all(r["error"] is None for r in done)


@pytest.mark.slow
def test_ctrl_c_during_a_slow_completion_stops_the_real_eval_and_the_run_resumes(setup):
    """Ctrl-C used to wait for the pending completion: the policy sat in ``Future.result()`` while
    ``asyncio.run`` had only cancelled the run's task, so ``search_cli.py eval`` went on until the
    server answered (up to ``request_timeout_s``). Here the server holds the second problem's first
    request until the test lets it go, and the test lets it go only after the CLI has exited: exit
    130 while the completion is still pending, the first problem's record whole, and the same
    command resumes the run to the end. (A real process; the default suite has the in-process
    twin above, with a real SIGINT in this process's main thread.)"""
    held, release, slow_second_problem = _hold_the_second_problem()

    with serving(slow_second_problem) as (url, _):
        argv = eval_args(setup, url, "--run.concurrency", "1")
        # SIGINT at its default in the eval (sigint_at_default): a suite started in the background
        # by a non-interactive shell hands it down ignored, and the eval would never see this Ctrl-C.
        proc = subprocess.Popen([sys.executable, "search_cli.py", *argv], cwd=REPO, env=setup["env"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=sigint_at_default)
        try:
            assert held.wait(300), "the eval never reached the second problem"
            proc.send_signal(signal.SIGINT)
            try:  # the held request is still pending: only Ctrl-C can end the eval now
                _, stderr = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail("search_cli.py eval still ran 60 s after Ctrl-C, waiting for the pending completion")
        finally:
            still_pending = not release.is_set()
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert still_pending and proc.returncode == 130, stderr[-2000:]
        assert "interrupted: 1 record(s) kept" in stderr and "Traceback" not in stderr, stderr[-2000:]
        (first,) = records(setup["out"])  # every line whole (json.loads on each)
        assert first["error"] is None

        resumed = search_cli(*argv)  # the same command, in this process: resumes
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    done = records(setup["out"])
    assert len(done) == 2 and done[0] == first and all(r["error"] is None for r in done)
