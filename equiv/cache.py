"""Where equiv keeps what it assembles once and reuses: ``$EQUIV_CACHE_DIR`` or ``~/.cache/equiv``.

Two things live there: dequantized GGUF policies (``gguf/``) and backbones shipped as split
archives in PyPI packages (``backbones/``). Both are rebuilt from their packages if deleted.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def cache_root() -> Path:
    """``$EQUIV_CACHE_DIR`` or ``~/.cache/equiv``."""
    env = os.environ.get("EQUIV_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "equiv"


def build_once(target: Path, complete: Callable[[Path], bool], build: Callable[[Path, Path], None]) -> Path:
    """``target``, built by ``build(out, scratch)`` unless ``complete(target)`` already holds.

    ``build`` fills the new directory ``out`` (its stamp included, so ``complete`` can recognise
    it) and may use ``scratch`` for anything else; both sit beside ``target``, on its file system.
    The finished ``out`` replaces ``target`` in one rename, so a reader never sees half a build and
    an interrupted one leaves only a hidden scratch folder behind (removed here on any error).
    Two processes building at once both succeed: the one that renames second finds ``target``
    complete and keeps it. Directories are made readable to all (the cache may be shared).
    """
    if complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        out = scratch / "built"
        out.mkdir()
        build(out, scratch)
        out.chmod(0o755)
        if target.exists():  # stale or incomplete
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(out, target)
        except OSError:
            if not complete(target):  # not a concurrent process that finished first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
