"""Shared fixtures. Everything runs offline on CPU.

``shared_data`` points at ``../shared/data`` (real GSM8K, MATH-500, AIME 2024, gsm8k_equiv);
tests that need it skip with a clear reason when it is absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from equiv import fastexit
from tests.helpers.paths import REPO_ROOT, SHARED_DATA

# A pytest process (each xdist worker too) imports torch, transformers and Lightning: the same
# second of shutdown the entry scripts skip (equiv.fastexit), paid again by each worker at the end.
fastexit.install()

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


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The tiny random-init policy and PRM (``equiv.search.tiny``), as ``(policy dir, prm dir)``:
    built once per xdist worker and only read by the tests that search with them."""
    from equiv.search.tiny import build_tiny_policy, build_tiny_prm

    root = tmp_path_factory.mktemp("tiny")
    return build_tiny_policy(root / "policy"), build_tiny_prm(root / "prm")


@pytest.fixture(scope="session")
def two_gsm8k_problems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GSM8K-format JSONL file of two short problems (answers 7 and 120)."""
    path = tmp_path_factory.mktemp("data") / "gsm8k.jsonl"
    rows = [
        {"question": "Janet has 3 apples and buys 4 more. How many apples does she have?",
         "answer": "7 apples\n#### 7"},
        {"question": "A train travels 60 miles per hour for 2 hours. How far does it go?", "answer": "#### 120"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="session")
def tiny_longformer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-init Longformer encoder (attention window 8) for judge fits; built once per
    xdist worker, only read (fits load it and write elsewhere)."""
    from equiv.judge.tiny import build_tiny_longformer

    return build_tiny_longformer(tmp_path_factory.mktemp("tiny_lf"), attention_window=8)


@pytest.fixture(scope="session")
def demo_val_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """32 rows of the demo validation file (14 equivalent, 14 not, 4 of level 2, which the judge's
    data drops), in file order: a validation or predict set for the tests' short fits. The whole
    file (160 pairs) is scored twice after every fit (the export's figures), which made it most of
    a test fit's time while no test reads more than that its figures exist and agree."""
    from equiv.data.demo import DEMO_DIR

    want = {"eq": 14, "not": 14, "level2": 4}
    kept = []
    for line in (DEMO_DIR / "valid.jsonl").read_text().splitlines():
        level = json.loads(line)["result"]
        kind = "eq" if level >= 3 else "not" if level <= 1 else "level2"
        if want[kind]:
            want[kind] -= 1
            kept.append(line)
    path = tmp_path_factory.mktemp("demo_val") / "valid.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path
