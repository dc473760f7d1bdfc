"""Options are spelled out in full, a near miss is named, a trained judge is never replaced
without a word, and the commands' help reads whole (issue 68, items 3 and 6).

Through the installed console scripts in real processes (:func:`tests.helpers.cli.installed`),
as a user types them: before, ``equiv-train fit ... --trainer.max_epoch 1`` was taken as
``max_epochs`` (argparse's prefix matching) and the fit overwrote ``outputs/demo/judge``. Each
``equiv-train`` process costs seconds of imports (torch, transformers, Lightning), so the default
suite starts one (``--help``) and runs the other ``equiv-train`` commands in this process under the
name the console script gives them (:func:`_equiv_train`); their real processes are in the slow stage.
The default suite's real ``equiv-train`` process asks for ``recipe --help``, which imports no torch
(:func:`test_the_installed_trainer_script_reaches_its_commands`); LightningCLI's own ``--help`` in a
real process (about 8 s of CPU for the imports alone) is the slow stage's.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import warnings
from pathlib import Path

import pytest

from tests.helpers.cli import Result, installed, invoke, trainer_cli
from tests.helpers.judges import make_tiny_judge, tiny_fit_argv
from tests.helpers.paths import REPO_ROOT

LIGHTNING_ARGS_WARNING = "not recommended to provide both args and command line arguments"


def _one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def _equiv_train(real_process: bool, monkeypatch: pytest.MonkeyPatch, *argv: object) -> Result:
    """``equiv-train ARGV`` as typed in the checkout: the installed script in a real process, or
    its ``main`` in this process with ``sys.argv`` the script's (its path names the command in usage
    lines and hints, :func:`equiv.cliargs.typed_prog`; Lightning warns when ``sys.argv`` holds
    arguments beside ``args``) -- the same parsing and refusals."""
    if real_process:
        return installed("equiv-train", *argv)
    from equiv.commands import train_main  # the script's main: it names the door (equiv.cliargs.entered_through)

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setattr(sys, "argv", [str(Path(sys.executable).parent / "equiv-train"), *map(str, argv)])
    return invoke(train_main, argv)


def _equiv_search(real_process: bool, monkeypatch: pytest.MonkeyPatch, *argv: object) -> Result:
    """``equiv-search ARGV`` as typed in the checkout: the installed script in a real process, or
    its ``main`` in this process under the script's name, as :func:`_equiv_train`."""
    if real_process:
        return installed("equiv-search", *argv)
    from equiv.commands import search_main

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setattr(sys, "argv", [str(Path(sys.executable).parent / "equiv-search"), *map(str, argv)])
    return invoke(search_main, argv)


IN_PROCESS_AND_SLOW_REAL = [False, pytest.param(True, marks=pytest.mark.slow)]


@pytest.mark.parametrize("real_process", IN_PROCESS_AND_SLOW_REAL)
def test_a_trainer_option_is_never_matched_by_its_prefix_and_a_near_miss_is_named(real_process: bool,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """(The real process is the slow stage's; the in-process case runs the same parser and message.)"""
    result = _equiv_train(real_process, monkeypatch, "fit", "--config", "configs/demo.yaml", "--trainer.max_epoch",
                          "1", "--print_config")
    line = _one_error_line(result)
    assert "unrecognized arguments: --trainer.max_epoch 1" in line
    assert "did you mean --trainer.max_epochs?" in line
    assert "equiv-train fit --help" in line  # the hint names the command typed


@pytest.mark.parametrize("real_process", IN_PROCESS_AND_SLOW_REAL)
def test_a_search_option_is_never_matched_by_its_prefix_and_a_near_miss_is_named(real_process: bool,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The first refusal is always a real ``equiv-search`` process; the other two run the same
    main in this process by default (their real processes are the slow stage's)."""
    line = _one_error_line(installed("equiv-search", "eval", "--config", "configs/search/demo_cpu.yaml",
                                     "--search.widht", "3", "--print_config"))
    assert "did you mean --search.width?" in line
    line = _one_error_line(_equiv_search(real_process, monkeypatch, "eval", "--config", "configs/search/demo_cpu.yaml",
                                         "--search.widt", "3", "--print_config"))  # was taken as --search.width
    assert "unrecognized arguments: --search.widt 3" in line and "did you mean --search.width?" in line
    line = _one_error_line(_equiv_search(real_process, monkeypatch, "pairs", "--data.pat", "x.jsonl"))  # a command_parser command
    assert "unrecognized arguments" in line and "did you mean --data.path?" in line


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("real_process", IN_PROCESS_AND_SLOW_REAL)
def test_fit_refuses_to_replace_a_judge_in_its_export_folder(tmp_path: Path, real_process: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused in one line before anything trains or is written (the default export folder,
    ``<trainer.default_root_dir>/judge``, as the tour's ``outputs/demo/judge``). (The real process
    is the slow stage's; the in-process case runs the same check before the same fit.)"""
    judge = make_tiny_judge(tmp_path / "run" / "judge")
    before = _digest(judge)
    result = _equiv_train(real_process, monkeypatch, "fit", "--config", "configs/demo.yaml", "--trainer.logger=false",
                          f"--trainer.default_root_dir={tmp_path / 'run'}")
    line = _one_error_line(result)
    assert f"{judge} holds a judge; pass --overwrite true to replace it, or --export_dir NEW" in line
    assert _digest(judge) == before
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["judge"]  # no checkpoint, no log


def test_fit_replaces_a_judge_when_told_to(tmp_path: Path, demo_val_small: Path) -> None:
    """``--overwrite true`` replaces it (in this process: the refusal's real process is the test above)."""
    model = make_tiny_judge(tmp_path / "model")
    train = tmp_path / "train.jsonl"
    shutil.copy(REPO_ROOT / "equiv" / "data" / "demo_data" / "train.jsonl", train)
    old = make_tiny_judge(tmp_path / "run" / "judge", seed=1)
    before = _digest(old)
    short = ("--trainer.limit_val_batches=2", f"--data.val={demo_val_small}", "--data.calibration_fraction=0",
             "--threshold_from_val=false")
    refused = trainer_cli(*tiny_fit_argv(model, train, tmp_path / "run", *short))
    assert refused.returncode == 2 and "holds a judge" in refused.stderr.strip().splitlines()[-1]
    assert _digest(old) == before
    done = trainer_cli(*tiny_fit_argv(model, train, tmp_path / "run", *short, "--overwrite=true"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert _digest(old) != before and (old / "equiv_metrics.json").is_file()


@pytest.mark.parametrize("real_process", IN_PROCESS_AND_SLOW_REAL)
def test_trainer_help_is_whole_and_warns_of_nothing(real_process: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """No LightningCLI "args parameter ... not recommended" warning (on every call, ``--help``
    included), the subcommands described in whole sentences, the usage naming the command typed.
    (The real process is the slow stage's; in this process every warning is recorded, with
    ``sys.argv`` the script's, which is what Lightning's warning reads.)"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _equiv_train(real_process, monkeypatch, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [w for w in caught if LIGHTNING_ARGS_WARNING in str(w.message)], [str(w.message) for w in caught]
    assert LIGHTNING_ARGS_WARNING not in result.stderr and "Warning" not in result.stderr
    assert result.stdout.startswith("usage: equiv-train ")
    from equiv.judge.cli import SUBCOMMAND_HELP

    text = " ".join(result.stdout.split())
    for name, line in SUBCOMMAND_HELP.items():
        assert f"{name} {line}" in text
    assert "It's separated from fit to make sure you never run on your" not in text
    assert "Lightning Trainer command line tool" not in text
    assert "'recipe gsm8k' builds the recommended judge" in text  # not a Lightning subcommand, still listed


def test_the_installed_trainer_script_reaches_its_commands() -> None:
    """``equiv-train``'s real process in the default suite: pip's script starts, hands a command
    its words, and the usage names the command typed, with nothing on stderr (``recipe``'s help
    imports no torch; LightningCLI's help in a real process is the slow stage's, above)."""
    result = installed("equiv-train", "recipe", "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: equiv-train recipe "), result.stdout[:200]
    assert result.stderr == ""


@pytest.mark.parametrize(("command", "prog", "real_process"), [
    ("equiv-search", "equiv-search", True),  # the script's own help: a real process, no heavy import
    ("equiv-search pairs", "equiv-search pairs", False), ("equiv-search eval", "equiv-search eval", False),
    # the commands' help in real processes: the slow stage's (the default suite runs the same main
    # under the script's name, which is all the usage line reads: equiv.cliargs.typed_prog)
    pytest.param("equiv-search pairs", "equiv-search pairs", True, marks=pytest.mark.slow),
    pytest.param("equiv-search eval", "equiv-search eval", True, marks=pytest.mark.slow),
])
def test_search_usage_names_the_command_typed(command: str, prog: str, real_process: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    name, *sub = command.split()
    result = _equiv_search(real_process, monkeypatch, *sub, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.match(rf"usage: {re.escape(prog)} ", result.stdout), result.stdout[:200]
    assert "search_cli.py" not in result.stdout.splitlines()[0]


def test_the_entry_script_keeps_its_own_name() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "search_cli.py", "--help"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: search_cli.py COMMAND")
