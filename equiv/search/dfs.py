"""Depth-first search guided by PRM values.

Children are visited best-first (highest PRM value, ties to the earliest), depth-first, until
``num_sequence`` complete solutions are found or the ``dfs_max_expansions`` budget is spent;
the answer is the found solution with the highest PRM value. Children valued below
``dfs_min_value`` are skipped. A sibling merged into its class representative is never
visited, so each equivalence class's subtree is explored once (docs/design.md §1).

A finished representative counts toward ``num_sequence`` with its finished merged twins: they
are complete solutions already generated, and a search without pruning would count each of them.
Without this, pruning changed the stopping rule to "``num_sequence`` *distinct* solutions" and
made DFS search on, spending more tokens than unpruned (docs/experiments/
2026-12-01-dfs-stops-on-distinct-solutions.md). Only representatives enter ``ctx.solutions``
(the answer's aggregation): a twin's answer is its representative's.
"""

from __future__ import annotations

from equiv.search.expansion import SearchContext, best_by_value, expand
from equiv.search.tree import Node, Tree


def visit_order(children: list[Node], min_value: float) -> list[Node]:
    kept = [c for c in children if c.merged_into is None and (c.value is None or c.value >= min_value)]
    return sorted(kept, key=lambda n: (-(n.value if n.value is not None else float("-inf")), n.id))


def finished_twins(tree: Tree, node: Node) -> int:
    """How many finished siblings were merged into ``node``."""
    if node.parent is None:
        return 0
    return sum(1 for c in tree[node.parent].children if tree[c].merged_into == node.id and tree[c].terminal)


async def dfs(ctx: SearchContext) -> Node:
    solutions: list[Node] = []
    found = 0  # solutions counted toward num_sequence: representatives and their finished twins
    deepest: list[Node] = [ctx.tree.root]
    settings = ctx.settings

    def done() -> bool:
        return found >= settings.num_sequence or ctx.stats.expanded >= settings.dfs_max_expansions

    # An explicit stack (children pushed in reverse visit order) instead of recursion.
    stack: list[Node] = [ctx.tree.root]
    while stack and not done():
        node = stack.pop()
        if node.depth >= deepest[0].depth:
            deepest[0] = node
        if node.terminal:
            if node is not ctx.tree.root:
                solutions.append(node)
                found += 1 + finished_twins(ctx.tree, node)
            continue
        families = await expand(ctx, [node])
        children = families[0] if families else []
        stack.extend(reversed(visit_order(children, settings.dfs_min_value)))
    ctx.solutions = solutions
    if solutions:
        return best_by_value(solutions)
    return deepest[0]
