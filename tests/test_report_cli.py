"""`search_cli.py report` end to end (the real entry point, in process; one real process for the
exit status and the plotting backend), on run directories written by the real evaluation runner
(scripted engines) and on hand-written edge cases."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.report.load import load_runs
from equiv.search.algorithms import ALGORITHMS
from equiv.report.stats import compare_rows
from tests.helpers.cli import Result, search_cli
from tests.helpers.runs import NASTY, runner_runs, write_run

ALGOS = ALGORITHMS.names()


def report_in_a_process(repo_root: Path, *args: object) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", MPLBACKEND="")  # Agg must be chosen by the code, not the env
    return subprocess.run([sys.executable, str(repo_root / "search_cli.py"), "report", *map(str, args)],
                          capture_output=True, text=True, cwd=repo_root, env=env, timeout=120)


def report(*args: object) -> Result:
    return search_cli("report", *args)


def report_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """The same entry point in this process (the bad-input cases need no fresh interpreter)."""
    import search_cli

    rc = search_cli.main(["report", *map(str, args)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory) -> list[Path]:
    return runner_runs(tmp_path_factory.mktemp("runs"), ALGOS)


def test_report_on_runs_of_every_algorithm(repo_root: Path, real_runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    res = report(*real_runs, "--out", out)
    assert res.returncode == 0, res.stderr
    page = (out / "index.html").read_text()
    for name in ("tokens_per_problem", "pruning_rate_by_depth", "accuracy_vs_tokens"):
        png = (out / "plots" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000, name
        assert f'id="plot-{name}"><img' in page
    # Self-contained: no external resource of any kind.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page), "external resource in the page"
    assert "<link" not in page and "@import" not in page
    assert page.count("<summary>config.yaml</summary>") == len(real_runs), "eval's config.yaml is shown per run"
    # The summary table carries the compare numbers (first run = baseline).
    rows = compare_rows(load_runs(real_runs))
    for row in rows:
        assert f"<td>{row.name}</td>" in page
        assert f"{row.accuracy:,.2f}%" in page and f"{row.mean_tokens:,.0f}" in page
    assert f"{rows[1].token_ratio:,.2f}%" in page
    # Every algorithm's trees are embedded; the runner's pruned runs did merge something.
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1))
    assert [r["algo"] for r in data["runs"]] == [a for a in ALGOS for _ in (0, 1)]
    assert all(len(r["trees"]) == 4 for r in data["runs"])
    assert sum(t["merged"] for r in data["runs"] if r["pruner"] == "formula" for t in r["trees"].values()) > 0
    assert all(t["merged"] == 0 for r in data["runs"] if r["pruner"] == "none" for t in r["trees"].values())


def test_runs_without_trees_still_get_summary_and_plots(repo_root: Path, tmp_path: Path) -> None:
    runs = runner_runs(tmp_path / "runs", ("sbs",), trees=False)
    out = tmp_path / "report"
    res = report(*runs, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "skipped plot pruning_rate_by_depth" in res.stdout
    page = (out / "index.html").read_text()
    assert "No run has saved trees" in page and "--run.save_trees true" in page
    assert (out / "plots" / "tokens_per_problem.png").exists() and (out / "plots" / "accuracy_vs_tokens.png").exists()
    assert not (out / "plots" / "pruning_rate_by_depth.png").exists()


def test_step_text_is_escaped_and_tree_selection(repo_root: Path, tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", pruned=False)
    pruned = write_run(tmp_path / "pruned", pruned=True)
    out = tmp_path / "report"
    res = report(base, pruned, "--out", out, "--problems", "7", "--title", "<T&>")
    assert res.returncode == 0, res.stderr
    assert "embedded trees for 1 of 3 problem(s)" in res.stdout
    page = (out / "index.html").read_text()
    assert NASTY not in page and "<b>bold</b>" not in page and "<title>&lt;T&amp;&gt;</title>" in page
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    assert list(data["runs"][1]["trees"]) == ["7"] and data["runs"][1]["trees"]["7"]["nodes"][3][3] == NASTY
    assert "choose others with <code>--problems" in page


@pytest.mark.parametrize(("setup", "expected"), [
    ("missing", "not a run directory"),
    ("malformed", r"results\.jsonl:2: malformed JSON"),
    ("missing_field", r"results\.jsonl:1: field 'generated_tokens': missing"),
    ("bad_tree", r"trees[/\\]0\.json: field 'merged_into'"),
    ("unknown_option", "unrecognized arguments: --bogus"),
    ("no_runs", "the following arguments are required"),
    ("unknown_problem", "no saved tree for problem"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path: Path, setup: str, expected: str) -> None:
    run = write_run(tmp_path / "run", pruned=True)
    args: list = [run, "--out", tmp_path / "out"]
    if setup == "missing":
        args[0] = tmp_path / "nope"
    elif setup == "malformed":
        lines = (run / "results.jsonl").read_text().splitlines()
        (run / "results.jsonl").write_text(lines[0] + "\n{oops\n" + lines[2] + "\n")
    elif setup == "missing_field":
        rec = json.loads((run / "results.jsonl").read_text().splitlines()[0])
        del rec["generated_tokens"]
        (run / "results.jsonl").write_text(json.dumps(rec) + "\n")
    elif setup == "bad_tree":
        tree = json.loads((run / "trees" / "0.json").read_text())
        tree["nodes"][2]["merged_into"] = 99
        (run / "trees" / "0.json").write_text(json.dumps(tree))
    elif setup == "unknown_option":
        args.append("--bogus")
    elif setup == "no_runs":
        args = ["--out", tmp_path / "out"]
    elif setup == "unknown_problem":
        args += ["--problems", "nope"]
    rc, out, err = report_in_process(capsys, *args)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "out" / "index.html").exists()


def test_help(capsys) -> None:
    rc, out, _ = report_in_process(capsys, "--help")
    assert rc == 0 and "--max_trees" in out and "baseline" in out


def test_search_cli_in_a_real_process(repo_root: Path, tmp_path: Path) -> None:
    """The one real-process test of ``search_cli.py`` in the default suite (``report`` imports no
    torch, so it is cheap): the exit status on success and on bad input, and the plots written
    with no plotting backend set in the environment."""
    run = write_run(tmp_path / "run", pruned=True)
    res = report_in_a_process(repo_root, run, "--out", tmp_path / "report")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "report" / "plots" / "tokens_per_problem.png").read_bytes().startswith(b"\x89PNG")
    res = report_in_a_process(repo_root, tmp_path / "nope", "--out", tmp_path / "out")
    assert res.returncode == 2 and res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(1500)  # two searches of up to 600 s each
def test_report_on_the_cpu_demo(repo_root: Path, shared_data: Path, tmp_path: Path) -> None:
    """The README's commands: two `eval` runs of the CPU demo (tiny random-init policy and PRM,
    one GSM8K problem; the pruned run's judge is a tiny random-init one in place of the trained
    demo judge) and `report` on them, all in subprocesses."""
    from tests.helpers.judges import make_tiny_judge

    judge = make_tiny_judge(tmp_path / "judge")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    runs = []
    for name, extra in (("base", ["--pruner.strategy", "none"]), ("pruned", ["--pruner.model", str(judge)])):
        out = tmp_path / name
        cmd = [sys.executable, str(repo_root / "search_cli.py"), "eval", "--config", "configs/search/demo_cpu.yaml",
               "--algo", "mcts", "--data.path", str(shared_data / "gsm8k" / "test.jsonl"), "--data.end", "1",
               "--run.progress", "false", "--out", str(out), *extra]
        res = subprocess.run(cmd, cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        runs.append(out)
    res = report_in_a_process(repo_root, *runs, "--out", tmp_path / "report")
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    assert [len(r["trees"]) for r in data["runs"]] == [1, 1] and data["runs"][1]["pruner"] == "model"
    # the tour's random models are named in a banner; no correlation over one problem (issue 68)
    assert 'id="tour-banner"' in page and "a random-init policy (tiny:" in page
    assert "Correlations left out: 1 problem(s) are fewer than 10." in page
