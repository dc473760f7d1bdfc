"""What a user meets first: quiet entry scripts (``--verbose`` for the rest), help without markup
and with the choices listed, and no run directory left by a run that failed before it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.helptext import plain
from equiv.quiet import take_verbose
from equiv.search.cli import eval_main
from tests.helpers.cli import search_cli
from tests.helpers.judges import make_tiny_judge
from tests.helpers.runs import base_args
from tests.helpers.scripted import scripted_factory

REPO = Path(__file__).resolve().parents[1]
NOISE = ("Loading weights", "LOAD REPORT", "litlogger", "GPU available", "is deprecated", "FutureWarning")


def test_plain_turns_sphinx_markup_into_words():
    assert plain("a name in :data:`STRATEGIES`; ``none`` turns it off") == "a name in STRATEGIES; none turns it off"
    assert plain("(:mod:`equiv.text.guard`, :func:`~equiv.judge.decide.below_floor`)") == \
        "(equiv.text.guard, below_floor)"
    assert plain("no markup here") == "no markup here"


def test_take_verbose_finds_the_flag_anywhere():
    assert take_verbose(["pairs", "--verbose", "--data.path", "x"]) == (["pairs", "--data.path", "x"], True)
    assert take_verbose(["--data.path", "x"]) == (["--data.path", "x"], False)


def test_eval_help_is_plain_and_lists_the_choices():
    res = search_cli("eval", "--help")
    assert res.returncode == 0
    assert not [m for m in (":data:`", ":mod:`", ":func:`", ":class:`", "``") if m in res.stdout], res.stdout
    for usage in ("--search.prune_stage {after_prm,before_prm}", "--policy.backend {vllm,llamacpp,transformers}",
                  "--reward.kind {math_shepherd,likelihood,qwen25_math_prm}", "--algo {mcts,sbs,dfs,lookahead}"):
        assert usage in res.stdout
    assert "--pruner.strategy {none,levenshtein,embedding,formula,model,remote}" in res.stdout


def test_top_level_usage_names_verbose():
    res = search_cli("--help")
    assert res.returncode == 0 and "--verbose" in res.stdout


def failing_factory(init):
    """Engines that cannot be built (a model that does not load): fails after the run directory
    was created and bound, as a missing or broken model does."""
    raise InputError("cannot load this model", path=init.policy.model, field="policy.model")


def test_a_run_that_fails_before_it_starts_leaves_no_run_directory(tmp_path, capsys):
    """The directory this command created is removed, so the next run does not inherit its settings."""
    with pytest.raises(SystemExit) as exc:
        eval_main(base_args(tmp_path), engine_factory=failing_factory)
    assert exc.value.code == 2 and "cannot load this model" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    assert eval_main(base_args(tmp_path), engine_factory=scripted_factory) == 0  # the next run starts clean


def test_a_failed_start_keeps_a_directory_that_was_there_before(tmp_path, capsys):
    """An existing run directory (here: a finished run) is never removed by a failing rerun."""
    assert eval_main(base_args(tmp_path), engine_factory=scripted_factory) == 0
    records = (tmp_path / "run" / "results.jsonl").read_text()
    with pytest.raises(SystemExit):
        eval_main(base_args(tmp_path), engine_factory=failing_factory)
    capsys.readouterr()
    assert (tmp_path / "run" / "results.jsonl").read_text() == records


def _pairs_in_a_process(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    judge = make_tiny_judge(tmp_path / "judge")
    cmd = [sys.executable, str(REPO / "search_cli.py"), "pairs", "--data.path",
           str(REPO / "equiv" / "data" / "demo_data" / "valid.jsonl"), "--pruner.strategy", "model",
           "--pruner.model", str(judge), *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    return subprocess.run(cmd, cwd=tmp_path, env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow  # a real process: torch and transformers imported afresh (5 s of CPU on 2 cores); the default
# suite loads a judge in process without a bar (test_library_quiet) and CI's slow stage runs this one
def test_the_entry_script_is_quiet_by_default(tmp_path):
    """A real process loading a local judge: no load report, progress bar or library warning."""
    quiet = _pairs_in_a_process(tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert not [n for n in NOISE if n in quiet.stdout + quiet.stderr], quiet.stderr[-3000:]
    assert any(line.startswith("f1 ") for line in quiet.stdout.splitlines()), quiet.stdout


@pytest.mark.slow  # a second real process (torch and transformers imported again): seconds the default suite saves
def test_the_entry_script_is_verbose_on_request(tmp_path):
    """``--verbose`` brings the libraries' own output back (the tiny judge's fresh head is reported),
    and decides the same."""
    quiet = _pairs_in_a_process(tmp_path, "--json")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    loud = _pairs_in_a_process(tmp_path / "loud", "--verbose", "--json")
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert json.loads(quiet.stdout.splitlines()[-1])["f1"] == json.loads(loud.stdout.splitlines()[-1])["f1"]
    assert "Loading weights" in loud.stderr or "LOAD REPORT" in loud.stderr, loud.stderr[-3000:]
