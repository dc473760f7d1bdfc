"""Step-level beam search (SBS) with pruning before the top-k selection.

Each round expands every beam in one batched policy call (``width`` candidates each). Siblings
are grouped into equivalence classes *before* the top-k, so the beam holds distinct candidates
instead of several copies of the same step (docs/design.md §1). The pool of surviving
representatives across all beams is ranked by PRM value and the best ``beam_size - finished``
are kept; a selected terminal candidate is a finished solution and shrinks the beam, as in the
reference. The answer is the finished solution with the highest PRM value.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from equiv.search.expansion import SearchContext, best_by_value, expand
from equiv.search.tree import Node


def top_k(pool: list[Node], k: int) -> list[Node]:
    """The ``k`` highest-valued nodes, ties to the earliest (deterministic)."""
    ranked = sorted(pool, key=lambda n: (-(n.value if n.value is not None else float("-inf")), n.id))
    return ranked[: max(k, 0)]


Chooser = Callable[[SearchContext, list[Node], int], Awaitable[list[Node]]]


async def beam_loop(ctx: SearchContext, choose: Chooser) -> Node:
    """The beam loop SBS and lookahead share: expand all beams, let ``choose`` keep the best
    ``beam_size - finished`` of the pooled representatives, retire terminal ones."""
    beam = ctx.settings.beam_size
    frontier: list[Node] = [ctx.tree.root]
    finished: list[Node] = []
    last: list[Node] = []
    while frontier and len(finished) < beam:
        families = await expand(ctx, frontier)
        pool = [child for family in families for child in family]
        if not pool:
            break
        chosen = await choose(ctx, pool, beam - len(finished))
        last = chosen
        frontier = []
        for node in chosen:
            (finished if node.terminal else frontier).append(node)
    if finished:
        return best_by_value(finished)
    return best_by_value(last) if last else ctx.tree.root


async def _top_k_by_value(ctx: SearchContext, pool: list[Node], k: int) -> list[Node]:
    return top_k(pool, k)


async def sbs(ctx: SearchContext) -> Node:
    return await beam_loop(ctx, _top_k_by_value)
