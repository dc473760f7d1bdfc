"""Outputs never destroy inputs, locks follow the real file (issue #53, items 7, 8 and parts of 10).

Every command that writes a file the user names (``label``, ``agreement``, ``siblings``, ``pairs
--output``, ``report --out``, ``solution_pairs``) refuses, in one line and before any work, an
output that is one of its inputs (by real path or as a hard link) or that lies inside a run
directory (:mod:`equiv.rundir.outputs`). The issue's two reproductions run the real CLI in a
subprocess; the rest call it in process (tests/helpers/cli.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.rundir.lock import hold_run_dir
from tests.helpers.cli import Result, invoke, search_cli
from tests.helpers.paths import REPO_ROOT
from tests.helpers.runs import runner_runs


def _cli(*argv: object) -> subprocess.CompletedProcess[str]:
    """``python search_cli.py ARGV`` in a real process."""
    return subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), *map(str, argv)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def _refused(result: Result | subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _labels(path: Path, levels: tuple[int, ...]) -> Path:
    return _write(path, [{"id": f"p-{i}", "sentence1": f"s{i}", "sentence2": f"t{i}", "result": lvl}
                         for i, lvl in enumerate(levels)])


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory) -> Path:
    """A real run directory with saved trees (eval on scripted engines)."""
    return runner_runs(tmp_path_factory.mktemp("runs"), n=1)[0]


@pytest.fixture()
def run(tmp_path: Path, saved_run: Path) -> Path:
    return Path(shutil.copytree(saved_run, tmp_path / "run"))


# -- item 7: the two reproductions, real processes -----------------------------------------
def test_agreement_never_writes_its_disagreements_over_an_input(tmp_path):
    """Before: ``agreement a b --disagreements a`` left ``a.jsonl`` empty (no disagreement to write)."""
    a = _labels(tmp_path / "a.jsonl", (4, 3, 0))
    b = _labels(tmp_path / "b.jsonl", (4, 3, 0))
    before = a.read_bytes()
    _refused(_cli("agreement", a, b, "--disagreements", a), str(a), "field 'disagreements'", "also an input")
    assert a.read_bytes() == before
    # the same file under another name: a symbolic link, a hard link, a path through '..'
    (tmp_path / "sym.jsonl").symlink_to(a)
    os.link(b, tmp_path / "hard.jsonl")
    for other in (tmp_path / "sym.jsonl", tmp_path / "hard.jsonl", tmp_path / "x" / ".." / "b.jsonl"):
        (tmp_path / "x").mkdir(exist_ok=True)
        _refused(search_cli("agreement", a, b, "--disagreements", other), "also an input")
    assert a.read_bytes() == before and b.read_bytes() == before
    ok = search_cli("agreement", a, b, "--disagreements", tmp_path / "dis.jsonl")
    assert ok.returncode == 0 and (tmp_path / "dis.jsonl").read_text() == ""


def test_siblings_never_writes_into_a_run_directory_locked_or_not(tmp_path, run):
    """Before: ``siblings RUN --out RUN/results.jsonl`` replaced the run's records, lock or no lock."""
    records = (run / "results.jsonl").read_bytes()
    with hold_run_dir(run):  # an eval writing the run
        line = _refused(_cli("siblings", run, "--out", run / "results.jsonl", "--prefilter", "0.3"),
                        "field 'out'", f"inside the run directory {run}")
    assert (run / "results.jsonl").read_bytes() == records
    for out in (run / "results.jsonl", run / "pairs.jsonl", run / "trees" / "new.jsonl"):
        _refused(search_cli("siblings", run, "--out", out, "--prefilter", "0.3"), "inside the run directory")
    _refused(search_cli("siblings", run, "--out", run, "--split", 8, 1, 1), "also an input")
    assert (run / "results.jsonl").read_bytes() == records and "Traceback" not in line
    assert not (run / "pairs.jsonl").exists() and not (run / "train.jsonl").exists()


# -- item 7: every other command with an output ----------------------------------------------------
def test_every_command_with_an_output_refuses_one_of_its_inputs(tmp_path, run):
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": f"p-{i}", "sentence1": f"x = {i}", "sentence2": f"x = {i + 1}",
                                               "result": i % 2 * 4} for i in range(4)])
    (tmp_path / "link.jsonl").symlink_to(pairs)
    before = pairs.read_bytes()
    label = ("label", pairs, "--model", "m", "--base_url", "http://127.0.0.1:9/v1", "--out")
    for out in (pairs, tmp_path / "link.jsonl"):
        _refused(search_cli(*label, out), "field 'out'", "also an input")
    # the labelling's side files count too: a --out whose failures file is the input
    todo = Path(shutil.copy(pairs, tmp_path / "labels.failed.jsonl"))
    _refused(search_cli("label", todo, *label[2:], tmp_path / "labels.jsonl"),
             "labels.failed.jsonl, which is also an input")
    _refused(search_cli("pairs", "--strategy", "formula", "--data", pairs, "--output", pairs), "field 'output'",
             "also an input")
    held = _write(tmp_path / "split" / "test.jsonl", [{"question": "What is 1 + 1?"}])
    _refused(search_cli("siblings", run, "--out", tmp_path / "split", "--split", 8, 1, 1, "--holdout", held),
             "would write", "test.jsonl, which is also an input")
    assert held.read_text() == json.dumps({"question": "What is 1 + 1?"}) + "\n"
    _refused(search_cli("report", run, "--out", run), "field 'out'", "also an input")
    _refused(search_cli("report", run, "--out", run / "report"), "inside the run directory")
    trees_only = tmp_path / "trees_only"
    shutil.copytree(run / "trees", trees_only / "trees")
    _refused(search_cli("siblings", trees_only, "--out", trees_only / "trees" / "x.json"), "inside the input directory")
    from equiv.data.solution_pairs import main as solution_pairs_main

    solutions = _write(tmp_path / "solutions.jsonl", [{"problem": "p", "question": "q", "solutions": ["a\nb", "a\nc"]}])
    _refused(invoke(solution_pairs_main, [solutions, "--out", solutions]), "also an input")
    assert pairs.read_bytes() == before and not (run / "report").exists() and not (tmp_path / "split" / "train.jsonl").exists()
    # a directory that only looks like a run (a results.jsonl of someone else's) is not one
    _write(tmp_path / "elsewhere" / "results.jsonl", [{"x": 1}])
    ok = search_cli("pairs", "--strategy", "formula", "--data", pairs, "--output", tmp_path / "elsewhere" / "m.json")
    assert ok.returncode == 0, ok.stderr


def test_output_checks_name_a_run_directory_reached_through_a_link(tmp_path, run):
    (tmp_path / "alias").symlink_to(run)
    _refused(search_cli("agreement", _labels(tmp_path / "a.jsonl", (4,)), _labels(tmp_path / "b.jsonl", (4,)),
                        "--disagreements", tmp_path / "alias" / "dis.jsonl"), f"inside the run directory {run}")


# -- item 8: locks follow the real file -------------------------------------------------------------
def _pair_file(path: Path, n: int, bad: int = 0) -> Path:
    """``n`` pairs to label; the first ``bad`` carry a marker the stub answers without a level."""
    return _write(path, [{"id": f"p-{i}", "sentence1": f"{'BAD ' if i < bad else ''}x = {i} + 1",
                          "sentence2": f"x = 1 + {i}"} for i in range(n)])


def _label_argv(pairs: Path, out: Path, url: str, *extra: object) -> list[str]:
    return [sys.executable, str(REPO_ROOT / "search_cli.py"), "label", str(pairs), "--out", str(out), "--model", "m",
            "--base_url", url, "--structured", "none", "--timeout", "30", *map(str, extra)]


def test_two_labellers_on_one_file_under_two_names_are_one_writer(tmp_path):
    """Before: ``--out k.jsonl`` and ``--out link.jsonl`` (a link to it) took two locks and both
    labelled: 36 lines for 20 pairs. Now the second is refused, naming the first. (A link as
    ``--out`` itself is refused by the one output rule, issue 66; the second name here goes
    through a linked directory, ``alias/k.jsonl``.) The first labelling is a real process (the
    default suite's real ``label`` process), the second runs in this process: the pid it names
    is the other process's."""
    import time

    from tests.helpers.chat_stub import chat_stub

    pairs = _pair_file(tmp_path / "pairs.jsonl", 20)
    out = tmp_path / "k.jsonl"
    out.touch()
    (tmp_path / "alias").symlink_to(tmp_path)
    with chat_stub(hold_first=True) as stub:  # the first labelling waits on its first answer
        first = subprocess.Popen(_label_argv(pairs, out, stub.url, "--concurrency", 1), cwd=REPO_ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while stub.requests == 0 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert stub.requests > 0, "the first labelling never asked"
            second = search_cli(*_label_argv(pairs, tmp_path / "alias" / "k.jsonl", stub.url, "--concurrency", 1)[2:])
        finally:
            stub.release.set()
            _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    _refused(second, "alias/k.jsonl", "another labelling", f"pid {first.pid}")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20


def test_a_run_directory_reached_through_a_link_is_the_same_lock(tmp_path):
    """A run directory and a link to it are one directory: one lock (a second process is refused)."""
    from equiv.errors import InputError

    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "alias").symlink_to(run)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom equiv.rundir.lock import hold_run_dir\n"
                               "with hold_run_dir(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n",
                               str(tmp_path / "alias")], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"in use by pid {holder.pid}"):
            with hold_run_dir(run):
                pass
    finally:
        holder.kill()
        holder.wait()


# -- item 10: a --limit rerun keeps the earlier failures ---------------------------------------------
def test_a_limited_rerun_merges_the_failures_file_and_never_loses_one(tmp_path):
    """Before: each run replaced ``<out>.failed.jsonl`` with its own failures, so a ``--limit 1``
    rerun that retried one of two failed pairs lost the other, and a rerun that labelled a failed
    pair left it in the file."""
    from tests.helpers.chat_stub import GOOD, chat_stub

    pairs = _pair_file(tmp_path / "pairs.jsonl", 3, bad=2)  # p-0 and p-1 get no usable answer
    out = tmp_path / "labels.jsonl"
    failed = tmp_path / "labels.failed.jsonl"

    def keys() -> list[str]:
        return sorted(json.loads(line)["key"] for line in failed.read_text().splitlines()) if failed.exists() else []

    def label(stub_url: str, *extra: object) -> Result:  # in this process: each run ends before the next
        return search_cli(*_label_argv(pairs, out, stub_url, "--tries", 1, "--concurrency", 1, *extra)[2:])

    with chat_stub(lambda prompt: "I cannot tell." if "BAD" in prompt else GOOD) as stub:
        assert label(stub.url, "--limit", 2).returncode == 1 and keys() == ["p-0", "p-1"]
        assert label(stub.url, "--limit", 1).returncode == 1  # p-0 tried again and failed again
        assert keys() == ["p-0", "p-1"]  # p-1, not reached, is still there
        retried = [json.loads(line) for line in failed.read_text().splitlines()]
        assert all(len(r["label_raw"]) == 1 for r in retried)  # p-0's row is its latest try, not two
        stub.answer = lambda _: GOOD  # the server answers everything now
        assert label(stub.url, "--limit", 1).returncode == 0 and keys() == ["p-1"]  # p-0 labelled: gone
        assert label(stub.url).returncode == 0 and not failed.exists()  # every pair labelled
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == ["p-0", "p-1", "p-2"]


# -- item 10: one run directory given twice ------------------------------------------------------------
def test_siblings_refuses_one_run_directory_given_twice(tmp_path, run):
    """Before: ``siblings RUN RUN`` wrote every pair twice (under two run tags). (In process; the
    real ``siblings`` process is test_siblings_never_writes_into_a_run_directory_locked_or_not's.)"""
    (tmp_path / "alias").symlink_to(run)
    _refused(search_cli("siblings", run, run, "--out", tmp_path / "twice.jsonl", "--prefilter", "0.3"),
             "field 'run_dirs'", "is given twice")
    _refused(search_cli("siblings", run, tmp_path / "alias", "--out", tmp_path / "twice.jsonl", "--prefilter", "0.3"),
             f"is given twice (as {run})")
    assert not (tmp_path / "twice.jsonl").exists()


# -- item 10: a lock held by another program ------------------------------------------------------------
def _stale_note(lock: Path) -> int:
    """Leave in ``lock`` the note of an equiv holder that has ended (a pid no longer running)."""
    import socket

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock.write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z"}))
    return gone.pid


def test_a_lock_held_by_another_program_names_that_holder_not_the_stale_note(tmp_path):
    """Before: a labelling refused by a lock another program holds (``flock FILE.lock ...``) named
    the pid an earlier labelling had left in the file, a process long gone. (The labelling runs
    in this process; the holder is another.)"""
    from equiv.labelling.run import lock_path

    pairs = _pair_file(tmp_path / "pairs.jsonl", 1)
    out = tmp_path / "labels.jsonl"
    lock = lock_path(out)
    stale = _stale_note(lock)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\ntime.sleep(60)\n", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = search_cli(*_label_argv(pairs, out, "http://127.0.0.1:9/v1")[2:])
    finally:
        holder.kill()
        holder.wait()
    line = _refused(result, "another labelling", f"(pid {holder.pid} (the kernel's lock table")
    assert f"(pid {stale} on host" not in line and "earlier holder" in line


def test_without_the_kernel_lock_table_a_dead_pid_is_not_called_the_holder(tmp_path, monkeypatch):
    """Where ``/proc/locks`` says nothing (another OS, a holder out of sight), the note's pid is
    checked: a pid no longer running is said to be so, not named as the holder."""
    import equiv.rundir.lock as lock_module

    lock = tmp_path / "run.lock"
    stale = _stale_note(lock)
    monkeypatch.setattr(lock_module, "kernel_holders", lambda path: None)
    text = lock_module.holder_text(lock)
    assert f"names pid {stale}, which is no longer running" in text and not text.startswith(f"pid {stale}")
    lock.write_text(json.dumps({"pid": os.getpid(), "host": __import__("socket").gethostname(), "started": "T"}))
    assert lock_module.holder_text(lock).startswith(f"pid {os.getpid()} on host")  # a live note is believed
