"""`search_cli.py eval` / `compare`: the real CLI (jsonargparse, data loading, run directory) with
scripted engines through the ``engine_factory`` seam, a subprocess killed mid-run and resumed
(``slow``), bad input, and every recipe in configs/search parsing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from equiv.search.algorithms import ALGORITHMS
from equiv.report.compare import compare_main, compare_rows
from equiv.search.cli import eval_main
from equiv.search.config import RunConfig, SearchConfig
from equiv.search.runner import Engines, Grader, run_eval
from tests.helpers.runs import base_args, read_records, refused, sigint_at_default
from tests.helpers.scripted import KeyedReward, RestateJudge, SeededPolicy, problems, scripted_factory, simple_extract, simple_grade

REPO = Path(__file__).resolve().parents[1]


# -- eval through the real CLI -------------------------------------------------------------------
def test_eval_writes_the_run_directory(tmp_path, capsys):
    assert eval_main(base_args(tmp_path) + ["--pruner.strategy", "formula"], engine_factory=scripted_factory) == 0
    out = tmp_path / "run"
    assert (out / "config.yaml").exists() and (out / "summary.json").exists()
    text = (out / "config.yaml").read_text()
    assert "algo: sbs" in text and "width: 4" in text
    recs = read_records(out)
    assert [r["id"] for r in recs] and len(recs) == 4 and all(r["pruner"] == "formula" for r in recs)
    assert "accuracy" in capsys.readouterr().out


def test_config_files_compose_and_flags_override(tmp_path):
    first = tmp_path / "a.yaml"
    first.write_text("algo: dfs\nsearch:\n  width: 3\n  num_sequence: 2\n")
    second = tmp_path / "b.yaml"
    second.write_text("search:\n  width: 5\n")
    args = base_args(tmp_path) + ["--config", str(first), "--config", str(second), "--search.num_sequence", "1"]
    # base_args puts --algo sbs and --search.width 4 *before* the configs: the configs win
    assert eval_main(args, engine_factory=scripted_factory) == 0
    text = (tmp_path / "run" / "config.yaml").read_text()
    assert "algo: dfs" in text and "width: 5" in text and "num_sequence: 1" in text


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--algo", "bfs"], "unknown algorithm 'bfs'"),
        (["--bogus", "1"], "unrecognized arguments"),
        (["--search.width", "x"], "search.width"),
        (["--search.prune_stage", "middle"], "prune_stage"),
        (["--data.path", "/nonexistent/problems.jsonl"], "problems.jsonl"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exc:
        code = eval_main(base_args(tmp_path) + extra, engine_factory=scripted_factory)
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and message in err


def test_malformed_problem_record_is_located(tmp_path, capsys):
    args = base_args(tmp_path)
    data = tmp_path / "problems.jsonl"
    data.write_text(data.read_text() + "{broken\n")
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(eval_main(args, engine_factory=scripted_factory))
    assert exc.value.code == 2
    assert "problems.jsonl:5" in capsys.readouterr().err


def test_policy_error_on_one_problem_is_recorded(tmp_path):
    assert eval_main(base_args(tmp_path, fail=(1,)), engine_factory=scripted_factory) == 0
    recs = {r["id"]: r for r in read_records(tmp_path / "run")}
    assert len(recs) == 4 and sum(bool(r["error"]) for r in recs.values()) == 1
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["errors"] == 1


@pytest.mark.slow
def test_killed_subprocess_resumes_without_loss_or_duplicates(tmp_path):
    args = base_args(tmp_path, n=6) + ["--run.concurrency", "1"]
    env = dict(os.environ, SCRIPTED_DELAY="0.05", HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "tests.helpers.scripted", *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = tmp_path / "run" / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(f"finished before it could be killed: {proc.stderr.read().decode()[-500:]}")
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(results.read_text().splitlines())
    assert 2 <= partial < 6
    done = subprocess.run(cmd, cwd=REPO, env=dict(env, SCRIPTED_DELAY="0"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    recs = read_records(tmp_path / "run")
    assert len(recs) == 6 and len({r["id"] for r in recs}) == 6
    # identical to an uninterrupted run
    fresh = tmp_path / "fresh"
    assert eval_main([*args[:3], str(fresh), *args[4:]], engine_factory=scripted_factory) == 0
    strip = lambda rs: {r["id"]: {k: v for k, v in r.items() if k != "seconds"} for r in rs}  # noqa: E731
    assert strip(recs) == strip(read_records(fresh))


# -- compare ----------------------------------------------------------------------------------------
def _run(out: Path, n: int, prune: bool) -> None:
    run_eval(
        algo="sbs",
        problems=problems(n),
        engines=Engines(SeededPolicy(), KeyedReward(), RestateJudge() if prune else None),
        out_dir=out,
        search=SearchConfig(width=4),
        run=RunConfig(progress=False),
        pruner="restate" if prune else "none",
        grader=Grader(simple_extract, simple_grade),
    )


def test_compare_table_on_shared_problems(tmp_path, capsys):
    _run(tmp_path / "base", 5, prune=False)
    _run(tmp_path / "pruned", 3, prune=True)  # a partly finished run: compared on its 3 problems
    rows, shared = compare_rows([tmp_path / "base", tmp_path / "pruned"])
    assert shared == 3
    base = [r for r in read_records(tmp_path / "base") if r["id"] in ("p0", "p1", "p2")]
    pruned = read_records(tmp_path / "pruned")
    base_tokens = sum(r["generated_tokens"] for r in base) / 3
    pruned_tokens = sum(r["generated_tokens"] for r in pruned) / 3
    assert rows[0]["mean_generated_tokens"] == pytest.approx(base_tokens)
    assert rows[0]["token_ratio"] == pytest.approx(100.0)
    assert rows[1]["token_ratio"] == pytest.approx(100 * pruned_tokens / base_tokens)
    assert rows[1]["accuracy"] == pytest.approx(100 * sum(r["correct"] for r in pruned) / 3)
    assert compare_main([str(tmp_path / "base"), str(tmp_path / "pruned"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"shared_problems": 3, "rows": json.loads(json.dumps(rows))}
    assert compare_main([str(tmp_path / "base"), str(tmp_path / "pruned")]) == 0
    assert "3 problems shared" in capsys.readouterr().out  # the table form of the same rows


def test_compare_bad_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        compare_main([str(tmp_path)])
    assert exc.value.code == 2
    assert "no results.jsonl" in capsys.readouterr().err


def test_compare_disjoint_runs(tmp_path, capsys):
    _run(tmp_path / "a", 2, prune=False)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.jsonl").write_text(json.dumps({"id": "zzz", "seed": 0, "correct": True}) + "\n")
    with pytest.raises(SystemExit):
        compare_main([str(tmp_path / "a"), str(tmp_path / "b")])
    assert "share no problems" in capsys.readouterr().err


# -- recipes --------------------------------------------------------------------------------------
RECIPES = sorted((REPO / "configs" / "search").glob("*.yaml"))


def test_there_is_a_recipe_per_paper_setting():
    names = {p.stem for p in RECIPES}
    for algo in ALGORITHMS.names():
        for variant in ("baseline", "pruned"):
            assert f"{algo}_qwen25math7b_math500_{variant}" in names
    for variant in ("baseline", "pruned"):
        assert f"mcts_qwen25math7b_gsm8k_{variant}" in names
        assert f"mcts_mistral7bsft_gsm8k_{variant}" in names
    assert "demo_cpu" in names


@pytest.fixture(scope="module")
def eval_parser():
    """``eval``'s parser, built once for the recipes (a parse leaves the parser as it was)."""
    from equiv.search.cli import build_eval_parser

    return build_eval_parser()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_parses(recipe, eval_parser):
    parser = eval_parser
    cfg = parser.parse_args(["--config", str(recipe)])
    init = parser.instantiate(cfg)
    assert cfg.algo in ALGORITHMS
    init.search.validate()
    init.run.validate()
    init.policy.validate()
    init.reward.validate()  # a PRM model, unless the reward is the policy's own (likelihood)
    assert init.policy.model


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_rerun_completes(tmp_path):
    args = base_args(tmp_path, n=8)
    env = dict(os.environ, SCRIPTED_DELAY="0.2", HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "tests.helpers.scripted", *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_at_default)
    results = tmp_path / "run" / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (results.exists() and results.read_text().count("\n") >= 2):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-800:]
    assert "rerun the same command to resume" in err and "Traceback" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["complete"] is False and 2 <= summary["problems"] < 8
    assert eval_main(args, engine_factory=scripted_factory) == 0
    recs = read_records(tmp_path / "run")
    assert len(recs) == 8 and len({r["id"] for r in recs}) == 8


def _with_data(args, path) -> list[str]:
    args = list(args)
    args[args.index("--data.path") + 1] = str(path)
    return args


def test_a_run_directory_is_bound_to_its_data(tmp_path, capsys):
    """A rerun on another problems file (same dataset, so the same row-index ids) or on the same
    file edited would skip every problem and report the old results as the new file's."""
    args = base_args(tmp_path, n=3)
    assert eval_main(args, engine_factory=scripted_factory) == 0
    out = tmp_path / "run"
    config_before = (out / "config.yaml").read_text()
    bound = json.loads((out / "data.json").read_text())
    assert bound["path"] == str((tmp_path / "problems.jsonl").resolve()) and len(bound["sha256"]) == 64
    other = tmp_path / "other" / "problems.jsonl"  # same file name, so the same ids
    other.parent.mkdir()
    other.write_text("".join(json.dumps({"question": f"other {i}", "answer": "1"}) + "\n" for i in range(3)))
    line = refused(_with_data(args, other), capsys)
    assert f"{out / 'config.yaml'}: holds results made with other settings" in line and "data.path" in line
    assert (out / "config.yaml").read_text() == config_before  # a refused rerun rewrites nothing
    assert json.loads((out / "data.json").read_text()) == bound
    # the same path with other content (an edited or replaced file)
    (tmp_path / "problems.jsonl").write_text(other.read_text())
    assert "data.sha256" in refused(args, capsys)
    assert len(read_records(out)) == 3


def test_a_malformed_record_stops_a_rerun_before_anything_is_rewritten(tmp_path, capsys):
    args = base_args(tmp_path, n=2)
    assert eval_main(args, engine_factory=scripted_factory) == 0
    out = tmp_path / "run"
    results = out / "results.jsonl"
    good = results.read_text()
    results.write_text("{not json\n" + good)
    config_before = (out / "config.yaml").read_text()
    assert "results.jsonl:1: malformed JSON" in refused(args + ["--search.width", "5"], capsys)
    assert (out / "config.yaml").read_text() == config_before
    results.write_text(good)  # the user fixes the line: the width-4 records still bind the directory
    assert "search.width: 4 -> 5" in refused(args + ["--search.width", "5"], capsys)


@pytest.mark.parametrize("damage", ["search: [width: 4\n", None, "- just\n- a list\n", b"\xff\xfe"])
def test_an_unreadable_or_missing_config_yaml_is_an_error_not_a_skipped_check(tmp_path, capsys, damage):
    args = base_args(tmp_path, n=2)
    assert eval_main(args, engine_factory=scripted_factory) == 0
    config = tmp_path / "run" / "config.yaml"
    if damage is None:
        config.unlink()
    elif isinstance(damage, bytes):
        config.write_bytes(damage)
    else:
        config.write_text(damage)
    line = refused(args + ["--search.width", "5"], capsys)
    assert line.startswith(f"error: {config}") and "use another --out" in line


def test_resume_with_other_result_defining_settings_is_refused(tmp_path, capsys):
    args = base_args(tmp_path, n=2)
    assert eval_main(args, engine_factory=scripted_factory) == 0
    # concurrency and range may change on resume ...
    assert eval_main(args + ["--run.concurrency", "1"], engine_factory=scripted_factory) == 0
    # ... the search settings may not
    with pytest.raises(SystemExit) as exc:
        eval_main(args + ["--search.width", "5"], engine_factory=scripted_factory)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "config.yaml" in err and "search.width: 4 -> 5" in err


def _read_only_dir(tmp_path: Path) -> Path:
    """A directory no write into succeeds: chmod for a normal user; for root (whom permission
    bits do not stop) a read-only mount."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro
    for candidate in (Path("/sys/kernel"), Path("/proc/self")):
        try:
            (candidate / "equiv-probe").touch()
        except OSError:
            return candidate
    pytest.skip("no read-only directory to try as root")


@pytest.mark.parametrize("kind", ["file", "read-only", "under-a-file"])
@pytest.mark.parametrize("command", ["eval", "report"])
def test_an_out_that_cannot_be_written_is_one_line_naming_it(tmp_path, capsys, kind, command):
    from equiv.report.cli import report_main

    if kind == "file":
        out = tmp_path / "taken"
        out.write_text("x")
    elif kind == "read-only":
        out = _read_only_dir(tmp_path)
    else:
        (tmp_path / "taken").write_text("x")
        out = tmp_path / "taken" / "run"
    if command == "eval":
        args = base_args(tmp_path, n=1)
        args[args.index("--out") + 1] = str(out)
        with pytest.raises(SystemExit) as exc:
            eval_main(args, engine_factory=scripted_factory)
        code = exc.value.code
    else:
        assert eval_main(base_args(tmp_path, n=1), engine_factory=scripted_factory) == 0
        capsys.readouterr()
        code = report_main([str(tmp_path / "run"), "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: {out}: --out")


def test_ray_workers_get_the_drivers_absolute_paths(tmp_path, monkeypatch):
    """A worker on another node has its own working directory: relative model paths and the run
    directory are resolved on the driver (hub ids are left alone)."""
    import equiv.search.distributed as distributed
    from tests.helpers.judges import make_tiny_judge

    monkeypatch.chdir(tmp_path)
    make_tiny_judge(tmp_path / "runs" / "judge")
    captured = {}

    def fake_run_distributed(**kwargs):
        captured.update(kwargs)
        raise KeyboardInterrupt  # stop here: what matters is what the workers would be given

    monkeypatch.setattr(distributed, "run_distributed", fake_run_distributed)
    args = base_args(tmp_path, n=1)
    args[args.index("--out") + 1] = "run"
    args += ["--scale.workers", "2", "--pruner.strategy", "model", "--pruner.model", "runs/judge",
             "--policy.model", "Qwen/Qwen2.5-Math-7B-Instruct"]  # fmt: skip
    assert eval_main(args, engine_factory=scripted_factory) == 130
    init = captured["engine_factory"].args[1]
    assert init.pruner.model == str(tmp_path / "runs" / "judge")
    assert init.policy.model == "Qwen/Qwen2.5-Math-7B-Instruct"
    assert captured["out_dir"] == tmp_path / "run" and captured["out_dir"].is_absolute()
