"""One command line, ``equiv <command>`` (issue 67, item 3): every command and ``python -m`` tool
behind one door, the older doors (``trainer_cli.py``, ``search_cli.py``, ``equiv-train``,
``equiv-search``, ``python -m equiv.X``) into the same commands, short names the parser itself
declares (nothing rewrites the command line), ``--config`` and ``--data`` meaning one thing, and
options a backend never reads refused (the option audit).

Real processes where a user meets the command (``python -m equiv``, the ``equiv`` console script
as pip's wrapper runs it: :func:`tests.helpers.cli.installed`); the rest in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.commands import COMMANDS, SEARCH_COMMANDS, TRAINER_COMMANDS
from tests.helpers.cli import Result, installed, invoke
from tests.helpers.paths import REPO_ROOT

DEMO = REPO_ROOT / "equiv" / "data" / "demo_data"


def python_m_equiv(*argv: object, timeout: float = 300) -> Result:
    """``python -m equiv ARGV`` in a real process, importing this checkout's equiv."""
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "equiv", *(str(a) for a in argv)], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)


def equiv_here(*argv: object) -> Result:
    """``python -m equiv ARGV`` in this process (the same main)."""
    from equiv.commands import main

    return invoke(main, argv)


def _one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def test_equiv_lists_every_command_and_every_older_door_reaches_one_of_them() -> None:
    done = python_m_equiv("--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: python -m equiv COMMAND")
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")}
    assert listed == set(COMMANDS)
    assert set(SEARCH_COMMANDS) <= set(COMMANDS) and set(TRAINER_COMMANDS) <= set(COMMANDS)
    for tool in ("ensemble", "untuned", "crossval", "solution_pairs", "demo_data"):  # the python -m tools
        assert tool in listed


def test_the_equiv_console_script_runs_the_same_command_as_search_cli(tmp_path: Path, monkeypatch) -> None:
    """``equiv pairs`` (the console script, as pip's wrapper runs it) and ``search_cli.py pairs``
    print the same metrics, each in a real process; its usage line names the command typed (in
    this process, ``sys.argv[0]`` the script's path as pip's wrapper sets it: a third process
    proved no more)."""
    argv = ["pairs", "--data", DEMO / "valid.jsonl", "--strategy", "levenshtein", "--threshold", "0.8", "--json"]
    by_equiv = installed("equiv", *argv)
    assert by_equiv.returncode == 0, by_equiv.stderr[-2000:]
    by_script = subprocess.run([sys.executable, "search_cli.py", *map(str, argv)], capture_output=True, text=True,
                               cwd=REPO_ROOT, timeout=300)
    assert by_script.returncode == 0, by_script.stderr[-2000:]
    first, second = (json.loads(out.strip().splitlines()[-1]) for out in (by_equiv.stdout, by_script.stdout))
    first.pop("judge_stats"), second.pop("judge_stats")  # wall seconds
    assert first == second and first["threshold"] == 0.8
    from equiv.commands import main

    monkeypatch.setattr(sys, "argv", [str(Path(sys.executable).parent / "equiv"), "pairs", "--help"])
    usage = invoke(main, ["pairs", "--help"])
    assert usage.returncode == 0 and usage.stdout.startswith("usage: equiv pairs "), usage.stdout[:200]


def test_an_unknown_command_is_one_line_with_the_near_miss() -> None:
    line = _one_error_line(equiv_here("pair", "--data", "x"))
    assert line.startswith("error: unknown command 'pair'; choose from fit, ") and line.endswith("did you mean pairs?")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ("fit", "validate", "test", "predict")])
def test_every_command_has_its_help_under_equiv(command: str) -> None:
    """Each command's own jsonargparse parser, its usage naming ``python -m equiv COMMAND``."""
    done = equiv_here(command, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: python -m equiv {command} "), done.stdout[:200]


def test_the_trainer_is_lightningcli_under_equiv_and_a_near_miss_is_named() -> None:
    """``python -m equiv fit`` is LightningCLI: a misspelt trainer option is one line naming the
    right one and the command typed. (In this process: ``equiv-train``'s real process is
    tests/test_cli_spelling.py's, the same main.)"""
    line = _one_error_line(equiv_here("fit", "--config", REPO_ROOT / "configs" / "demo.yaml", "--trainer.max_epoch",
                                      "1", "--print_config"))
    assert "unrecognized arguments: --trainer.max_epoch 1" in line and "did you mean --trainer.max_epochs?" in line
    assert "(options: python -m equiv fit --help)" in line


def test_the_python_m_tools_are_the_same_commands(tmp_path: Path) -> None:
    """``python -m equiv.data.demo DIR`` (it read sys.argv) and ``equiv demo_data DIR`` write the
    shipped demo pairs; a bad option is one line."""
    done = subprocess.run([sys.executable, "-m", "equiv.data.demo", str(tmp_path / "a")], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert equiv_here("demo_data", tmp_path / "b").returncode == 0
    for folder in ("a", "b"):
        for name in ("train.jsonl", "valid.jsonl"):
            assert (tmp_path / folder / name).read_bytes() == (DEMO / name).read_bytes()
    assert _one_error_line(equiv_here("demo_data", "--frobnicate")) == "error: unrecognized arguments: --frobnicate"


# -- the short names: declared by the parser, the same in every command ------------------------------
def test_no_shim_rewrites_the_command_line() -> None:
    import equiv.cliargs as cliargs
    import equiv.prune.cli as pairs_cli
    import equiv.serve.cli as serve_cli

    for gone in ("spelled_out", "add_aliases"):
        assert not hasattr(cliargs, gone)
    for module, name in ((pairs_cli, "PRUNER_ALIASES"), (pairs_cli, "DATA_ALIAS"), (serve_cli, "SERVE_ALIASES")):
        assert not hasattr(module, name)


def test_a_short_name_is_the_same_setting_in_every_command_that_declares_it() -> None:
    from equiv.prune.cli import build_parser as pairs_parser
    from equiv.prune.options import SHORT_NAMES
    from equiv.serve.cli import build_parser as serve_parser

    parsers = {"pairs": pairs_parser(), "serve": serve_parser()}
    declared = 0
    for field, spellings in SHORT_NAMES.items():
        for name, parser in parsers.items():
            full = parser._option_string_actions.get(f"--pruner.{field}")
            for spelling in spellings:
                short = parser._option_string_actions.get(spelling)
                assert short is full, f"{name}: {spelling} is not --pruner.{field}"
                declared += full is not None
    assert declared > len(SHORT_NAMES)  # most in both commands


def test_data_means_the_data_file_in_eval_as_in_pairs() -> None:
    from equiv.prune.cli import build_parser as pairs_parser
    from equiv.search.cli import build_eval_parser

    for parser in (pairs_parser(), build_eval_parser()):
        short = parser.parse_args(["--data", "problems.jsonl"])
        full = parser.parse_args(["--data.path", "problems.jsonl"])
        assert short.data.path == full.data.path == "problems.jsonl"
    config = build_eval_parser().parse_args(["--config", "configs/search/demo_cpu.yaml", "--data", "x.jsonl"])
    assert config.data.path == "x.jsonl" and config.data.dataset  # the rest of the group from the config


# -- the option audit: a setting the backend never reads is refused ------------------------------------
@pytest.mark.parametrize(("option", "field"), [
    ("--policy.gpu_layers=20", "policy.gpu_layers"),  # llama.cpp's; demo_cpu.yaml runs transformers
    ("--policy.enforce_eager=true", "policy.enforce_eager"),  # vLLM's
])
def test_a_policy_setting_the_backend_never_reads_is_one_line(tmp_path: Path, option: str, field: str) -> None:
    done = equiv_here("eval", "--config", "configs/search/demo_cpu.yaml", "--algo", "mcts", option,
                      "--out", tmp_path / "run")
    line = _one_error_line(done)
    assert f"field '{field}'" in line and "the backend is 'transformers'" in line and "it would do nothing" in line
    assert not (tmp_path / "run").exists()


def test_llamacpp_in_process_settings_are_refused_beside_a_running_server() -> None:
    from equiv.errors import InputError
    from equiv.search.policies import PolicyConfig, check_backend_options

    check_backend_options(PolicyConfig(backend="llamacpp", model="x.gguf", threads=4, gpu_layers=10))
    with pytest.raises(InputError, match="policy.gpu_layers"):
        check_backend_options(PolicyConfig(backend="llamacpp", model="x.gguf", url="http://127.0.0.1:1",
                                           gpu_layers=10))
    with pytest.raises(InputError, match="policy.device"):
        check_backend_options(PolicyConfig(backend="llamacpp", model="x.gguf", device="cpu"))
