"""``benchmarks/read_merges.py``: merges sampled blind from run directories, two readings assembled.

Runs are written here with known merged and kept pairs and a problem still in progress, so a kept
pair drawn, an unfinished problem read, a probability shown to a reader, two readers given the same
order, or a missing or doubled reading accepted would fail. The real script runs in a subprocess
once (the command line a user types); the rest call ``main`` in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "read_merges.py"

sys.path.insert(0, str(ROOT / "benchmarks"))
import read_merges  # noqa: E402


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_run(root: Path, merged: int = 30) -> Path:
    """A run with ``merged`` merges and as many kept pairs on problem p0 (finished) and merges on p1
    (not finished)."""
    run = root / "run"
    run.mkdir()
    write_jsonl(run / "results.jsonl", [{"id": "p0", "question": "How many apples?", "correct": True}])
    pairs = []
    for i in range(merged):
        pairs.append({"id": "p0", "merged": True, "reason": "threshold", "probability": 0.8, "depth": 1,
                      "a": f"step a{i}", "b": f"step b{i}"})
        pairs.append({"id": "p0", "merged": False, "reason": "floor", "probability": 0.6, "depth": 1,
                      "a": f"kept a{i}", "b": f"kept b{i}"})
        pairs.append({"id": "p1", "merged": True, "reason": "threshold", "probability": 0.9, "depth": 1,
                      "a": f"open a{i}", "b": f"open b{i}"})
    write_jsonl(run / "judge_pairs.jsonl", pairs)
    return run


def test_sample_draws_finished_merges_blind_in_two_orders(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    out = tmp_path / "reading"
    done = subprocess.run([sys.executable, str(SCRIPT), "sample", "--runs", str(run), "--n", "20", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    key = [json.loads(x) for x in (out / "key.jsonl").read_text().splitlines()]
    a = [json.loads(x) for x in (out / "pairs_a.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (out / "pairs_b.jsonl").read_text().splitlines()]
    assert len(key) == len(a) == len(b) == 20
    assert all(row["problem"] == "p0" and row["a"].startswith("step") for row in key)
    assert all(set(row) == set(read_merges.READER_FIELDS) for row in a + b)
    assert [r["id"] for r in a] != [r["id"] for r in b]
    by_id = {r["id"]: r for r in b}
    for row in a:  # the same pair, its steps the other way round
        assert (row["sentence1"], row["sentence2"]) == (by_id[row["id"]]["sentence2"], by_id[row["id"]]["sentence1"])


def test_sample_takes_every_merge_when_fewer(tmp_path: Path) -> None:
    run = make_run(tmp_path, merged=3)
    assert read_merges.sample([run], 100, 0, tmp_path / "r") == 3


def read(reading: Path, reader: str, levels: dict[str, int]) -> None:
    write_jsonl(reading / f"labels_{reader}.jsonl", [{"id": i, "result": v} for i, v in levels.items()])


def test_assemble_takes_the_lower_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reading = tmp_path / "reading"
    read_merges.sample([make_run(tmp_path, merged=3)], 3, 0, reading)
    ids = sorted(json.loads(x)["id"] for x in (reading / "key.jsonl").read_text().splitlines())
    read(reading, "a", dict(zip(ids, (4, 3, 1))))
    read(reading, "b", dict(zip(ids, (3, 2, 0))))
    assert read_merges.main(["assemble", "--reading", str(reading), "--output", str(tmp_path / "read.jsonl")]) == 0
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "read.jsonl").read_text().splitlines())}
    assert [rows[i]["result"] for i in ids] == [3, 2, 0]
    assert "1 of 3 merges read right" in capsys.readouterr().out


@pytest.mark.parametrize(("levels", "field"), [({"m0000": 3}, "id"), ({"m0000": 3, "m0001": 5}, "result"),
                                                ({"m0000": 3, "m0001": True}, "result"),
                                                ({"m0000": 3, "m0001": 4, "zzz": 3}, "id")])
def test_assemble_refuses_a_bad_reading_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    levels: dict, field: str) -> None:
    """A pair not read, a level off the scale (or a boolean), an id not in the key: one line, exit 2."""
    reading = tmp_path / "reading"
    read_merges.sample([make_run(tmp_path, merged=2)], 2, 0, reading)
    read(reading, "a", {"m0000": 3, "m0001": 4})
    read(reading, "b", levels)
    with pytest.raises(SystemExit) as exit_info:
        read_merges.main(["assemble", "--reading", str(reading), "--output", str(tmp_path / "read.jsonl")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "labels_b.jsonl" in err and f"field '{field}'" in err
