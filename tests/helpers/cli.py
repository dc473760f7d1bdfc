"""Calling the command-line entry points in this process.

A fresh interpreter pays the torch/transformers/Lightning imports again (seconds each on a small
CPU), so the CLI tests call ``main(argv)`` directly and read what it printed and returned, exactly
as a shell would see it: the exit status (``SystemExit`` from argparse or jsonargparse included),
stdout and stderr. One real subprocess per entry script stays, in the smoke tests.

The captured streams encode as a shell's do under a UTF-8 locale -- stdout strictly, stderr with
``backslashreplace`` (CPython's default for it) -- so text a real process could not print (a lone
surrogate) fails here too instead of passing through a ``StringIO``.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class Result:
    """What a shell sees of one command: the same fields as ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


def _stream(errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def invoke(main: Callable[[list[str]], int | None], argv: Sequence[object]) -> Result:
    """``main(argv)`` with stdout/stderr captured and ``SystemExit`` turned into the exit status."""
    out, err = _stream("strict"), _stream("backslashreplace")
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            if isinstance(exc.code, str):  # sys.exit("message"): printed to stderr, status 1
                print(exc.code, file=err)
                code = 1
            else:
                code = exc.code
    return Result(int(code or 0), _text(out), _text(err))


def trainer_cli(*argv: object) -> Result:
    """``python trainer_cli.py ARGV`` in this process."""
    from equiv.judge.cli import main

    return invoke(main, argv)


def search_cli(*argv: object) -> Result:
    """``python search_cli.py ARGV`` in this process (``ARGV[0]`` is the subcommand)."""
    from search_cli import main

    return invoke(main, argv)


def installed(name: str, *argv: object, cwd: object = None, timeout: float = 300,
              env: dict[str, str] | None = None) -> Result:
    """``NAME ARGV`` (``equiv-train``, ``equiv-search``) as a user types it: the console script
    ``pip install`` put beside this interpreter, in a real process, importing this checkout's
    ``equiv`` (``PYTHONPATH``). Where the script is missing (a checkout run without installing),
    pip's wrapper is copied: ``sys.argv[0]`` is the command's name, then its main runs."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.helpers.paths import REPO_ROOT

    script = Path(sys.executable).parent / name
    if script.is_file():
        command = [str(script)]
    else:
        import tomllib

        target = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"][name]
        module, func = target.split(":")
        command = [sys.executable, "-c", f"import sys; from {module} import {func}; sys.argv[0] = {name!r}; "
                   f"sys.exit({func}())"]
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **(env or {}))
    done = subprocess.run([*command, *(str(a) for a in argv)], capture_output=True, text=True,
                          cwd=str(cwd or REPO_ROOT), env=environment, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)
