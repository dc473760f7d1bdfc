"""The run directory's one owner (equiv.rundir): old run directories still load, resume, merge,
compare and report; resume keeps ``judge_pairs.jsonl`` free of repeats; the durable writer."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.report.build import build_report
from equiv.report.load import load_runs
from equiv.report.stats import compare_rows as report_compare_rows
from equiv.rundir import (
    PAIRS,
    RESULTS,
    SUMMARY,
    TREES,
    load_records,
    merge_run_dir,
    prepare_resume,
    read_pairs,
    read_records,
    read_tree,
    shard_dir,
    summarise,
    write_atomic,
)
from equiv.report.compare import compare_rows
from equiv.search.config import RunConfig, SearchConfig
from equiv.search.runner import Engines, Grader, run_eval
from tests.helpers.scripted import KeyedReward, Problem, RestateJudge, SeededPolicy, problems, simple_extract, simple_grade

FIXTURE = Path(__file__).resolve().parent / "data" / "rundir_v1"


@pytest.fixture
def old_runs(tmp_path: Path) -> Path:
    """A copy of the two run directories written before equiv.rundir existed."""
    target = tmp_path / "old"
    shutil.copytree(FIXTURE, target)
    return target


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# -- old run directories --------------------------------------------------------------------------
def test_old_run_directory_loads_with_the_summary_it_was_written_with(old_runs: Path) -> None:
    for name in ("base", "pruned"):
        run = old_runs / name
        records, torn = read_records(run / RESULTS)
        assert len(records) == 6 and not torn
        stored = json.loads((run / SUMMARY).read_text())
        now = summarise(records, algo=stored["algo"], pruner=stored["pruner"])
        assert {k: stored[k] for k in now} == now  # same numbers, computed the same way
        for record in records:
            tree = read_tree(run / record["tree"])
            assert (tree.id, tree.seed) == (record["id"], record["seed"])
    pairs, torn = read_pairs(old_runs / "pruned" / PAIRS)
    assert len(pairs) == 19 and not torn


def test_old_run_directories_compare_and_report(old_runs: Path, tmp_path: Path) -> None:
    rows, shared = compare_rows([old_runs / "base", old_runs / "pruned"])
    assert shared == 6 and [r["pruner"] for r in rows] == ["none", "embedding"]
    assert rows[0]["token_ratio"] == pytest.approx(100.0)
    runs = load_runs([old_runs / "base", old_runs / "pruned"])
    table = report_compare_rows(runs)
    assert [r.mean_tokens for r in table] == pytest.approx([r["mean_generated_tokens"] for r in rows])
    assert table[1].pruned_per_expansion == pytest.approx(rows[1]["pruned_per_expansion"]) and table[1].pruned_per_expansion > 0
    files = build_report([old_runs / "base", old_runs / "pruned"], tmp_path / "report")
    assert files.html.exists() and files.trees > 0


def test_old_run_directory_resumes_only_what_is_missing(old_runs: Path) -> None:
    run = old_runs / "pruned"
    kept = lines(run / RESULTS)
    last = json.loads(kept[-1])
    # A crash after the last problem's pairs were appended, while its record was being written.
    (run / RESULTS).write_text("\n".join(kept[:-1]) + "\n" + kept[-1][:40], encoding="utf-8")
    old_pairs = [p for p in read_pairs(run / PAIRS)[0]]
    with (run / PAIRS).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": last["id"], "seed": last["seed"], "kind": "merged", "a": "x", "b": "y"}) + "\n")
    by_id = {r["id"]: r for r in map(json.loads, kept)}
    todo = [Problem(id=pid, question=by_id[pid]["question"], answer=by_id[pid]["answer"]) for pid in sorted(by_id)]
    summary = run_eval(
        algo="sbs",
        problems=todo,
        engines=Engines(SeededPolicy(), KeyedReward(), None),
        out_dir=run,
        search=SearchConfig(width=4),
        run=RunConfig(progress=False, seeds=[0, 1], save_trees=True),
        pruner="embedding",
        grader=Grader(simple_extract, simple_grade),
    )
    now = lines(run / RESULTS)
    assert now[:-1] == kept[:-1]  # the old records are untouched, byte for byte
    assert (json.loads(now[-1])["id"], json.loads(now[-1])["seed"]) == (last["id"], last["seed"])
    assert summary["problems"] == 6 and summary["complete"] is True
    # the rerun problem's stale pair is gone; everyone else's pairs are kept
    assert read_pairs(run / PAIRS)[0] == [p for p in old_pairs if (p["id"], p["seed"]) != (last["id"], last["seed"])]


def test_old_run_directory_with_worker_shards_merges_back(old_runs: Path) -> None:
    run = old_runs / "pruned"
    original = lines(run / RESULTS)
    original_pairs = Counter(json.dumps(p, sort_keys=True) for p in read_pairs(run / PAIRS)[0])
    records = [json.loads(x) for x in original]
    # As a killed two-worker run leaves it: worker 0 finished two problems into its own shard.
    moved = records[-2:]
    moved_keys = {(r["id"], r["seed"]) for r in moved}
    shard = shard_dir(run, 0)
    (shard / TREES).mkdir(parents=True)
    (shard / RESULTS).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in moved), encoding="utf-8")
    for r in moved:
        (run / r["tree"]).rename(shard / r["tree"])
    pairs = read_pairs(run / PAIRS)[0]
    (run / PAIRS).write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs if (p["id"], p["seed"]) not in moved_keys))
    (shard / PAIRS).write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs if (p["id"], p["seed"]) in moved_keys))
    (run / RESULTS).write_text("\n".join(original[:-2]) + "\n", encoding="utf-8")

    merged = merge_run_dir(run)
    assert not (run / "workers").exists()
    assert sorted(map(json.dumps, merged)) == sorted(json.dumps(json.loads(x)) for x in original)
    assert all((run / r["tree"]).is_file() for r in merged)
    assert Counter(json.dumps(p, sort_keys=True) for p in read_pairs(run / PAIRS)[0]) == original_pairs
    assert merge_run_dir(run) == merged  # merging again changes nothing


# -- judge pairs on resume ------------------------------------------------------------------------
def _pruned_run(out: Path, n: int) -> dict:
    return run_eval(
        algo="sbs",
        problems=problems(n),
        engines=Engines(SeededPolicy(), KeyedReward(), RestateJudge()),
        out_dir=out,
        search=SearchConfig(width=4),
        run=RunConfig(progress=False, concurrency=1),
        pruner="restate",
        grader=Grader(simple_extract, simple_grade),
    )


def test_a_crash_between_pairs_and_record_repeats_no_pairs(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    _pruned_run(fresh, 4)
    reference = Counter(json.dumps(p, sort_keys=True) for p in read_pairs(fresh / PAIRS)[0])
    assert reference, "the scripted judge must log pairs for this test to mean anything"

    crashed = tmp_path / "crashed"
    _pruned_run(crashed, 4)
    # The process died after appending every problem's pairs but before its last two records.
    kept = lines(crashed / RESULTS)
    (crashed / RESULTS).write_text("\n".join(kept[:2]) + "\n", encoding="utf-8")
    _pruned_run(crashed, 4)
    assert Counter(json.dumps(p, sort_keys=True) for p in read_pairs(crashed / PAIRS)[0]) == reference


def test_prepare_resume_drops_a_torn_pair_line_and_pairs_of_retried_errors(tmp_path: Path) -> None:
    rows = [{"id": "a", "seed": 0, "correct": True}, {"id": "b", "seed": 0, "correct": False, "error": "boom"}]
    (tmp_path / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = [{"id": "a", "seed": 0, "kind": "merged"}, {"id": "b", "seed": 0, "kind": "merged"}]
    (tmp_path / PAIRS).write_text("".join(json.dumps(p) + "\n" for p in pairs) + '{"id": "c", "se')
    done, _ = prepare_resume(tmp_path, algo="sbs", pruner="none", retry_errors=True)
    assert done == {("a", 0)}
    assert read_pairs(tmp_path / PAIRS) == ([pairs[0]], False)


# -- reading, keying, writing ---------------------------------------------------------------------
def test_one_reader_one_set_of_errors(tmp_path: Path) -> None:
    path = tmp_path / RESULTS
    path.write_text('{"id": "a", "seed": 0}\n{"id": "a", "seed": "x"}\n')
    with pytest.raises(InputError, match=r"results.jsonl:2: field 'seed': must be an integer"):
        read_records(path)
    path.write_text('{"id": "a", "seed": 0, "correct": 1}\n')
    with pytest.raises(InputError, match=r"results.jsonl:1: field 'correct': must be true or false"):
        load_records(tmp_path)
    path.write_text('{"id": "a"}\n')
    assert load_records(tmp_path) == {("a", 0): {"id": "a"}}  # an old record without a seed is seed 0
    with pytest.raises(InputError, match="field 'correct': missing"):
        read_records(path, require=("correct",))


def test_later_record_wins_unless_it_is_an_error(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "seed": 0, "correct": False, "error": "timeout"},  # retried: the result replaces it
        {"id": "a", "seed": 0, "correct": True},
        {"id": "b", "seed": 0, "correct": True},
        {"id": "b", "seed": 0, "correct": False, "error": "late failure"},
    ]
    (tmp_path / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_records(tmp_path) == {("a", 0): rows[1], ("b", 0): rows[2]}
    done, kept = prepare_resume(tmp_path, algo="sbs", pruner="none", retry_errors=False)
    assert kept == [rows[1], rows[2]] and len(lines(tmp_path / RESULTS)) == 2


def test_write_atomic_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / SUMMARY
    write_atomic(target, "old\n")
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n" and not (tmp_path / (SUMMARY + ".tmp")).exists()
