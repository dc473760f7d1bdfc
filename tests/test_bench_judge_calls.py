"""The judge-calls benchmark runs on the shipped sibling files and checks itself (issue 67): greedy
grouping through the judge's ``group`` asks no more pairs than every sibling pair, and gives the
classes greedy grouping over every pair's verdict gives, for every judge. No timing asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_judge_calls_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_judge_calls.py"), "--quick"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("ratio: ")
    assert "every judge and file: yes" in proc.stdout
    rows = [line.split() for line in lines[1:] if line.split()[1] in ("labels", "formula", "levenshtein")
            and not line.startswith("all")]
    assert {r[1] for r in rows} == {"labels", "formula", "levenshtein"}
    for row in rows:
        before, after = int(row[4]), int(row[5])
        assert 0 < after <= before and row[-1] == "yes"
