"""MCTS with PUCT, the paper's simulate-then-commit loop, and merged siblings.

For each step: run ``num_simulations`` simulations from the current node, then commit its
most-visited live child (ties: the earlier node, as the reference's argmax) and continue from there,
reusing the subtree, until a terminal step is committed.

One simulation descends from the current node by PUCT,

    score(child) = Q(child) + c(N) * P(child) * sqrt(N) / (1 + N(child)),
    c(N) = log((N + c_puct_base + 1) / c_puct_base) + c_puct,

N the parent's visits (the reference's ``_ucb_score``: pb_c_base 19652, pb_c_init 1.25;
``c_puct_base: null`` gives a flat ``c_puct``). Q is the mean backed-up value (the PRM value
while unvisited) and P the prior (a softmax over unique siblings of the mean token
log-probability; a representative carries the summed priors of its class). A simulation stops at the first node it reaches that has no children yet: a
terminal step is backed up with its PRM value; a non-terminal leaf is expanded *in the same
simulation* (its children generated, scored and merged) and its PRM value (a representative's
own, or its class's best with ``merge_value: class_max``) is backed up along the path. This is the order of the
EquivPruner reference's MCTS (``simple_mcts`` -> ``get_next_step`` -> ``_simulate_4simple_mcts``);
openr's older ``_simulate``, which values a new leaf first and expands it only when a later
simulation returns, is not what the paper ran and is not offered. Merged siblings are never
selected.
"""

from __future__ import annotations

import math

from equiv.search.expansion import SearchContext, expand
from equiv.search.tree import Node, Tree


def exploration_weight(parent_visits: int, c_puct: float, c_base: float | None = None) -> float:
    """The reference's ``pb_c``: ``log((N + c_base + 1) / c_base) + c_puct`` (grows slowly with
    the parent's visits N); a flat ``c_puct`` when ``c_base`` is None."""
    if c_base is None:
        return c_puct
    return math.log((parent_visits + c_base + 1) / c_base) + c_puct


def puct_score(child: Node, parent_visits: int, c_puct: float, c_base: float | None = None) -> float:
    weight = exploration_weight(parent_visits, c_puct, c_base)
    return child.q() + weight * child.prior * math.sqrt(parent_visits) / (1 + child.visits)


def select_child(tree: Tree, node: Node, c_puct: float, c_base: float | None = None) -> Node:
    """The live child with the highest PUCT score, ties to the earliest."""
    children = tree.live_children(node)
    return max(children, key=lambda c: (puct_score(c, node.visits, c_puct, c_base), -c.id))


def most_visited(tree: Tree, node: Node) -> Node:
    """The live child with the most visits; ties to the earliest (the reference's argmax)."""
    return max(tree.live_children(node), key=lambda c: (c.visits, -c.id))


def backup(path: list[Node], value: float) -> None:
    for node in path:
        node.visits += 1
        node.value_sum += value


async def simulate(ctx: SearchContext, start: Node) -> None:
    tree, c = ctx.tree, ctx.settings.c_puct
    node, path = start, [start]
    while not node.terminal:
        if not node.expanded:
            await expand(ctx, [node])
            if node is not start:
                break  # a newly reached leaf: expanded now, its own PRM value is backed up
        if not tree.live_children(node):
            break
        node = select_child(tree, node, c, ctx.settings.c_puct_base)
        path.append(node)
    backup(path, node.value if node.value is not None else 0.0)


async def mcts(ctx: SearchContext) -> Node:
    tree = ctx.tree
    current = tree.root
    while not current.terminal:
        if not current.expanded:
            await expand(ctx, [current])
        if not tree.live_children(current):
            break
        for _ in range(ctx.settings.num_simulations):
            await simulate(ctx, current)
        current = most_visited(tree, current)
    return current
