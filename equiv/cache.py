"""Where equiv keeps what it assembles once and reuses: ``$EQUIV_CACHE_DIR`` or ``~/.cache/equiv``.

Two things live there: dequantized GGUF policies (``gguf/``) and backbones shipped as split
archives in PyPI packages (``backbones/``). Both are rebuilt from their packages if deleted.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


def cache_root() -> Path:
    """``$EQUIV_CACHE_DIR`` or ``~/.cache/equiv``."""
    env = os.environ.get("EQUIV_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "equiv"


@contextmanager
def _builder_lock(target: Path) -> Iterator[None]:
    """Hold the lock of ``target``'s builders (``.<name>.lock`` beside it; the kernel frees it when
    the holder dies): one builder at a time decides whether ``target`` is complete and replaces it.

    The holder removes the file before letting go, so the cache keeps no lock files; a waiter that
    then holds the lock of a removed file (its inode no longer at the path) tries again."""
    import fcntl

    path = target.parent / f".{target.name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                held = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                held = False
        except BaseException:
            os.close(fd)
            raise
        if held:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            path.unlink()
        finally:
            os.close(fd)


def build_once(target: Path, complete: Callable[[Path], bool], build: Callable[[Path, Path], None]) -> Path:
    """``target``, built by ``build(out, scratch)`` unless ``complete(target)`` already holds.

    ``build`` fills the new directory ``out`` (its stamp included, so ``complete`` can recognise
    it) and may use ``scratch`` for anything else; both sit beside ``target``, on its file system.
    The finished ``out`` replaces ``target`` in one rename, so a reader never sees half a build and
    an interrupted one leaves only a hidden scratch folder behind (removed here on any error).
    Directories are made readable to all (the cache may be shared).

    Builders take turns (a lock file beside ``target``): a second builder waits, then finds
    ``target`` complete and uses it, building nothing. A complete ``target`` is never removed --
    only a stale (incomplete or damaged) one is, by moving it aside into the builder's scratch
    folder just before the rename (issue 66, hole 10: a second builder used to delete the first's
    complete directory before renaming its own, and a reader meanwhile got 1,730
    ``FileNotFoundError``s). Readers never take the lock: a complete ``target`` stays in place.
    """
    if complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _builder_lock(target):
        if complete(target):  # another builder finished while this one waited
            return target
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            out = scratch / "built"
            out.mkdir()
            build(out, scratch)
            out.chmod(0o755)
            if complete(target):  # a builder that does not take the lock (an older equiv) finished first
                return target
            if target.exists() or target.is_symlink():  # stale or incomplete: aside, removed with the scratch
                os.replace(target, scratch / "stale")
            try:
                os.replace(out, target)
            except OSError:
                if not complete(target):  # not a concurrent process that finished first
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target
