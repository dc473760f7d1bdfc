"""``pip install`` gives the two commands (``[project.scripts]``), and they are the design's entry
scripts: ``equiv-train`` runs what ``python trainer_cli.py`` runs, ``equiv-search`` what
``python search_cli.py`` runs (both mains live in :mod:`equiv.commands`)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def _scripts() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


def _target(spec: str):
    module, func = spec.split(":")
    return getattr(importlib.import_module(module), func)


def test_the_installed_commands_are_the_entry_scripts_mains() -> None:
    import search_cli
    import trainer_cli

    scripts = _scripts()
    assert _target(scripts["equiv-train"]) is trainer_cli.main
    assert _target(scripts["equiv-search"]) is search_cli.main
    from equiv import commands

    assert _target(scripts["equiv"]) is commands.main  # `equiv <command>`, the one command line (issue 67)


def _as_installed(name: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command as pip's console-script wrapper runs it: import the target, call it, exit with it."""
    module, func = _scripts()[name].split(":")
    code = f"import sys; from {module} import {func}; sys.argv[0] = {name!r}; sys.exit({func}())"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=120)


def test_equiv_search_runs_as_an_installed_command() -> None:
    done = _as_installed("equiv-search", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "commands:" in done.stdout and "pairs" in done.stdout
    done = _as_installed("equiv-search", "nonsense")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: unknown command 'nonsense'; choose from eval, compare, pairs, siblings, label, agreement, report, serve"]
