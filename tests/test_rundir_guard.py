"""What a run directory refuses (issue #44, items 3, 5 and 6): a second writer (two real
processes), a replaced judge or policy on resume, duplicate records with different results, and
a hand-edited ``config.yaml``. Each through the real ``eval`` CLI with scripted engines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.rundir import read_records as read_run_records
from equiv.rundir.io import temporary_name, write_atomic
from equiv.rundir.lock import LOCK, hold_run_dir
from equiv.search.cli import eval_main
from tests.helpers.runs import base_args, read_records, refused
from tests.helpers.scripted import scripted_factory

REPO = Path(__file__).resolve().parents[1]


# -- item 3: one writer per run directory -----------------------------------------------------------
def _start_slow_run(args: list[str]) -> subprocess.Popen:
    env = dict(os.environ, SCRIPTED_DELAY="0.3", HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.scripted", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_holder(lock: Path, proc: subprocess.Popen) -> None:
    deadline = time.time() + 90
    while time.time() < deadline:
        if lock.exists() and f'"pid": {proc.pid}' in lock.read_text():
            return
        if proc.poll() is not None:
            pytest.fail(f"the first run ended before the second started: {proc.stderr.read()[-800:]}")
        time.sleep(0.05)
    pytest.fail("the first run never took the lock")


def test_a_second_writer_is_refused_naming_the_holder_and_a_kill_releases_the_lock(tmp_path, capsys):
    """Two processes on one --out: a real run holds it, and the second writer (this process, the
    same ``eval`` main the command runs) is refused in one line naming the first's pid and host,
    and writes nothing; after the first is killed (SIGKILL) the kernel has dropped its lock and the
    same command resumes here. (The second writer and the resume were real processes too: each
    start costs a python import, and the lock is the kernel's either way.)"""
    args = base_args(tmp_path, n=6) + ["--run.concurrency", "1"]
    out = tmp_path / "run"
    first = _start_slow_run(args)
    try:
        _wait_for_holder(out / LOCK, first)
        other = args + ["--search.width", "3"]  # other settings: before the lock, this mixed the records
        line = refused(other, capsys)
        assert f"{out}: run directory is in use by pid {first.pid} on host " in line
        assert first.poll() is None  # the holder is untouched
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert "width: 4" in (out / "config.yaml").read_text()
    assert eval_main(args, engine_factory=scripted_factory) in (0, None)
    records = read_records(out)
    assert len(records) == 6 and len({r["id"] for r in records}) == 6
    assert all(r["error"] is None for r in records)


def test_a_refused_writer_never_removes_the_holders_run_directory(tmp_path, monkeypatch, capsys):
    """Two runs started at once on a new --out both see it missing; the one refused by the lock must
    not remove the directory the other is using (a run that fails before any record removes only a
    directory it created, and only while it holds the lock)."""
    import equiv.search.cli as cli

    args = base_args(tmp_path)
    out = tmp_path / "run"
    real_exists = Path.exists
    # this run saw --out missing (the holder created it a moment later)
    monkeypatch.setattr(Path, "exists", lambda self: False if self == out else real_exists(self))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from equiv.rundir.lock import hold_run_dir\n"
         "with hold_run_dir(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)", str(out)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (out / "config.yaml").write_text("the holder's binding\n")
        with pytest.raises(SystemExit) as refused:
            cli.eval_main(args, engine_factory=scripted_factory)
        assert refused.value.code == 2 and "in use by pid" in capsys.readouterr().err
        assert (out / "config.yaml").read_text() == "the holder's binding\n" and (out / LOCK).exists()
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_reentrant_in_one_process_and_refuses_another_descriptor_holder(tmp_path):
    with hold_run_dir(tmp_path):
        with hold_run_dir(tmp_path):  # eval_main, then run_eval
            pass
        # still held after the inner block: a child process cannot take it
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; from equiv.rundir.lock import hold_run_dir\n"
             "from equiv.errors import InputError\n"
             "try:\n    hold_run_dir(sys.argv[1]).__enter__()\nexcept InputError as e:\n    print(e); sys.exit(2)",
             str(tmp_path)],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60)
        assert probe.returncode == 2 and f"in use by pid {os.getpid()}" in probe.stdout
    with hold_run_dir(tmp_path):  # released after the outer block
        pass


def test_temporary_files_are_named_per_writer(tmp_path):
    """A fixed ``<name>.tmp`` let two writers rename each other's half-written file."""
    target = tmp_path / "trees" / "gsm8k-2.json"
    target.parent.mkdir()
    names = {temporary_name(target) for _ in range(20)}
    assert len(names) == 20 and all(str(os.getpid()) in n.name and n.parent == target.parent for n in names)
    write_atomic(target, "{}")
    assert target.read_text() == "{}" and [p.name for p in target.parent.iterdir()] == ["gsm8k-2.json"]


# -- item 5: the run is bound to its models' content ------------------------------------------------
def test_a_resume_with_a_changed_judge_or_local_policy_is_refused(tmp_path, capsys):
    """The path alone bound nothing: an edited decision_threshold (or a retrain into the same
    folder) mixed two judges' records, exit 0."""
    from tests.helpers.judges import make_tiny_judge

    judge = make_tiny_judge(tmp_path / "judge")
    capsys.readouterr()  # transformers' save progress bar
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "weights.bin").write_bytes(b"\x00" * 1000)
    args = base_args(tmp_path, n=2) + ["--pruner.strategy", "model", "--pruner.model", str(judge),
                                       "--policy.model", str(policy)]
    assert eval_main(args, engine_factory=scripted_factory) == 0
    out = tmp_path / "run"
    bound = json.loads((out / "models.json").read_text())
    assert bound["pruner.model"]["path"] == str(judge.resolve()) and len(bound["pruner.model"]["sha256"]) == 64
    assert bound["policy.model"]["files"] == 1 and bound["reward.model"] is None  # "scripted": not a local path
    assert eval_main(args, engine_factory=scripted_factory) == 0  # unchanged: resumes

    config = json.loads((judge / "config.json").read_text())
    stored = config["equiv"]["policy"]["threshold"]
    config["equiv"]["policy"]["threshold"] = 0.9
    (judge / "config.json").write_text(json.dumps(config))
    line = refused(args, capsys)
    assert f"{out / 'models.json'}: holds results made with another pruner.model" in line and str(judge.resolve()) in line
    assert json.loads((out / "models.json").read_text()) == bound  # a refused rerun rewrites nothing

    config["equiv"]["policy"]["threshold"] = stored
    (judge / "config.json").write_text(json.dumps(config))
    assert eval_main(args, engine_factory=scripted_factory) == 0  # restored: the same content again
    (policy / "weights.bin").write_bytes(b"\x01" + b"\x00" * 999)  # same size, other bytes
    assert "another policy.model" in refused(args, capsys)


def test_an_empty_model_setting_binds_no_model_and_the_run_resumes_after_the_directory_changes(
        tmp_path, monkeypatch):
    """``reward.model: ""`` (the likelihood reward's configs) names no model. It was bound as
    ``Path("")``, the working directory: every file under it was hashed at each start, the run
    directory below it among them, so the first record written made every resume refused."""
    monkeypatch.chdir(tmp_path)
    args = base_args(tmp_path, n=2)
    args[args.index("--reward.model") + 1] = ""
    assert eval_main(args, engine_factory=scripted_factory) == 0
    bound = json.loads((tmp_path / "run" / "models.json").read_text())
    assert bound["reward.model"] is None
    (tmp_path / "notes.txt").write_text("a file the working directory gained")
    assert eval_main(args, engine_factory=scripted_factory) == 0  # resumes


# -- item 6: records and the binding are not trusted blindly -------------------------------------------
def test_a_duplicate_record_with_another_result_is_refused_naming_its_line(tmp_path, capsys):
    args = base_args(tmp_path, n=3)
    assert eval_main(args, engine_factory=scripted_factory) == 0
    results = tmp_path / "run" / "results.jsonl"
    records = read_records(tmp_path / "run")
    flipped = dict(records[0], correct=not records[0]["correct"])
    results.write_text(results.read_text() + json.dumps(flipped) + "\n")
    before = results.read_text()
    line = refused(args, capsys)
    assert f"{results}:4: a second record for id {records[0]['id']!r} seed 0 (the first is on line 1)" in line
    assert results.read_text() == before  # nothing compacted away
    # the same line again (a copy, e.g. after a crash during a shard merge) is not a conflict
    results.write_text(results.read_text().rsplit("\n", 2)[0] + "\n" + json.dumps(records[0]) + "\n")
    assert [r["id"] for r in read_run_records(results)[0]][-1] == records[0]["id"]
    assert eval_main(args, engine_factory=scripted_factory) == 0
    assert len(read_records(tmp_path / "run")) == 3


@pytest.mark.parametrize("rerun_width", ["4", "7"])
def test_a_hand_edited_config_yaml_is_refused_as_edited(tmp_path, capsys, rerun_width):
    """After editing the width to 7, a rerun with the original command said "7 -> 5"-style
    nonsense, and one with --search.width 7 mixed width-4 and width-7 records."""
    args = base_args(tmp_path, n=2)
    assert eval_main(args, engine_factory=scripted_factory) == 0
    config = tmp_path / "run" / "config.yaml"
    config.write_text(config.read_text().replace("width: 4", "width: 7"))
    edited = config.read_text()
    line = refused(args + ["--search.width", rerun_width], capsys)
    assert f"{config}: was edited after the run wrote it" in line and "binding.sha256" in line
    assert config.read_text() == edited
    config.write_text(edited.replace("width: 7", "width: 4"))  # restored
    assert eval_main(args, engine_factory=scripted_factory) == 0


def test_records_read_strictly_refuse_conflicts_and_keep_retries(tmp_path):
    path = tmp_path / "results.jsonl"
    rows = [{"id": "a", "seed": 0, "correct": False, "error": "boom"}, {"id": "a", "seed": 0, "correct": True},
            {"id": "b", "seed": 0, "correct": True, "seconds": 1.0}, {"id": "b", "seed": 0, "correct": True, "seconds": 2.0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(read_run_records(path)[0]) == 4  # a retry and a copy differing only in wall time
    path.write_text(path.read_text() + json.dumps({"id": "b", "seed": 0, "correct": False}) + "\n")
    with pytest.raises(InputError, match=r"results.jsonl:5: a second record for id 'b' seed 0 \(the first is on line 3\)"):
        read_run_records(path)


def test_a_run_directory_from_before_the_policy_rename_keeps_its_guard_setting():
    """config.yaml of a run written with --pruner.claim_guard / --pruner.statement_threshold compares
    as --pruner.guard / --pruner.floor: resuming it without the guard is a settings change, not a match."""
    from equiv.rundir.resume import defining

    old = {"algo": "mcts", "pruner": {"strategy": "model", "claim_guard": True, "statement_threshold": 0.9}}
    new = {"algo": "mcts", "pruner": {"strategy": "model", "guard": None, "floor": None}}
    assert defining(old)["pruner.guard"] is True and defining(old)["pruner.floor"] == 0.9
    assert defining(old) != defining(new)
    assert defining({"algo": "mcts", "pruner": {"strategy": "model", "guard": True, "floor": 0.9}}) == defining(old)


def test_a_run_directory_bound_before_the_plan_floor_existed_still_resumes():
    """``pruner.plan_floor`` counts where it is set; unset it is left out of the bound settings, so
    the digest of a directory bound before the setting existed (the budget sweep's committed runs)
    still holds, and a run that sets it is bound to it."""
    from equiv.rundir.binding import check_digest, read_bound_config, read_bound_data, read_bound_models
    from equiv.rundir.resume import defining
    from tests.helpers.paths import REPO_ROOT

    before = {"algo": "mcts", "pruner": {"strategy": "model", "floor": 0.7}}
    assert "pruner.plan_floor" not in defining(before)
    assert defining({**before, "pruner": {**before["pruner"], "plan_floor": None}}) == defining(before)
    assert defining({**before, "pruner": {**before["pruner"], "plan_floor": 0.9}})["pruner.plan_floor"] == 0.9
    # a committed sweep run, bound before the key existed and resumed since (config.yaml now says
    # plan_floor: null): its settings as they were bound and as they are now give one digest
    run = REPO_ROOT / "benchmarks/data/budget_sweep/runs/budget_mcts_s02_w10_qwen15b_gsm8k/unpruned"
    config = read_bound_config(run)
    assert config is not None
    as_bound = {**config, "pruner": {k: v for k, v in config["pruner"].items() if k != "plan_floor"}}
    assert defining(as_bound) == defining(config)
    for settings in (as_bound, config):
        check_digest(run, defining(settings), read_bound_data(run), read_bound_models(run))  # it holds
