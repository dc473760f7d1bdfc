"""The report's warning banner for runs made with the tour's models.

Why: the README's tour searches with a tiny random-init policy and PRM (``tiny:`` models of
``configs/search/demo_cpu.yaml``) and prunes with the demo judge (``outputs/demo/judge``, trained
on synthetic pairs). Its report looked like any other -- trees of "Yucc witak" steps, an "(empty
step)" merged at 0.569, accuracy 0 -- and nothing said that none of it is a result. Each run's
``config.yaml`` names its models, so the page can say so at the top.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Sequence

from equiv.report.load import Run

TINY_PREFIX = "tiny:"
"""How a run names the random-init models of equiv.search.tiny (``tiny:runs/tiny/policy``)."""

DEMO_JUDGE = PurePath("outputs", "demo", "judge")
"""Where ``trainer_cli.py fit --config configs/demo.yaml`` exports the tour's demo judge."""


def _model(config: dict[str, Any] | None, section: str) -> str:
    block = (config or {}).get(section)
    value = block.get("model") if isinstance(block, dict) else None
    return value if isinstance(value, str) else ""


def _strategy(config: dict[str, Any] | None) -> str:
    block = (config or {}).get("pruner")
    value = block.get("strategy") if isinstance(block, dict) else None
    return value if isinstance(value, str) else ""


def tour_models(run: Run) -> list[str]:
    """What in ``run`` is the tour's: "a random-init policy (tiny:...)", "the demo judge (...)"."""
    found = []
    policy, reward, judge = _model(run.config, "policy"), _model(run.config, "reward"), _model(run.config, "pruner")
    if policy.startswith(TINY_PREFIX):
        found.append(f"a random-init policy ({policy})")
    if reward.startswith(TINY_PREFIX):
        found.append(f"a random-init PRM ({reward})")
    if _strategy(run.config) in ("model", "") and judge:
        parts = PurePath(judge).parts
        if judge.startswith(TINY_PREFIX):
            found.append(f"a random-init judge ({judge})")
        elif len(parts) >= 3 and PurePath(*parts[-3:]) == DEMO_JUDGE:
            found.append(f"the demo judge ({judge}, trained on synthetic pairs)")
    return found


def tour_banner(runs: Sequence[Run]) -> str:
    """One plain sentence per run that used the tour's models; "" when none did."""
    lines = [f"{run.name}: {', '.join(found)}" for run in runs if (found := tour_models(run))]
    if not lines:
        return ""
    return ("These runs use the tour's models, which are random or toys -- " + "; ".join(lines)
            + ". Their step text is noise and their accuracy about 0: this page shows the machinery "
            "(tables, plots, trees, merges), not a result. For a real result with a policy that solves "
            "problems and the recommended judge, see the README, \"A real result on your CPU\".")
