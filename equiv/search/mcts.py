"""MCTS with PUCT, the paper's simulate-then-commit loop, and merged siblings.

For each step: run ``num_simulations`` simulations from the current node, then commit its
most-visited live child (ties: the earlier node, as the reference's argmax) and continue from there,
reusing the subtree, until a terminal step is committed.

One simulation descends from the current node by PUCT,

    score(child) = Q(child) + c_puct * P(child) * sqrt(N(parent)) / (1 + N(child)),

where Q is the mean backed-up value (the PRM value while unvisited) and P the prior (a softmax
over siblings of the mean token log-probability; a representative carries the summed priors of
its class). A simulation stops at the first node it reaches that has no children yet: a
terminal step is backed up with its PRM value; a non-terminal leaf is expanded *in the same
simulation* (its children generated, scored and merged) and its own PRM value (for a
representative, the max over its class) is backed up along the path. This is the order of the
EquivPruner reference's MCTS (``simple_mcts`` -> ``get_next_step`` -> ``_simulate_4simple_mcts``);
openr's older ``_simulate``, which values a new leaf first and expands it only when a later
simulation returns, is not what the paper ran and is not offered. Merged siblings are never
selected.
"""

from __future__ import annotations

import math

from equiv.search.expansion import SearchContext, expand
from equiv.search.tree import Node, Tree


def puct_score(child: Node, parent_visits: int, c_puct: float) -> float:
    return child.q() + c_puct * child.prior * math.sqrt(parent_visits) / (1 + child.visits)


def select_child(tree: Tree, node: Node, c_puct: float) -> Node:
    """The live child with the highest PUCT score, ties to the earliest."""
    children = tree.live_children(node)
    return max(children, key=lambda c: (puct_score(c, node.visits, c_puct), -c.id))


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
        node = select_child(tree, node, c)
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
