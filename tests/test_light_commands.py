"""A command that does not need torch does not import it (issue 67: a cheap command line and suite).

Importing torch, Lightning (with torchmetrics) and transformers costs about 7-11 s of CPU on the
2-core CI machine; ``equiv report``, ``pairs --strategy formula``, ``siblings``, ... and every
command's ``--help`` but LightningCLI's need none of them, and the test suite starts dozens of such
processes. One real interpreter (the worker running this test has torch loaded already, so only a
fresh one can tell) asks every command for its help and names each after which a heavy module
appeared; LightningCLI's four are left out: their parser is built from the model's classes.
"""

from __future__ import annotations

import os
import subprocess
import sys

from equiv.commands import COMMANDS
from tests.helpers.paths import REPO_ROOT

HEAVY = ("torch", "lightning", "transformers", "torchmetrics")

PROBE = """
import contextlib, io, sys
from equiv.commands import main
heavy = {heavy!r}
for name in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main([name, "--help"])
        except SystemExit as exc:
            code = exc.code
    loaded = [m for m in heavy if m in sys.modules]
    print(name, code or 0, ",".join(loaded) or "-")
"""


def test_no_command_but_the_trainers_imports_torch_for_its_help() -> None:
    light = [name for name in COMMANDS if name not in ("fit", "validate", "test", "predict")]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *light], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert [row[0] for row in rows] == light, done.stdout
    assert [row for row in rows if row[1] != "0" or row[2] != "-"] == [], done.stdout
