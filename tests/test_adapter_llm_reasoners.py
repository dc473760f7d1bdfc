"""The llm-reasoners adapter against the installed package (1.0.2): its real MCTS over a scripted
world model whose candidate actions hold known duplicates (the same step up to formatting) steps
into fewer states when the candidates are merged by an equiv judge -- local, or served.

Markers ``reasoners`` (the [reasoners] extra) and, for the served judge, ``serve``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("reasoners")

from reasoners import SearchConfig, WorldModel  # noqa: E402
from reasoners.algorithm import MCTS  # noqa: E402

from equiv.adapters.llm_reasoners import MergingSearchConfig, load_equiv_judge  # noqa: E402
from tests.helpers.judges import make_tiny_judge  # noqa: E402

pytestmark = [pytest.mark.reasoners, pytest.mark.timeout(900)]

QUESTION = "Tom has 12 marbles and gives away 5. How many are left?"
# each state's candidates: two distinct steps, each twice more in another formatting
CANDIDATES = [
    ["12 - 5 = 7 marbles.", "12-5 = 7 marbles", "12 - 5 = 7 Marbles", "He gives away five of them.",
     "He gives away five of them", "he gives away five of them."],
]


class ScriptedWorld(WorldModel):
    """States are the action sequences so far; counts every step the algorithm takes."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.steps = 0

    def init_state(self) -> tuple:
        return ()

    def step(self, state: tuple, action: str) -> tuple[tuple, dict]:
        self.steps += 1
        return state + (action,), {}

    def is_terminal(self, state: tuple) -> bool:
        return len(state) >= self.depth


class ScriptedConfig(SearchConfig):
    def get_actions(self, state: tuple) -> list[str]:
        return list(CANDIDATES[0])

    def fast_reward(self, state: tuple, action: str) -> tuple[float, dict]:
        return 0.5, {}

    def reward(self, state: tuple, action: str, **kwargs) -> tuple[float, dict]:
        return 0.5, {}


def run_mcts(config: SearchConfig) -> ScriptedWorld:
    world = ScriptedWorld(depth=2)
    world.update_example(QUESTION)
    config.update_example(QUESTION)
    MCTS(n_iters=60, depth_limit=2, disable_tqdm=True)(world, config)
    return world


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory) -> Path:
    return make_tiny_judge(tmp_path_factory.mktemp("judge") / "judge")


def check_fewer_expansions(judge) -> None:
    plain = run_mcts(ScriptedConfig())
    merging = MergingSearchConfig(ScriptedConfig(), judge)
    merged = run_mcts(merging)
    # 6 candidates in 2 classes: with merging only 2 + 4 states exist to step into; without it
    # the same 60 iterations step into more (every candidate at depth 1, then some below)
    assert merged.steps <= 2 + 4 < plain.steps
    assert merging.asked >= 1 and merging.merged == 4 * merging.asked


def test_mcts_steps_into_fewer_states_with_a_local_judge(judge_dir):
    check_fewer_expansions(load_equiv_judge(model=str(judge_dir), device="cpu"))


@pytest.mark.serve
def test_mcts_steps_into_fewer_states_with_a_served_judge(judge_dir):
    pytest.importorskip("litserve")
    from tests.helpers.serve import running_server

    with running_server(judge_dir) as url:
        judge = load_equiv_judge(url=url)
        check_fewer_expansions(judge)
        assert judge.stats.pairs > 0 and judge.fingerprint.startswith("sha256:")


def test_the_judge_source_is_one_of_model_or_url():
    with pytest.raises(ValueError, match="exactly one"):
        load_equiv_judge()
