"""Where equiv keeps what it assembles once and reuses: ``$EQUIV_CACHE_DIR`` or ``~/.cache/equiv``.

Two things live there: dequantized GGUF policies (``gguf/``) and backbones shipped as split
archives in PyPI packages (``backbones/``). Both are rebuilt from their packages if deleted.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$EQUIV_CACHE_DIR`` or ``~/.cache/equiv``."""
    env = os.environ.get("EQUIV_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "equiv"
