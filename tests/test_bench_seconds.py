"""``bench_seconds.json`` of ``benchmarks/bench_policy_search.py`` (issue 66, hole 11).

Before: the totals were rewritten in place (a kill mid-write left a torn file) and a torn file
was a JSONDecodeError traceback on every rerun, ``--report_only`` included. Now the totals are
replaced atomically and a damaged file is one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "bench_policy_search.py"


def test_a_torn_seconds_file_is_one_line_naming_it_not_a_traceback(tmp_path):
    arm = tmp_path / "runs" / "mcts" / "exact"
    arm.mkdir(parents=True)
    (arm / "bench_seconds.json").write_text('{"generation": 12.5, "jud')  # killed mid-write
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "runs"), "--algos", "mcts",
                             "--report_only"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert str(arm / "bench_seconds.json") in lines[0] and "delete it" in lines[0], lines[0]


def test_the_seconds_are_replaced_atomically_never_rewritten_in_place(tmp_path, monkeypatch):
    """A second name of the old file (a hard link) keeps the old totals: the file was replaced by
    a rename, not truncated and rewritten where a kill could tear it."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    import bench_policy_search as bench

    (tmp_path / "bench_seconds.json").write_text(json.dumps({"generation": 1.0}) + "\n")
    os.link(tmp_path / "bench_seconds.json", tmp_path / "old.json")
    assert bench.add_seconds(tmp_path, generation=2.0, judge=0.5) == {"generation": 3.0, "judge": 0.5}
    assert json.loads((tmp_path / "bench_seconds.json").read_text()) == {"generation": 3.0, "judge": 0.5}
    assert json.loads((tmp_path / "old.json").read_text()) == {"generation": 1.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_seconds.json", "old.json"]  # no temporary left
