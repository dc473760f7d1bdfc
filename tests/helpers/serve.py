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

STARTUP_SECONDS = 240  # LitServe spawns its worker, which imports torch and loads the judge (loaded 2-core box)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, payload: Any = None, *, raw: bytes | None = None, method: str | None = None) -> tuple[int, Any]:
    """(status, parsed JSON body) of one request; an HTTP error status is returned, not raised."""
    data = raw if raw is not None else (None if payload is None else json.dumps(payload).encode())
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
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


@contextmanager
def running_server(model: Path, *extra: str, log: Path | None = None,
                   env: dict[str, str] | None = None) -> Iterator[str]:
    """``search_cli.py serve --model MODEL`` on 127.0.0.1; yields its URL once ``/health`` is 200.
    ``env``: variables set on top of this process's environment."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           **(env or {})}
    out = open(log, "w") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "search_cli.py", "serve", "--model", str(model), "--port", str(port),
                             "--device", "cpu", *extra], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited with {proc.returncode} before it was healthy"
                                   + (f"; log: {Path(log).read_text()[-2000:]}" if log else ""))
            try:
                if call(url + "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve was not healthy after {STARTUP_SECONDS} s")
            time.sleep(0.5)
        yield url
    finally:
        # the server and the worker processes LitServe spawned share the session this test started
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        if out is not subprocess.DEVNULL:
            out.close()
