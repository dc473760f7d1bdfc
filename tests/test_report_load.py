"""Run-directory reading and the report's numbers (pure functions, no browser, no subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.report.load import load_run, load_runs
from equiv.report.stats import compare_rows, pruning_by_depth, shared_ids
from equiv.report.tree_view import script_json, select_trees, tree_bytes, tree_payload
from tests.helpers.runs import NASTY, write_run


def test_loads_documented_run(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", pruned=True))
    assert list(run.results) == ["test/algebra/1.json", "test/algebra/2.json", "7"]
    assert run.algo == "mcts" and run.pruner == "model"
    assert set(run.trees) == set(run.results), "trees are keyed by the id inside the file, not the file name"
    assert run.trees["7"].merged_count == 2
    assert run.summary["problems"] == 3 and run.config["algo"] == "mcts"


def test_run_without_trees_or_summary_still_loads(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", pruned=False, trees=False, summary=False))
    assert run.trees == {} and run.summary is None and run.pruner == "none"


@pytest.mark.parametrize("make", ["missing", "file", "empty_dir"])
def test_not_a_run_directory(tmp_path: Path, make: str) -> None:
    target = tmp_path / "x"
    if make == "file":
        target.write_text("hi")
    elif make == "empty_dir":
        target.mkdir()
    with pytest.raises(InputError, match="not a run directory") as err:
        load_run(target)
    assert str(target) in str(err.value)


def test_malformed_results_line_is_located(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    lines = (run / "results.jsonl").read_text().splitlines()
    lines[1] = lines[1][:-5]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        load_run(run)
    assert str(err.value).startswith(f"{run / 'results.jsonl'}:2: malformed JSON")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("generated_tokens", None, "missing"),
    ("generated_tokens", "12", "must be an integer"),
    ("generated_tokens", -1, "must be >= 0"),
    ("correct", 1, "must be true or false"),
    ("id", [1], "must be a string or integer"),
])
def test_bad_result_fields_name_the_field(tmp_path: Path, field: str, value, message: str) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    lines = (run / "results.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    if value is None:
        del rec[field]
    else:
        rec[field] = value
    lines[2] = json.dumps(rec)
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=message) as err:
        load_run(run)
    assert (err.value.line, err.value.field) == (3, field)


def test_later_record_for_same_problem_wins(tmp_path: Path) -> None:
    """A retry after an error: the later result replaces the error record (two different
    successful results are refused: tests/test_rundir_guard.py)."""
    run = write_run(tmp_path / "r", pruned=True)
    lines = (run / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps(dict(first, correct=False, error="boom"))
    first.update(correct=False, generated_tokens=999)
    (run / "results.jsonl").write_text("\n".join(lines + [json.dumps(first)]) + "\n")
    loaded = load_run(run)
    assert loaded.duplicates == 1 and len(loaded.results) == 3
    assert loaded.results["test/algebra/1.json"]["generated_tokens"] == 999


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t["nodes"][2].update(merged_into=77), "merged into unknown node 77"),
    (lambda t: t["nodes"][4].update(parent=55), "unknown parent 55"),
    (lambda t: t["nodes"][1].update(value="high"), "must be a finite number"),
    (lambda t: t["nodes"][1].pop("depth"), "missing"),
    (lambda t: t.pop("nodes"), "missing or not a list"),
])
def test_bad_tree_files_are_located(tmp_path: Path, edit, message: str) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    path = run / "trees" / "1.json"
    tree = json.loads(path.read_text())
    edit(tree)
    path.write_text(json.dumps(tree))
    with pytest.raises(InputError, match=message) as err:
        load_run(run)
    assert err.value.path == str(path)


def test_tree_file_that_is_not_json(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    (run / "trees" / "2.json").write_text('{"id": 7,\n "nodes": [}')
    with pytest.raises(InputError, match=r"2\.json:2: malformed JSON"):
        load_run(run)


def test_compare_rows_on_shared_problems_against_first_run(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", pruned=False, ids=(1, 2, 3, 4), tokens=(100, 200, 300, 400))
    pruned = write_run(tmp_path / "pruned", pruned=True, ids=(2, 3, 4), tokens=(200, 300, 400))
    runs = load_runs([base, pruned])
    assert shared_ids(runs) == ["2", "3", "4"]
    b, p = compare_rows(runs)
    assert (b.problems, b.total_problems, p.problems) == (3, 4, 3)
    assert b.mean_tokens == pytest.approx(300.0) and p.mean_tokens == pytest.approx(150.0)
    assert b.token_ratio == pytest.approx(100.0) and p.token_ratio == pytest.approx(50.0)
    # write_run marks the second problem of each run wrong: id 2 in base (shared), id 3 in pruned.
    assert b.accuracy == pytest.approx(200 / 3) and p.accuracy == pytest.approx(200 / 3)
    assert p.pruned_per_expansion == pytest.approx(1.0) and b.pruned_per_expansion == pytest.approx(0.0)
    assert (b.pruner, p.pruner) == ("none", "model")


def test_duplicate_directory_names_get_distinct_labels(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a" / "run", pruned=False)
    b = write_run(tmp_path / "b" / "run", pruned=True)
    assert [r.name for r in load_runs([a, b])] == ["run", "run (2)"]


def test_pruning_by_depth_counts_merged_children(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", pruned=True))
    assert pruning_by_depth(list(run.trees.values())) == {1: (6, 9), 2: (0, 6)}
    base = load_run(write_run(tmp_path / "b", pruned=False))
    assert pruning_by_depth(list(base.trees.values())) == {1: (0, 9), 2: (0, 9)}


def test_select_trees_prefers_merges_and_validates_ids(tmp_path: Path) -> None:
    runs = load_runs([write_run(tmp_path / "b", pruned=False), write_run(tmp_path / "p", pruned=True)])
    tree = runs[1].trees["7"]
    tree.nodes = [n for n in tree.nodes if n.merged_into is None]  # problem 7: no merges left
    sel = select_trees(runs, None, 2)
    assert sel.ids == ["test/algebra/1.json", "test/algebra/2.json"] and sel.omitted == 1
    assert select_trees(runs, ["7"], 1).ids == ["7"]
    with pytest.raises(InputError, match="no saved tree for problem"):
        select_trees(runs, ["nope"], 5)


def test_script_json_cannot_close_the_script_block(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", pruned=True))
    payload = tree_payload(run.trees["7"], run.results["7"])
    text = script_json(payload)
    assert "</script" not in text.lower() and "<" not in text and "&" not in text
    assert json.loads(text)["nodes"][3][3] == NASTY


def test_torn_last_line_is_left_out_and_flagged(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    with (run / "results.jsonl").open("a") as fh:
        fh.write('{"id": "p9", "correct": tr')  # the writer died mid-line
    loaded = load_run(run)
    assert loaded.torn and len(loaded.results) == 3
    # The same text followed by a newline is not torn: it is a malformed line, located.
    with (run / "results.jsonl").open("a") as fh:
        fh.write("\n")
    with pytest.raises(InputError, match=r"results\.jsonl:4: malformed JSON"):
        load_run(run)


def test_several_seeds_key_problems_by_id_and_seed(tmp_path: Path) -> None:
    single = write_run(tmp_path / "single", pruned=False)
    multi = write_run(tmp_path / "multi", pruned=True)
    lines = [json.loads(x) for x in (multi / "results.jsonl").read_text().splitlines()]
    extra = [dict(rec, seed=1, generated_tokens=1) for rec in lines]
    (multi / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines + extra))
    tree = json.loads((multi / "trees" / "2.json").read_text())
    (multi / "trees" / "2.seed1.json").write_text(json.dumps(dict(tree, seed=1)))
    (multi / "trees" / "2.json").write_text(json.dumps(dict(tree, seed=0)))
    alone = load_run(multi)
    assert len(alone.results) == 6 and "7 seed=1" in alone.results and set(alone.trees) >= {"7 seed=0", "7 seed=1"}
    runs = load_runs([single, multi])
    assert all(" seed=" in key for key in runs[0].results), "a multi-seed run rekeys every run"
    assert shared_ids(runs) == [f"{pid} seed=0" for pid in ("test/algebra/1.json", "test/algebra/2.json", "7")]


def test_exact_duplicates_are_not_counted_as_pruning(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", pruned=True)
    for path in (run / "trees").glob("*.json"):
        tree = json.loads(path.read_text())
        tree["nodes"][2]["text"] = "  Step 1: x = 2 +   3 = 5."  # whitespace-equal to its representative
        tree["nodes"][2]["judge_prob"] = 1.0
        path.write_text(json.dumps(tree))
    loaded = load_run(run)
    t = loaded.trees["7"]
    assert [t.is_duplicate(n) for n in t.merged_nodes()] == [True, False]
    assert (t.merged_count, t.judge_merged_count) == (2, 1)
    assert pruning_by_depth(list(loaded.trees.values()))[1] == (3, 9)
    payload = tree_payload(t, loaded.results["7"])
    assert (payload["merged"], payload["duplicates"]) == (1, 1)


def test_select_trees_respects_size_budget_but_keeps_one(tmp_path: Path) -> None:
    runs = load_runs([write_run(tmp_path / "b", pruned=False), write_run(tmp_path / "p", pruned=True)])
    one = tree_bytes(runs, "7")
    sel = select_trees(runs, None, 10, max_mb=(2.5 * one) / 1e6)
    assert len(sel.ids) == 2 and sel.over_budget == 1
    tiny = select_trees(runs, None, 10, max_mb=1e-9)
    assert len(tiny.ids) == 1 and tiny.over_budget == 2, "the viewer is never left empty"
    assert select_trees(runs, ["7", "test/algebra/1.json"], 10, max_mb=1e-9).ids == ["7", "test/algebra/1.json"]
