"""``equiv.fastexit``: a command's shutdown skips the collector's passes over what is still alive,
and every exit handler a command registers still runs first."""

from __future__ import annotations

import atexit
import subprocess
import sys
from pathlib import Path

from equiv import fastexit
from tests.helpers.paths import REPO_ROOT

SCRIPT = """
import atexit, gc, sys
out = sys.argv[1]
atexit.register(lambda: open(out + ".after", "w").write(str(gc.get_freeze_count())))  # runs last
from equiv import fastexit
fastexit.install()
fastexit.install()
atexit.register(lambda: open(out + ".before", "w").write(str(gc.get_freeze_count())))  # a command's own
"""


def test_the_handlers_a_command_registers_run_before_the_freeze(tmp_path: Path) -> None:
    """Handlers registered after ``install`` (W&B's, logging's, a temporary directory's) run
    while nothing is frozen; by the end the live objects are frozen, so shutdown skips them."""
    out = tmp_path / "seen"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert Path(str(out) + ".before").read_text() == "0"
    assert int(Path(str(out) + ".after").read_text()) > 0


def test_install_registers_one_handler_however_often_it_is_called() -> None:
    fastexit.install()  # the conftest installed it already in this process; once more is a no-op
    before = atexit._ncallbacks()
    fastexit.install()
    fastexit.install()
    assert atexit._ncallbacks() == before


NANOBIND = SCRIPT + """
class nb_meta(type):  # what a nanobind extension (triton's bindings) defines on import
    pass
nb_meta.__module__ = "nanobind"
"""


def test_no_freeze_where_a_nanobind_extension_is_loaded(tmp_path: Path) -> None:
    """nanobind lists every object of its own still alive at shutdown as a leak (hundreds of
    lines on stderr at the end of a vLLM run): there the freeze is skipped."""
    out = tmp_path / "seen"
    done = subprocess.run([sys.executable, "-c", NANOBIND, str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert Path(str(out) + ".after").read_text() == "0"
