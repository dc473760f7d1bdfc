"""What every benchmark script sets up before it imports equiv (one copy, not seven).

The scripts run as ``python benchmarks/bench_x.py`` from a checkout, without installing the
package and without a network: the hub and transformers stay offline, tokenizers do not fork
threads, W&B (where a script trains) stays local, and the repository root is put on
``sys.path`` so ``import equiv`` finds this checkout. Importing this module does all of that;
``ROOT`` is the repository root and ``SHARED_DATA`` the shared data directory beside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "offline")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
