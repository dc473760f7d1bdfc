"""MCTS against an independent replay of the EquivPruner reference's simulate/expand order.

The replay below re-states, in a few plain lines and its own tiny tree, what the reference's MCTS
path does (``simple_mcts`` -> ``get_next_step`` -> ``_simulate_4simple_mcts`` in
``reason/guided_search/tree.py`` of Lolo1222/EquivPruner): descend by PUCT from the current node
while the node has children; a terminal node is backed up with its PRM value; a non-terminal leaf
is expanded *in the same simulation* (children generated and PRM-scored) and its own PRM value is
backed up; after ``num_simulations`` commit the most-visited child (first on ties) and expand it
if it is still a leaf. Exact duplicates are dropped and priors renormalised over unique steps
(the reference keyed children by text). Driven by the same scripted policy, PRM and per-request
seed stream, our :func:`equiv.search.mcts.mcts` must make exactly the same policy requests.
"""

from __future__ import annotations

import math

import pytest

from equiv.search.expansion import SeedStream
from equiv.search.mcts import mcts
from equiv.search.types import ScoreRequest, StepRequest
from tests.helpers.scripted import KeyedReward, SeededPolicy
from tests.helpers.search import Q, run_search


class _RefNode:
    def __init__(self, steps: tuple[str, ...], prior: float, value: float, terminal: bool) -> None:
        self.steps, self.prior, self.initial, self.terminal = steps, prior, value, terminal
        self.children: list[_RefNode] = []
        self.visits, self.value_sum = 0, 0.0

    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else self.initial


class _RefReplay:
    """The reference's MCTS order on scripted engines (PUCT with its log schedule, no noise)."""

    def __init__(self, policy, reward, *, width: int, sims: int, c: float, max_depth: int) -> None:
        self.policy, self.reward = policy, reward
        self.width, self.sims, self.c, self.max_depth = width, sims, c, max_depth
        self.seeds = SeedStream(0, "p")
        self.requests: list[tuple[str, ...]] = []

    def expand(self, node: _RefNode) -> None:
        self.requests.append(node.steps)
        (cands,) = self.policy.generate([StepRequest(Q, node.steps, n=self.width, seed=self.seeds.next(node.steps))])
        unique, seen = [], set()
        for cand in cands:
            key = " ".join(cand.text.split())
            if key not in seen:
                seen.add(key)
                unique.append(cand)
        weights = [math.exp(c.logprob / c.num_tokens) for c in unique]
        scores = self.reward.score([ScoreRequest(Q, node.steps + (c.text,)) for c in unique])
        depth = len(node.steps) + 1
        for cand, w, s in zip(unique, weights, scores):
            terminal = cand.finished or depth >= self.max_depth
            node.children.append(_RefNode(node.steps + (cand.text,), w / sum(weights), s[-1], terminal))

    def ucb(self, parent: _RefNode, child: _RefNode) -> float:
        pb_c = math.log((parent.visits + 19652 + 1) / 19652) + self.c  # the reference's _ucb_score
        return child.value() + pb_c * child.prior * math.sqrt(parent.visits) / (child.visits + 1)

    def simulate(self, node: _RefNode, path: list[_RefNode]) -> None:
        path = list(path)
        while node.children and not node.terminal:
            best, best_score = None, -float("inf")
            for child in node.children:
                score = self.ucb(node, child)
                if score > best_score:
                    best, best_score = child, score
            node = best
            path.append(node)
            if not node.terminal and not node.children:
                self.expand(node)
                break
        value = node.value()
        for n in path:
            n.visits += 1
            n.value_sum += value

    def run(self) -> tuple[str, ...]:
        root = _RefNode((), 1.0, 0.0, False)
        self.expand(root)
        node, path = root, [root]
        while True:
            for _ in range(self.sims):
                self.simulate(node, path)
            best = node.children[0]
            for child in node.children[1:]:
                if child.visits > best.visits:
                    best = child
            node = best
            path.append(node)
            if node.terminal:
                return node.steps
            if not node.children:
                self.expand(node)


@pytest.mark.parametrize("finish_depth", [4, 8, 12])
def test_mcts_matches_reference_simulate_expand_order(finish_depth):
    width, sims = 10, 20
    replay = _RefReplay(SeededPolicy(finish_depth=finish_depth), KeyedReward(), width=width, sims=sims, c=1.25,
                        max_depth=50)
    ref_path = replay.run()

    policy = SeededPolicy(finish_depth=finish_depth)
    final, ctx = run_search(mcts, policy, KeyedReward(), prune=False, width=width, num_simulations=sims)
    ours = [ctx.tree.steps(n) for n in _expanded_in_order(ctx)]
    assert ctx.stats.expanded == len(replay.requests)
    assert ours == replay.requests
    assert ctx.tree.steps(final) == ref_path


def _expanded_in_order(ctx):
    """Expanded nodes in expansion order (children ids grow with each expansion)."""
    expanded = [n for n in ctx.tree if n.expanded]
    return sorted(expanded, key=lambda n: min(ctx.tree[c].id for c in n.children) if n.children else 10**9)
