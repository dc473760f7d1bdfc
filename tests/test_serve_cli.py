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
