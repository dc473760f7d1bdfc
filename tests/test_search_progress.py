"""The search's progress bar moves while a problem runs (issue 68, item 4).

Before, the bar counted finished problems only: a real policy's problem takes minutes on a CPU
and the bar sat at 0 % for 9 minutes. Now the problems in flight show their expansions and
generated tokens on the same bar. A real search through the installed ``equiv-search`` (the
tour's tiny policy and PRM, one problem), with tqdm's redraw interval at 0 (``TQDM_MININTERVAL``,
tqdm's own setting) so every step is drawn whatever the machine's speed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.cli import installed
from tests.helpers.paths import REPO_ROOT

RUNNING = re.compile(r"0/1 \[.*running (\d+) expansions, (\d+) tokens\]")


@pytest.mark.slow  # a whole search in a subprocess (CI's slow stage; the default suite stays fast)
def test_the_bar_shows_a_problems_work_before_it_finishes(tmp_path: Path) -> None:
    result = installed("equiv-search", "eval", "--config", REPO_ROOT / "configs" / "search" / "demo_cpu.yaml",
                       "--data.end", "1", "--search.width", "3", "--search.max_depth", "2",
                       "--pruner.strategy", "none", "--run.save_trees", "false", "--out", tmp_path / "run",
                       cwd=tmp_path, timeout=900, env={"TQDM_MININTERVAL": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    frames = [f.strip() for f in re.split(r"[\r\n]", result.stderr) if f.strip().startswith("search:")]
    running = [(int(m.group(1)), int(m.group(2))) for m in map(RUNNING.search, frames) if m]
    assert len(running) >= 2, frames  # drawn before the problem finished, more than once
    assert running == sorted(running) and running[0] != running[-1], running  # and moving
    assert running[-1][0] >= 1 and running[-1][1] > 0
    done = [f for f in frames if "1/1" in f]
    assert done and "running" not in done[-1], frames  # a finished problem leaves the in-flight figures
    assert frames.index(done[0]) > max(i for i, f in enumerate(frames) if RUNNING.search(f))
