"""MCTS with PUCT, the paper's simulate-then-commit loop, and merged siblings.

For each step: run ``num_simulations`` simulations from the current node, then commit its
most-visited live child (ties: higher mean value, then earlier node) and continue from there,
reusing the subtree, until a terminal step is committed.

One simulation descends from the current node by PUCT,

    score(child) = Q(child) + c_puct * P(child) * sqrt(N(parent)) / (1 + N(child)),

where Q is the mean backed-up value (the PRM value while unvisited) and P the prior (a softmax
over siblings of the mean token log-probability; a representative carries the summed priors of
its class). Expansion is lazy, as in the reference: a leaf reached for the first time is
valued by its PRM value and expanded only when a later simulation reaches it again. The leaf's
PRM value (for a representative, the max over its class) is backed up along the path.
Merged siblings are never selected.
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
    return max(tree.live_children(node), key=lambda c: (c.visits, c.q(), -c.id))


def backup(path: list[Node], value: float) -> None:
    for node in path:
        node.visits += 1
        node.value_sum += value


async def simulate(ctx: SearchContext, start: Node) -> None:
    tree, c = ctx.tree, ctx.settings.c_puct
    node, path = start, [start]
    while not node.terminal:
        if not node.expanded:
            if node is not start and node.visits == 0:
                break  # first visit: value it by its PRM score, expand on a later visit
            await expand(ctx, [node])
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
