"""Where the repository and the shared data are, for tests and fixtures alike."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("EQUIV_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
