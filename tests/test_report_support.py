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
    lines = [{"id": "p0", "seed": 0, "kind": "merged", "reason": "threshold"},
             {"id": "p0", "seed": 0, "kind": "kept_apart", "reason": "guard:different_numbers"},
             {"id": "p1", "seed": 0, "kind": "merged", "reason": "identical"}]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (tmp_path / "judge_pairs.jsonl").write_text(text + '{"id": "p2", "se')  # a torn last line is dropped
    assert ("2 merged pair(s) (identical 1, threshold 1), 1 kept apart near the threshold or by a rule "
            "(guard:different_numbers 1)") in judge_pairs_link(run)
    (tmp_path / "judge_pairs.jsonl").write_text("not json\n" + text)  # damage elsewhere is an error
    with pytest.raises(InputError, match="judge_pairs.jsonl"):
        judge_pairs_link(run)


def test_the_tree_viewer_gets_each_merged_nodes_reason_from_the_judge_pairs():
    from equiv.report.tree_view import merge_reasons, tree_payload
    from equiv.rundir import TreeFile, TreeNode

    tree = TreeFile("p0", [TreeNode(0, None, 0, ""), TreeNode(1, 0, 1, "x = 2"),
                           TreeNode(2, 0, 1, "x is 2", merged_into=1, judge_prob=0.9),
                           TreeNode(3, 0, 1, "y = 3", merged_into=1, judge_prob=0.7)], question="q", seed=0)
    pairs = [{"id": "p0", "seed": 0, "kind": "merged", "reason": "threshold", "a_node": 1, "b_node": 2},
             {"id": "p0", "seed": 0, "kind": "merged", "reason": "identical", "a_node": 3, "b_node": 1},
             {"id": "p1", "seed": 0, "kind": "merged", "reason": "floor", "a_node": 1, "b_node": 2}]
    assert merge_reasons(tree, pairs) == {"2": "threshold", "3": "identical"}
    assert tree_payload(tree, None, pairs)["reasons"] == {"2": "threshold", "3": "identical"}
    assert tree_payload(tree, None)["reasons"] == {}
