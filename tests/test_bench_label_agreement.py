"""``benchmarks/bench_label_agreement.py``: second labels joined by id, agreement figures, judges, bad input.

The figures are checked against second labels built here with known disagreements, so a wrong
join, a swapped precision/recall or a level-2 pair counted as a label would fail. The real script
runs in a subprocess for the agreement figures; the other runs call its ``main`` in this process
(the same code a shell reaches; a process start costs more than the run). No score of a trained
judge is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.data.demo import DEMO_DIR
from tests.helpers.judges import make_tiny_judge

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_label_agreement.py"
VALID = DEMO_DIR / "valid.jsonl"

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_label_agreement as bench  # noqa: E402
from tests.helpers.cli import invoke  # noqa: E402


def demo_rows() -> list[dict]:
    return [json.loads(line) for line in VALID.read_text().splitlines() if line.strip()]


def write_second(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_agreement_figures_follow_the_disagreements_and_skip_level_2(tmp_path):
    rows = demo_rows()
    equivalent = [r for r in rows if r["result"] in (3, 4)]
    not_equivalent = [r for r in rows if r["result"] in (0, 1)]
    flipped_down = {r["id"] for r in equivalent[:4]}  # second says 1: four misses
    flipped_up = {r["id"] for r in not_equivalent[:2]}  # second says 3: two false merges
    undecided = {r["id"] for r in not_equivalent[2:5]}  # second says 2: left out
    second = []
    for r in rows:
        level = r["result"]
        if r["id"] in flipped_down:
            level = 1
        elif r["id"] in flipped_up:
            level = 3
        elif r["id"] in undecided:
            level = 2
        second.append({"id": r["id"], "result": level})
    out = tmp_path / "out.json"
    proc = run("--data", VALID, "--second", write_second(tmp_path / "second.jsonl", second), "--json", out)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    annotators = figures["annotators"]
    dropped = len(undecided) + sum(r["result"] == 2 for r in rows)  # the demo data has level-2 pairs too
    kept = len(rows) - dropped
    positives = len(equivalent)
    assert figures["dropped_level2"] == dropped
    assert (annotators["tp"], annotators["fn"], annotators["fp"]) == (positives - 4, 4, 2)
    assert annotators["n"] == kept
    assert annotators["recall"] == pytest.approx((positives - 4) / positives)
    assert 0.0 < annotators["kappa"] < 1.0
    assert [j["judge"] for j in figures["judges"]] == ["formula"]
    assert f"pairs with a second label: {len(rows)}" in proc.stdout
    assert "annotators (the baseline)" in proc.stdout


def test_a_judge_is_scored_against_both_annotators(tmp_path):
    rows = demo_rows()[:40]
    second = [{"id": r["id"], "result": r["result"]} for r in rows]
    judge = make_tiny_judge(tmp_path / "judge")
    out = tmp_path / "out.json"
    # In process: the judge's torch is loaded in this worker already (the CLI's own process is
    # exercised by the other tests here).
    proc = invoke(bench.main, ["--data", VALID, "--second", write_second(tmp_path / "second.jsonl", second),
                               "--judge", judge, "--json", out])
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    assert figures["annotators"]["f1"] == 1.0 and figures["annotators"]["kappa"] == 1.0
    row = figures["judges"][1]
    assert row["judge"] == str(judge)
    # identical annotators: every pair is agreed and both columns are the same figure
    assert row["f1_first"] == row["f1_second"] == row["f1_agreed"]
    assert row["agreed_pairs"] == sum(r["result"] != 2 for r in rows)


@pytest.mark.parametrize(
    ("line", "field"),
    [('{"id": "demo-2-0", "result": 7}', "result"), ('{"id": "", "result": 3}', "id"),
     ('{"id": "no-such-pair", "result": 3}', "id"), ('{"id": "demo-2-0", "result": 3}', "id"),
     ('{"id": "demo-2-1", "result":', ":2")],
)
def test_bad_second_labels_are_one_line_naming_file_line_and_field(tmp_path, line, field):
    path = tmp_path / "second.jsonl"
    path.write_text('{"id": "demo-2-0", "result": 0}\n' + line + "\n")
    if "no-such" in line:
        path.write_text(line + "\n")
    proc = invoke(bench.main, ["--data", VALID, "--second", path])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and field in lines[0], proc.stderr


def test_cohen_kappa_known_values():
    assert bench.cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert bench.cohen_kappa([1, 1, 0, 0], [1, 0, 1, 0]) == 0.0
    # 2x2 table [[20, 5], [10, 15]]: p_o = 0.7, p_e = 0.5 -> 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert bench.cohen_kappa(a, b) == pytest.approx(0.4)


def test_the_shipped_second_labels_join_the_real_calibration_split(shared_data, tmp_path):
    """Every id in benchmarks/data/gsm8k_equiv_second_labels.jsonl is a real train/train_more pair,
    and those pairs are exactly the recipe's calibration split (what the figures in docs describe)."""
    from equiv.data.datamodule import MathEquivDataModule

    data = shared_data / "gsm8k_equiv"
    out = tmp_path / "out.json"
    proc = invoke(bench.main, ["--data", data / "train.jsonl", data / "train_more.jsonl", "--json", out])
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    dm = MathEquivDataModule(train=str(data / "train.jsonl"), train_more=[str(data / "train_more.jsonl")],
                             calibration_fraction=0.15)
    dm.setup("validate")
    calibration_ids = {r.extra["id"] for r in dm.records["val"]}
    second_ids = {json.loads(line)["id"] for line in bench.DEFAULT_SECOND.read_text().splitlines() if line.strip()}
    assert second_ids == calibration_ids
    assert figures["pairs"] == len(calibration_ids)
