"""The judge service under the third probe (issue 66, holes 1-3 and 11's ``--host``), through the
real ``search_cli.py serve`` in a subprocess, driven over loopback: a wide ``/group`` is refused
before any work while a one-pair request is answered; stopping the service by any signal stops
every process it started and frees its port, and a restart on a held port says who holds it
before loading the judge; a big body is refused before it is read (unauthenticated: 401; over
the cap: 413), without stalling anyone; ``--host`` as users type it.

Marker ``serve`` (the [serve] extra; .ci/run's serve stage). No timing assertions: the timeouts
only keep a broken server from hanging the test.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("litserve")

from equiv.serve.protocol import Limits  # noqa: E402
from tests.helpers.judges import make_tiny_judge  # noqa: E402
from tests.helpers.paths import REPO_ROOT  # noqa: E402
from tests.helpers.serve import call, running_server, session_processes, start_server  # noqa: E402

pytestmark = [pytest.mark.serve, pytest.mark.timeout(900)]

KEY = "s3cret-key"
ONE_PAIR = {"pairs": [["3 + 4 = 7 apples.", "3+4 = 7 apples"]]}


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory) -> Path:
    return make_tiny_judge(tmp_path_factory.mktemp("judge") / "judge")


def _concurrently(first, second) -> tuple:
    """Run two calls at once (``first`` started first); both answers."""
    answers: dict[str, object] = {}
    thread = threading.Thread(target=lambda: answers.__setitem__("first", first()))
    thread.start()
    answers["second"] = second()
    thread.join(timeout=600)
    return answers.get("first"), answers["second"]


# -- hole 1: one small request held the only worker for minutes ----------------------------------

def test_a_wide_group_is_refused_before_any_work_and_a_one_pair_request_is_answered(judge_dir, tmp_path):
    """Before: 91 distinct short steps (4,095 pairs) were inside the default limits and held the
    only worker (105 s with the real judge on 2 cores); a concurrent one-pair /verdicts got 504."""
    with running_server(judge_dir, log=tmp_path / "serve.log") as url:
        wide = {"steps": [f"Step {i}: she buys {i} apples and {i + 1} pears." for i in range(91)]}
        (status, body), (one, answered) = _concurrently(lambda: call(url + "/group", wide),
                                                        lambda: call(url + "/verdicts", ONE_PAIR))
        assert status == 413 and "--max_pairs" in body["error"] and "4095 pairs" in body["error"], body
        assert one == 200 and len(answered["verdicts"]) == 1, answered
        long = {"steps": [f"{i} " + "x" * 2000 for i in range(40)]}
        status, body = call(url + "/group", long)
        assert status == 413 and "--max_request_chars" in body["error"], body
        # within the limits, greedy grouping asks each step against the representatives only
        same = {"steps": ["3 + 4 = 7 apples."] * 40}
        status, body = call(url + "/group", same)
        assert status == 200 and body["classes"] == [list(range(40))] and len(body["pairs"]) == 39, body
        assert call(url + "/metrics")[1]["pairs"] == 1 + 39


# -- hole 2: a stopped service kept answering ------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["TERM", "INT", "KILL"])
def test_stopping_serve_by_any_signal_stops_every_process_it_started(judge_dir, tmp_path, signum):
    """Before: ``kill PID`` or ``kill -9`` left the uvicorn servers, the inference worker and the
    resource tracker orphaned to PID 1, still answering /health and /verdicts on the port."""
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc, url = start_server(judge_dir, out=out, log=log)
        try:
            port = int(url.rsplit(":", 1)[1])
            started = session_processes(proc.pid)
            assert len(started) >= 3, started  # the server, its uvicorn server, its inference worker, ...
            os.kill(proc.pid, signum)
            proc.wait(timeout=120)
            deadline = time.monotonic() + 120
            while session_processes(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert session_processes(proc.pid) == {}, (session_processes(proc.pid), log.read_text()[-2000:])
            with socket.socket() as probe:  # the port is free: nothing listens on it any more
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(("127.0.0.1", port))
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


def test_a_restart_on_a_held_port_says_who_holds_it_before_loading_the_judge(judge_dir, tmp_path):
    """Before: the second serve loaded the judge, printed "serving ... at", then failed "Address
    already in use"."""
    with running_server(judge_dir, log=tmp_path / "serve.log") as url:
        port = url.rsplit(":", 1)[1]
        done = subprocess.run([sys.executable, "search_cli.py", "serve", "--model", str(judge_dir), "--port", port,
                               "--device", "cpu"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert call(url + "/health")[0] == 200  # the first one is untouched
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert f"--port {port}" in lines[0] and "already in use by PID" in lines[0] and "search_cli.py serve" in lines[0]
    assert "serving" not in done.stderr


# -- hole 3: a big body stalled everyone, before authentication ---------------------------------

def _raw_post(port: int, path: str, head: dict[str, str], chunks, *, chunked: bool = False) -> tuple[int, dict]:
    """POST ``chunks`` over a bare socket and read the answer as soon as one comes (the server may
    answer before the body is whole, and close): (status, JSON body)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             *(f"{k}: {v}" for k, v in head.items())] + (["Transfer-Encoding: chunked"] if chunked else [])
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        try:
            for chunk in chunks:
                if select.select([sock], [], [], 0)[0]:
                    break  # answered already
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        except OSError:  # the server answered and closed while we sent
            pass
        try:
            while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except ConnectionResetError:
            pass
    head_bytes, _, body = answer.partition(b"\r\n\r\n")
    assert head_bytes.startswith(b"HTTP/1.1 "), answer[:300]
    return int(head_bytes.split()[1]), json.loads(body[:_length(answer)] or b"null")


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 1 << 30


def _pairs_body(size: int):
    """A ``{"pairs": [[], [], ...]}`` body of ``size`` bytes, in 1 MB chunks."""
    yield b'{"pairs": ['
    chunk = b"[]," * ((1 << 20) // 3)
    for _ in range(size // len(chunk)):
        yield chunk


def test_a_big_body_is_refused_before_it_is_read_and_stalls_no_one(judge_dir, tmp_path):
    """Before: a 60 MB body (under the 64 MiB cap) was read and parsed whole, 1.9 GB and seconds of
    the event loop, before the pair limit or LitServe's API key refused it; unauthenticated too."""
    with running_server(judge_dir, log=tmp_path / "serve.log", env={"LIT_SERVER_API_KEY": KEY}) as url:
        port = int(url.rsplit(":", 1)[1])
        big = 60_000_000
        status, body = _raw_post(port, "/verdicts", {"Content-Length": str(big)}, _pairs_body(2 << 20))
        assert status == 401 and "X-API-Key" in body["error"], body  # before a byte of the body was read
        status, body = _raw_post(port, "/verdicts", {"Content-Length": str(big), "X-API-Key": KEY},
                                 _pairs_body(2 << 20))
        assert status == 413 and "--max_request_chars" in body["error"], body  # by its Content-Length
        # chunked (no length declared): refused once past the cap, while a one-pair request is answered
        keyed = {"X-API-Key": KEY}

        def one_pair():
            return _raw_post(port, "/verdicts", {"X-API-Key": KEY, "Content-Length": str(len(json.dumps(ONE_PAIR)))},
                             [json.dumps(ONE_PAIR).encode()])

        (status, body), (one, answered) = _concurrently(
            lambda: _raw_post(port, "/verdicts", {"X-API-Key": KEY}, _pairs_body(Limits().body_limit + (4 << 20)),
                              chunked=True),
            one_pair)
        assert status == 413 and "--max_request_chars" in body["error"], body
        assert one == 200 and len(answered["verdicts"]) == 1, answered
        # under the byte cap, a body of more items than the pairs allow is refused before it is parsed
        empties = b'{"pairs": [' + b"[]," * 999_998 + b"[]]}"
        status, body = _raw_post(port, "/verdicts", {**keyed, "Content-Length": str(len(empties))}, [empties])
        assert status == 413 and "--max_pairs" in body["error"], body
        assert call(url + "/verdicts", ONE_PAIR)[0] == 401


# -- hole 11: --host as users type it ---------------------------------------------------------------

@pytest.mark.parametrize("host, bound", [("localhost", "127.0.0.1"), ("0", "0.0.0.0")])
def test_host_is_read_as_users_type_it(judge_dir, tmp_path, host, bound):
    """Before: ``--host localhost`` (or ``0``) loaded the judge, printed "serving", then ended in a
    traceback: host must be '0.0.0.0', '127.0.0.1', or '::'."""
    log = tmp_path / "serve.log"
    with running_server(judge_dir, "--host", host, log=log) as url:
        assert call(url + "/verdicts", ONE_PAIR)[0] == 200
    assert f"at http://{bound}:{url.rsplit(':', 1)[1]}" in log.read_text(), log.read_text()


@pytest.mark.parametrize("host", ["::1", "[::1]", "10.1.2.3", "judge.example"])
def test_a_host_litserve_cannot_bind_is_refused_in_one_line_before_loading(judge_dir, host):
    done = subprocess.run([sys.executable, "search_cli.py", "serve", "--model", str(judge_dir), "--host", host,
                           "--device", "cpu"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--host" in lines[0] and "127.0.0.1" in lines[0], done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr
