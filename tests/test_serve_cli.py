"""``search_cli.py serve``'s options, through the real command in a real process (issue #53):
a port out of range is one line before anything loads; ``--host 0.0.0.0`` warns and advertises
an address a client can use.

Marker ``serve`` (the [serve] extra; .ci/run's serve stage).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

pytestmark = [pytest.mark.serve, pytest.mark.timeout(900)]


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "0"])
def test_a_port_out_of_range_is_refused_in_one_line_naming_port(tmp_path: Path, port: str):
    """Before: 70000 passed the check and uvicorn failed inside LitServe's start, a traceback."""
    done = subprocess.run([sys.executable, "search_cli.py", "serve", "--model", str(tmp_path / "judge"),
                           f"--port={port}"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-1500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--port" in lines[0] and "1 to 65535" in lines[0] and port in lines[0], lines


def _raw_get_worker_address(port: int, host_header: str | None) -> dict:
    """POST /get_worker_address over a bare socket, with the Host header given (HTTP/1.1) or none (HTTP/1.0)."""
    import json
    import socket

    body = b'{"model": "judge"}'
    head = "POST /get_worker_address HTTP/1.1\r\n" if host_header is not None else "POST /get_worker_address HTTP/1.0\r\n"
    if host_header is not None:
        head += f"Host: {host_header}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert b" 200 " in status + b" ", answer[:300]
    return json.loads(rest.partition(b"\r\n\r\n")[2])


def test_host_0_0_0_0_warns_and_advertises_an_address_a_client_can_use(tmp_path: Path):
    """Before: no warning, and /get_worker_address sent the reference's client to http://0.0.0.0:PORT."""
    pytest.importorskip("litserve")
    from tests.helpers.judges import make_tiny_judge
    from tests.helpers.serve import call, running_server

    log = tmp_path / "serve.log"
    with running_server(make_tiny_judge(tmp_path / "judge"), "--host", "0.0.0.0", log=log) as url:
        port = int(url.rsplit(":", 1)[1])
        status, body = call(url + "/get_worker_address", {"model": "judge"})
        assert status == 200 and body == {"address": f"http://127.0.0.1:{port}"}, body
        # the name the client used (a proxy's, a port forward's), else the address it connected to
        assert _raw_get_worker_address(port, "judge.example:9000") == {"address": "http://judge.example:9000"}
        assert _raw_get_worker_address(port, None) == {"address": f"http://127.0.0.1:{port}"}
        assert call(url + "/health")[0] == 200
    warnings = [line for line in log.read_text().splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "--host 0.0.0.0 listens on every network interface" in warnings[0], log.read_text()


def test_a_server_bound_to_one_address_advertises_that_address():
    pytest.importorskip("litserve")
    from equiv.serve.api import worker_address

    scope = {"headers": [(b"host", b"other:1")], "server": ("10.0.0.5", 8000)}
    assert worker_address("http://10.0.0.5:8000", scope) == "http://10.0.0.5:8000"
    assert worker_address("http://0.0.0.0:8000", {"headers": [], "server": ("10.0.0.5", 8000)}) == "http://10.0.0.5:8000"
    assert worker_address("http://[::]:8000", {"headers": [(b"host", b"bad host\r\n")]}) == "http://127.0.0.1:8000"
