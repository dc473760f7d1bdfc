"""The hand-written run directories of ``tests/helpers/runs.py`` follow the documented format
(docs/ARCHITECTURE.md, "Run directory"), so that fixture cannot drift from what the runner writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.runs import NODE_KEYS, RESULT_KEYS, write_run


def test_writer_follows_documented_schema(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    for line in (run / "results.jsonl").read_text().splitlines():
        assert tuple(json.loads(line)) == RESULT_KEYS
    tree = json.loads((run / "trees" / "0.json").read_text())
    assert all(tuple(n) == NODE_KEYS for n in tree["nodes"])
    merged = [n for n in tree["nodes"] if n["merged_into"] is not None]
    assert merged and all(n["judge_prob"] is not None for n in merged)
    assert not any(n["parent"] in {m["id"] for m in merged} for n in tree["nodes"]), "merged nodes have no children"


def test_the_judge_pairs_link_reads_the_file_through_the_run_directory_reader(tmp_path):
    from types import SimpleNamespace

    from equiv.errors import InputError
    from equiv.report.html import judge_pairs_link

    run = SimpleNamespace(path=tmp_path)
    assert judge_pairs_link(run) == ""
    lines = [{"id": "p0", "seed": 0, "kind": "merged"}, {"id": "p0", "seed": 0, "kind": "kept_apart"},
             {"id": "p1", "seed": 0, "kind": "merged"}]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (tmp_path / "judge_pairs.jsonl").write_text(text + '{"id": "p2", "se')  # a torn last line is dropped
    assert "2 merged pair(s), 1 kept apart near the threshold" in judge_pairs_link(run)
    (tmp_path / "judge_pairs.jsonl").write_text("not json\n" + text)  # damage elsewhere is an error
    with pytest.raises(InputError, match="judge_pairs.jsonl"):
        judge_pairs_link(run)
