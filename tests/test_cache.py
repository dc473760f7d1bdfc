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
