"""`search_cli.py eval --scale.workers 2` end to end: the real CLI in a subprocess starts a local
Ray instance, is killed mid-run (the whole process group, like a lost job), and the same command
resumes into records identical to a one-process run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from equiv.search.cli import eval_main
from tests.helpers.scripted import scripted_factory
from tests.helpers.runs import base_args, sigint_at_default

pytest.importorskip("ray", reason="ray is not installed (pip install 'equiv[ray]')")

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[1]


def records(out: Path) -> dict:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {json.loads(x)["id"]: {k: v for k, v in json.loads(x).items() if k != "seconds"} for x in lines}


def shard_lines(out: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (out / "workers").glob("*/results.jsonl"))


def test_scale_options_parse_and_bad_values_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        eval_main(base_args(tmp_path) + ["--scale.workers", "0"], engine_factory=scripted_factory)
    assert exit_info.value.code == 2 and "scale.workers" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        eval_main(
            base_args(tmp_path) + ["--scale.workers", "2", "--scale.policy_gpu_memory_utilization", "0.9"],
            engine_factory=scripted_factory,
        )
    assert exit_info.value.code == 2 and "0.95" in capsys.readouterr().err


def test_killed_two_worker_cli_run_resumes_to_the_one_process_records(tmp_path):
    args = base_args(tmp_path, n=8) + ["--run.concurrency", "1", "--scale.workers", "2"]
    env = dict(os.environ, SCRIPTED_DELAY="0.1", HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "tests.helpers.scripted", *args]
    out = tmp_path / "run"
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if (out / "workers").is_dir() and shard_lines(out) >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(f"finished before it could be killed: {proc.stderr.read().decode()[-800:]}")
        time.sleep(0.05)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("no shard records within 120 s")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "results.jsonl").exists() or len(records(out)) < 8

    done = subprocess.run(
        cmd, cwd=REPO, env=dict(env, SCRIPTED_DELAY="0"), capture_output=True, text=True, timeout=180,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr[-1500:]
    assert "accuracy" in done.stdout
    assert not (out / "workers").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["problems"] == 8 and summary["workers"] == 2

    fresh = tmp_path / "fresh"
    single = [*args[:3], str(fresh), *args[4:-2]]  # same command without --scale.workers
    assert eval_main(single, engine_factory=scripted_factory) == 0
    assert records(out) == records(fresh)
    assert list(records(out)) == [f"problems-{i}" for i in range(8)]  # merged in problem order


def test_ctrl_c_on_a_two_worker_run_is_one_line_and_resumable(tmp_path):
    """SIGINT to the driver: what the workers finished is merged, ``summary.json`` says
    ``complete: false``, one line (no traceback) and exit 130 -- as a one-process run."""
    args = base_args(tmp_path, n=8) + ["--run.concurrency", "1", "--scale.workers", "2"]
    env = dict(os.environ, SCRIPTED_DELAY="0.2", HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "tests.helpers.scripted", *args]
    out = tmp_path / "run"
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_at_default)
    deadline = time.time() + 120
    while time.time() < deadline and not ((out / "workers").is_dir() and shard_lines(out) >= 2):
        if proc.poll() is not None:
            pytest.fail(f"finished before it could be interrupted: {proc.stderr.read()[-800:]}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # the driver only, as a terminal's Ctrl-C reaches it first
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-1500:]
    assert "rerun the same command to resume" in err and "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["problems"] >= 2 and not (out / "workers").exists()
    done = subprocess.run(cmd, cwd=REPO, env=dict(env, SCRIPTED_DELAY="0"), capture_output=True, text=True,
                          timeout=180, start_new_session=True)
    assert done.returncode == 0, done.stderr[-1500:]
    assert len(records(out)) == 8
