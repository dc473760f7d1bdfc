"""equiv.cache.build_once: the one atomic build-into-the-cache step (the MPNet assembly and the
GGUF dequantization both go through it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.cache import build_once


def _stamped(path: Path) -> bool:
    return (path / "stamp.json").is_file() and json.loads((path / "stamp.json").read_text())["v"] == 1


def test_build_once_builds_then_reuses_and_leaves_no_scratch(tmp_path):
    calls = []

    def build(out: Path, scratch: Path) -> None:
        calls.append(out)
        (scratch / "big.tmp").write_text("scratch")  # may use the scratch folder beside it
        (out / "weights.bin").write_text("w")
        (out / "stamp.json").write_text(json.dumps({"v": 1}))

    target = tmp_path / "cache" / "thing"
    assert build_once(target, _stamped, build) == target
    assert (target / "weights.bin").read_text() == "w" and len(calls) == 1
    assert build_once(target, _stamped, build) == target and len(calls) == 1  # complete: not rebuilt
    assert sorted(p.name for p in target.parent.iterdir()) == ["thing"]  # no hidden scratch left
    assert target.stat().st_mode & 0o755 == 0o755


def test_a_stale_target_is_replaced_and_a_failed_build_leaves_the_old_one_and_no_scratch(tmp_path):
    target = tmp_path / "thing"
    target.mkdir()
    (target / "stamp.json").write_text(json.dumps({"v": 0}))  # another version: stale

    def broken(out: Path, scratch: Path) -> None:
        (out / "half").write_text("x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        build_once(target, _stamped, broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing"] and not (target / "half").exists()

    def good(out: Path, scratch: Path) -> None:
        (out / "stamp.json").write_text(json.dumps({"v": 1}))

    build_once(target, _stamped, good)
    assert _stamped(target)


def test_a_concurrent_builder_that_finished_first_is_kept(tmp_path, monkeypatch):
    """The rename fails because another process put a complete target there first: no error."""
    import os

    target = tmp_path / "thing"

    def build(out: Path, scratch: Path) -> None:
        (out / "stamp.json").write_text(json.dumps({"v": 1}))
        target.mkdir()  # the other process's finished build appears now
        (target / "stamp.json").write_text(json.dumps({"v": 1}))
        (target / "theirs").write_text("")

    import shutil

    real_replace, real_rmtree = os.replace, shutil.rmtree

    def replace_refusing_a_full_target(src, dst):
        if Path(dst) == target and any(Path(dst).iterdir()):
            raise OSError(39, "Directory not empty")
        return real_replace(src, dst)

    monkeypatch.setattr("equiv.cache.os.replace", replace_refusing_a_full_target)
    # the other process's directory is in use: removing the "stale" target does not happen in time
    monkeypatch.setattr("equiv.cache.shutil.rmtree", lambda path, **k: None if Path(path) == target else
                        real_rmtree(path, **k))
    assert build_once(target, _stamped, build) == target and (target / "theirs").exists()


_BUILDER = """
import os, sys, time
from pathlib import Path
from equiv.cache import build_once

target, log, go = map(Path, sys.argv[1:4])
deadline = time.monotonic() + 120
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.005)


def build(out, scratch):
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()}\\n")
    for i in range(300):
        (out / f"w{i}").write_text("x")
    time.sleep(0.5)  # the builders overlap
    (out / "stamp.json").write_text('{"v": 1}')


build_once(target, lambda p: (p / "stamp.json").is_file(), build)
print((target / "w0").read_text())
"""


def test_concurrent_builders_build_once_and_a_reader_never_loses_the_complete_directory(tmp_path):
    """Issue 66, hole 10, with real processes: three builders start together; before, each built and
    a later one deleted the first's complete directory before renaming its own, so a reader got
    ``FileNotFoundError`` in a directory it had seen complete. Now one builds, the others wait and
    use it, and a reader polling the directory never misses a file once it was there."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO_ROOT

    target, log, go = tmp_path / "cache" / "thing", tmp_path / "builds.log", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _BUILDER, str(target), str(log), str(go)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    go.touch()
    seen, misses, polls = False, 0, 0
    try:
        while any(p.poll() is None for p in procs) and polls < 200_000:  # bounded, whatever the machine
            polls += 1
            if not seen:
                seen = (target / "stamp.json").is_file()
                continue
            try:
                (target / "w0").read_text()
                (target / "stamp.json").read_text()
            except FileNotFoundError:
                misses += 1
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), [err[-1500:] for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["x", "x", "x"]
    assert misses == 0, f"a reader lost the complete directory {misses} times"
    assert len(log.read_text().splitlines()) == 1  # one build; the others used it
    assert sorted(p.name for p in target.parent.iterdir()) == ["thing"]  # no scratch, no lock file left
