"""The library prints nothing of its own libraries' on a caller's output (issue 68, item 6).

README's Python snippet (``build_judge`` then ``group_siblings``) runs in the caller's process,
which never calls :func:`equiv.quiet.configure`; before, transformers' "Loading weights" bar of the
judge's load leaked into its output. A real process, the README's code with a judge exported
like ``fit``'s (a tiny random one, so it costs a second)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.judges import make_tiny_judge
from tests.helpers.paths import REPO_ROOT

SNIPPET = """
from equiv.prune import PrunerConfig, build_judge, group_siblings

judge = build_judge(PrunerConfig(strategy="model", model="outputs/demo/judge"))
steps = ["Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "She sells 16-3-4=<<16-3-4=9>>9 eggs a day.",
         "She makes 9 * 2 = $<<9*2=18>>18."]
g = group_siblings(steps, judge)
print(g.classes, g.representatives)
"""


@pytest.mark.slow  # a real process (about 10 s of CPU, mostly imports); the default suite runs the same load
# in process: test_loading_a_judge_in_this_process_draws_no_bar
def test_loading_a_judge_draws_no_bar_in_the_callers_output(tmp_path: Path) -> None:
    make_tiny_judge(tmp_path / "outputs" / "demo" / "judge")
    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    done = subprocess.run([sys.executable, "-c", SNIPPET], cwd=tmp_path, env=dict(env, PYTHONPATH=str(REPO_ROOT)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Loading weights" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert len(done.stdout.strip().splitlines()) == 1  # the snippet's one line


def test_the_bar_setting_is_put_back_after_a_load(tmp_path: Path) -> None:
    """Hidden for the judge's load only: a caller's own transformers bars stay as they were."""
    from transformers.utils import logging as hf_logging

    from equiv.judge.export import load_judge

    judge = make_tiny_judge(tmp_path / "judge")
    shown = hf_logging.is_progress_bar_enabled()
    try:
        hf_logging.enable_progress_bar()
        load_judge(judge)
        assert hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if shown else hf_logging.disable_progress_bar)()


STEPS = ["Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "She sells 16-3-4=<<16-3-4=9>>9 eggs a day.",
         "She makes 9 * 2 = $<<9*2=18>>18."]


def test_loading_a_judge_in_this_process_draws_no_bar(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The README snippet's path in this process, transformers' bars switched on first as a fresh
    caller's are (an earlier test of this worker may have switched them off): the judge's load
    draws none on either stream. The real process above is the slow stage's."""
    from transformers.utils import logging as hf_logging

    import equiv.quiet
    from equiv.prune import PrunerConfig, build_judge, group_siblings

    monkeypatch.setattr(equiv.quiet, "_verbose", False)  # as in a caller that never ran configure()
    judge_dir = make_tiny_judge(tmp_path / "judge")
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        capfd.readouterr()
        grouping = group_siblings(STEPS, build_judge(PrunerConfig(strategy="model", model=str(judge_dir))))
        printed = capfd.readouterr()
    finally:
        (hf_logging.enable_progress_bar if shown else hf_logging.disable_progress_bar)()
    assert "Loading weights" not in printed.out + printed.err, printed.err[-3000:]
    assert sorted(i for group in grouping.classes for i in group) == [0, 1, 2]
