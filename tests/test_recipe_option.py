"""``ensemble`` and ``crossval`` take the trainer recipe as ``--recipe FILE``; their ``--config`` is
a YAML of their own options, as in every command (issue 67 item 3, docs/cli.md).

Both commands run through ``equiv <command>``: in this process by default (the dispatcher's own
``main``, the code a shell reaches) and in a real ``python -m equiv`` process in the slow suite,
as the other commands' real-process runs are (a fresh interpreter pays the torch imports). The old
spelling, a recipe given to ``--config``, is refused in one line that names the fix -- in a real
process in the default suite, where a user with an old command line meets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from equiv.commands import main as equiv_main
from tests.helpers.cli import invoke
from tests.helpers.judges import SETTINGS, make_tiny_judge
from tests.helpers.paths import REPO_ROOT
from tests.test_judge_cli import separable_pairs, write_jsonl

NO_PREFILTER = dict(SETTINGS, prefilter_threshold=0.0)
REAL_PROCESS = pytest.param("python -m equiv", marks=pytest.mark.slow)


def _equiv(how: str, *argv: object, cwd: Path = REPO_ROOT):
    """``equiv ARGV`` from ``cwd``: in this process, or as a real ``python -m equiv`` process."""
    if how == "in_process":
        old = Path.cwd()
        os.chdir(cwd)
        try:
            return invoke(equiv_main, argv)
        finally:
            os.chdir(old)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "equiv", *map(str, argv)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def _recipe(tmp_path: Path, pairs: int = 40) -> Path:
    """A trainer recipe (``fit --config`` YAML: model, data, trainer groups) with a calibration split."""
    rows = [dict(row, id=f"toy-{i // 2}-{i % 2}") for i, row in enumerate(separable_pairs(pairs, seed=6))]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"seed_everything": 1, "trainer": {"max_epochs": 1},
                                      "model": {"max_length": 64},
                                      "data": {"train": str(train), "calibration_fraction": 0.3, "batch_size": 4}}))
    return recipe


def _one_error_line(done, *names: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and all(name in lines[0] for name in names), lines[0]
    return lines[0]


@pytest.mark.parametrize("how", ["in_process", REAL_PROCESS])
def test_ensemble_takes_the_recipe_as_recipe_and_its_own_options_from_config(tmp_path: Path, how: str):
    recipe = _recipe(tmp_path)
    plain = make_tiny_judge(tmp_path / "plain", settings=NO_PREFILTER, seed=0)
    marked = make_tiny_judge(tmp_path / "marked", settings=NO_PREFILTER, seed=1)
    done = _equiv(how, "ensemble", "--recipe", recipe, "--members", plain, marked, "--out", tmp_path / "flags")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ensemble of 2 judges" in done.stdout
    # the same options from a --config file of ensemble's own options, the recipe one of them
    own = tmp_path / "ensemble.yaml"
    own.write_text(yaml.safe_dump({"recipe": str(recipe), "members": [str(plain), str(marked)],
                                   "out": str(tmp_path / "from_config")}))
    done = _equiv(how, "ensemble", "--config", own)
    assert done.returncode == 0, done.stderr[-2000:]
    flags, from_config = (json.loads((tmp_path / d / "config.json").read_text())["equiv"] for d in ("flags", "from_config"))
    assert flags["policy"] == from_config["policy"] and len(from_config["members"]) == 1


def _two_fold_members(tmp_path: Path, recipe: Path) -> list[Path]:
    """Two finished cross-validations of ``recipe`` (2 folds), each fold's judge a tiny export:
    what ``crossval --members`` averages, with no fit to wait for."""
    from equiv.prune.crossval import assign_folds, recipe_records, write_fold_files

    records, _ = recipe_records(recipe)
    folds = assign_folds(records, 2)
    members = []
    for seed in (0, 1):
        member = tmp_path / f"cv_seed{seed}"
        for k in (0, 1):
            write_fold_files(records, folds, k, member)
            make_tiny_judge(member / f"fold{k}" / "judge", settings=NO_PREFILTER, seed=seed + 2 * k)
        members.append(member)
    return members


@pytest.mark.parametrize("how", ["in_process", REAL_PROCESS])
def test_crossval_takes_the_recipe_as_recipe_and_its_own_options_from_config(tmp_path: Path, how: str):
    """One run (each fold's ensemble scored: seconds) with both: the recipe as ``--recipe`` on the
    command line, and ``folds`` and ``out`` from a ``--config`` file of crossval's own options."""
    recipe = _recipe(tmp_path, pairs=60)
    members = _two_fold_members(tmp_path, recipe)
    own = tmp_path / "crossval.yaml"
    own.write_text(yaml.safe_dump({"folds": 2, "out": str(tmp_path / "cv")}))
    done = _equiv(how, "crossval", "--config", own, "--recipe", recipe, "--members", *members)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ensemble of 2 judges calibrated on" in done.stdout and "out-of-fold scores of" in done.stdout
    plan = json.loads((tmp_path / "cv" / "folds.json").read_text())
    assert plan["config"] == str(recipe.resolve())  # the plan's key from before --recipe: old runs still resume
    assert plan["folds"] == 2 and {json.loads(line)["fold"] for line in (tmp_path / "cv" / "oof.jsonl").open()} == {0, 1}


@pytest.mark.parametrize("command, extra, how", [
    ("crossval", ["--folds", "5"], "python -m equiv"),
    ("ensemble", ["--members", "outputs/gsm8k_equiv/judge", "outputs/gsm8k_equiv_seed1/judge"], "in_process"),
    pytest.param("ensemble", ["--members", "outputs/gsm8k_equiv/judge", "outputs/gsm8k_equiv_seed1/judge"],
                 "python -m equiv", marks=pytest.mark.slow),
])
def test_a_recipe_given_to_config_is_refused_with_the_fix(tmp_path: Path, command: str, extra: list[str], how: str):
    """The old command line (docs before issue 67: ``crossval --config configs/gsm8k_equiv.yaml``):
    one line naming --recipe, exit 2, nothing written -- never read as options. Crossval's in a
    real process in the default suite; ensemble's real process in the slow suite (imports)."""
    out = tmp_path / "out"
    done = _equiv(how, command, "--config", "configs/gsm8k_equiv.yaml", *extra, "--out", out)
    line = _one_error_line(done, "configs/gsm8k_equiv.yaml", "is a trainer recipe",
                           "give it as --recipe configs/gsm8k_equiv.yaml")
    assert "model:" in line and "trainer:" in line
    assert not out.exists()


@pytest.mark.parametrize("command", ["ensemble", "crossval"])
@pytest.mark.parametrize("recipe_text", [
    "data:\n  train: train.jsonl\n  calibration_fraction: 0.3\n",  # a recipe of one group only
    "seed_everything: 1\ntrainer:\n  max_epochs: 2\n",  # an overlay (configs/gsm8k_equiv_seed1.yaml)
])
def test_any_recipe_shape_given_to_config_is_refused_in_process(tmp_path: Path, command: str, recipe_text: str):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text)
    done = _equiv("in_process", command, f"--config={recipe}", "--members", "a", "b", "--out", tmp_path / "out")
    _one_error_line(done, str(recipe), f"give it as --recipe {recipe}")
    assert not (tmp_path / "out").exists()


def test_a_file_of_the_commands_own_options_is_not_taken_for_a_recipe(tmp_path: Path):
    """crossval's own ``data`` option (more labelled files) and ensemble's ``threshold_from_val``
    are options of the command, not signs of a recipe: such a file is read as options."""
    own = tmp_path / "crossval.yaml"
    own.write_text(yaml.safe_dump({"data": ["siblings.jsonl"], "folds": 3, "out": "cv"}))
    from equiv.prune.crossval import parse

    args = parse(["--config", str(own), "--recipe", "r.yaml", "--data", "more.jsonl"])
    assert args.data == ["siblings.jsonl", "more.jsonl"] and args.folds == 3 and args.recipe == Path("r.yaml")
    own.write_text(yaml.safe_dump({"threshold_from_val": False, "members": ["a", "b"], "out": "e", "recipe": "r.yaml"}))
    from equiv.cliargs import parse_or_refuse
    from equiv.judge.ensemble import build_parser

    args = parse_or_refuse(build_parser(), ["--config", str(own)])
    assert args.threshold_from_val is False and args.recipe == "r.yaml"


def test_without_a_recipe_the_commands_say_it_is_required(tmp_path: Path):
    for command in ("ensemble", "crossval"):
        done = _equiv("in_process", command, "--members", "a", "b", "--out", tmp_path / "out")
        _one_error_line(done, "recipe")
