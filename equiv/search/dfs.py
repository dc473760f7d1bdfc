"""Depth-first search guided by PRM values.

Children are visited best-first (highest PRM value, ties to the earliest), depth-first, until
``num_sequence`` complete solutions are found or the ``dfs_max_expansions`` budget is spent;
the answer is the found solution with the highest PRM value. Children valued below
``dfs_min_value`` are skipped. A sibling merged into its class representative is never
visited, so each equivalence class's subtree is explored once (docs/design.md §1).
"""

from __future__ import annotations

from equiv.search.expansion import SearchContext, best_by_value, expand
from equiv.search.tree import Node


def visit_order(children: list[Node], min_value: float) -> list[Node]:
    kept = [c for c in children if c.merged_into is None and (c.value is None or c.value >= min_value)]
    return sorted(kept, key=lambda n: (-(n.value if n.value is not None else float("-inf")), n.id))


async def dfs(ctx: SearchContext) -> Node:
    solutions: list[Node] = []
    deepest: list[Node] = [ctx.tree.root]
    settings = ctx.settings

    def done() -> bool:
        return len(solutions) >= settings.num_sequence or ctx.stats.expanded >= settings.dfs_max_expansions

    # An explicit stack (children pushed in reverse visit order) instead of recursion.
    stack: list[Node] = [ctx.tree.root]
    while stack and not done():
        node = stack.pop()
        if node.depth >= deepest[0].depth:
            deepest[0] = node
        if node.terminal:
            if node is not ctx.tree.root:
                solutions.append(node)
            continue
        families = await expand(ctx, [node])
        children = families[0] if families else []
        stack.extend(reversed(visit_order(children, settings.dfs_min_value)))
    ctx.solutions = solutions
    if solutions:
        return best_by_value(solutions)
    return deepest[0]
