"""``benchmarks/bench_judge_backbones.py`` with the bundled MiniLM: the table, the JSON, bad input.

The gemma-3-270m path is tested under the ``gguf`` marker (tests/test_gguf.py). No timing is
asserted, only that the figures are there and consistent with each other.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.data.demo import DEMO_DIR
from tests.helpers.cli import invoke

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_judge_backbones.py"
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_judge_backbones as bench  # noqa: E402


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_minilm_step_time_table_and_json(tmp_path):
    out = tmp_path / "out.json"
    # In process (torch is loaded in this worker already; the script's own process is run by the
    # missing-data test under -m slow): one thread, as conftest gives each worker; the script's seed does
    # not leak.
    import torch

    with torch.random.fork_rng():
        proc = invoke(bench.main, ["--backbones", "minilm", "--data", DEMO_DIR / "train.jsonl", "--pairs", "8",
                                   "--batch_size", "4", "--max_length", "48", "--steps", "1", "--threads", "1",
                                   "--epoch_pairs", "400", "--json", out])
    assert proc.returncode == 0, proc.stderr
    row = json.loads(out.read_text())["rows"]["minilm"]
    assert 22 < row["params_m"] < 23.5  # all-MiniLM-L6-v2 plus a 2-label head
    assert row["epoch_min"] * 60 == pytest.approx(row["s_per_step"] * 100)  # 400 pairs / 4 per step
    assert "minilm" in proc.stdout and "1.0x" in proc.stdout


# In process in the default suite; the script's own interpreter in the slow suite, as every other
# benchmark script's real-process run (tests/test_benchmarks.py).
@pytest.mark.parametrize("how", ["in_process", pytest.param("own process", marks=pytest.mark.slow)])
def test_a_missing_data_file_is_one_line(tmp_path, how):
    args = ["--backbones", "minilm", "--data", tmp_path / "none.jsonl"]
    proc = invoke(bench.main, args) if how == "in_process" else run(*args)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "none.jsonl" in proc.stderr
