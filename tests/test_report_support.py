"""The hand-written run directories of ``tests/helpers/runs.py`` follow the documented format
(docs/ARCHITECTURE.md, "Run directory"), so that fixture cannot drift from what the runner writes."""

from __future__ import annotations

import json
from pathlib import Path

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
