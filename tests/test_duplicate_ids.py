"""A pairs file that gives one ``id`` twice is refused naming both lines (issue 66, hole 11).

Before: ``pairs --data`` (and ``fit``, which reads through the same reader) accepted the file and
counted the pair twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from equiv.data.records import read_pair_records
from tests.helpers.paths import REPO_ROOT, SHARED_DATA


def _rows(ids: list[object]) -> list[dict]:
    return [{"id": rid, "sentence1": f"x = {i}", "sentence2": f"x = {i} + 0", "result": 4} for i, rid in enumerate(ids)]


def test_pairs_refuses_an_id_given_twice_naming_both_lines(tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(["p-0", "p-1", "p-0"])))
    result = subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), "pairs", "--strategy", "formula",
                             "--data", str(data)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert f"{data}:3: field 'id': id 'p-0' is also on line 1" in lines[0]


def test_duplicate_ids_in_a_json_list_and_with_skip_invalid(tmp_path):
    import pytest

    from equiv.errors import InputError

    data = tmp_path / "pairs.json"
    data.write_text(json.dumps(_rows([7, "a", 7, "7b", None, None])))  # an int id counts as its text; no id is no key
    with pytest.raises(InputError, match=r"pairs.json:3: field 'id': id 7 is also on line 1"):
        read_pair_records(data)
    records, report = read_pair_records(data, skip_invalid=True)
    assert [r.extra.get("id") for r in records] == [7, "a", "7b", None, None] and report.total == 1


def _labelled(path: Path) -> bool:
    with path.open(encoding="utf-8") as handle:
        first = handle.readline()
    return '"sentence1"' in first and '"result"' in first


def test_the_shipped_labelled_data_has_no_duplicate_ids():
    """Every labelled file in the repository (and ../shared's gsm8k_equiv) still reads: none gives an id twice."""
    roots = [REPO_ROOT / "benchmarks" / "data", REPO_ROOT / "equiv" / "data" / "demo_data", SHARED_DATA / "gsm8k_equiv"]
    files = [p for root in roots if root.is_dir() for p in sorted(root.rglob("*.jsonl")) if _labelled(p)]
    assert len(files) >= 10
    for path in files:
        read_pair_records(path)
