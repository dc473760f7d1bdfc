"""Shared fixtures. Everything runs offline on CPU.

``shared_data`` points at ``../shared/data`` (real GSM8K, MATH-500, AIME 2024, gsm8k_equiv);
tests that need it skip with a clear reason when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT, SHARED_DATA

# Never reach for the hub, never open a browser for W&B.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Under pytest-xdist every worker would otherwise start one BLAS/OpenMP thread per core, so on a
# 2-core machine two workers fight over four threads (and the CLI subprocesses they launch inherit
# the same). One thread per worker made the default suite ~30% faster there. Set before torch loads.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "gsm8k_equiv" / "train.jsonl").exists():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set EQUIV_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
