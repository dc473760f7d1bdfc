"""A real ``search_cli.py serve`` on a free loopback port, started and stopped by a test."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests.helpers.paths import REPO_ROOT
from tests.helpers.runs import sigint_at_default

STARTUP_SECONDS = 240  # LitServe spawns its worker, which imports torch and loads the judge (loaded 2-core box)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, payload: Any = None, *, raw: bytes | None = None, method: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, parsed JSON body) of one request; an HTTP error status is returned, not raised."""
    data = raw if raw is not None else (None if payload is None else json.dumps(payload).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as response:
            return response.status, _parsed(response.read())
    except urllib.error.HTTPError as err:
        return err.code, _parsed(err.read())


def _parsed(body: bytes) -> Any:
    """JSON, or the text itself (``/health`` answers ``ok``)."""
    try:
        return json.loads(body or b"null")
    except json.JSONDecodeError:
        return body.decode("utf-8", "replace")


def start_server(model: Path, *extra: str, out: Any = subprocess.DEVNULL, log: Path | None = None,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """``search_cli.py serve --model MODEL`` on a free loopback port, in a session of its own (its
    id is the server's PID, so a test finds every process it started); (process, URL) once
    ``/health`` is 200. ``env``: variables set on top of this process's environment."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           **(env or {})}
    proc = subprocess.Popen([sys.executable, "search_cli.py", "serve", "--model", str(model), "--port", str(port),
                             "--device", "cpu", *extra], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=sigint_at_default)  # a Ctrl-C test's INT reaches it
                            # even when the suite runs in the background, which hands SIGINT down ignored
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode} before it was healthy"
                               + (f"; log: {Path(log).read_text()[-2000:]}" if log else ""))
        try:  # LitServe's /health asks for the API key too, when the server has one
            key = env.get("LIT_SERVER_API_KEY")
            if call(url + "/health", headers={"X-API-Key": key} if key else None)[0] == 200:
                return proc, url
        except OSError:
            pass
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            raise RuntimeError(f"serve was not healthy after {STARTUP_SECONDS} s")
        time.sleep(0.5)


@contextmanager
def running_server(model: Path, *extra: str, log: Path | None = None,
                   env: dict[str, str] | None = None) -> Iterator[str]:
    """``search_cli.py serve --model MODEL`` on 127.0.0.1 (:func:`start_server`); yields its URL."""
    out = open(log, "w") if log is not None else subprocess.DEVNULL
    proc = None
    try:
        proc, url = start_server(model, *extra, out=out, log=log, env=env)
        yield url
    finally:
        if proc is not None:
            _stop(proc)
        if out is not subprocess.DEVNULL:
            out.close()


def _stop(proc: subprocess.Popen) -> None:
    """End the server and the worker processes LitServe spawned (they share its session)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def session_processes(session: int) -> dict[int, str]:
    """{PID: command line} of the live processes (zombies left out) of a session, from ``/proc``."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found[int(entry.name)] = command
    return found
