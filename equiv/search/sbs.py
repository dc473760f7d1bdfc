"""Step-level beam search (SBS) with pruning before the top-k selection.

Each round expands every beam in one batched policy call (``width`` candidates each). Siblings
are grouped into equivalence classes *before* the top-k, so the beam holds distinct candidates
instead of several copies of the same step (docs/design.md §1). The pool of surviving
representatives across all beams is ranked by PRM value and the best ``beam_size - finished``
are kept; a selected terminal candidate is a finished solution and shrinks the beam, as in the
reference. The answer aggregates the finished solutions as the reference's evaluator does
(:mod:`equiv.search.aggregate`; headline: majority vote).
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
    """The beam loop SBS and lookahead share, in the reference's ``beam_search`` order.

    Each round expands the chosen beams that are not finished (one batched call), then walks the
    chosen in their ranked order: a finished one -- a selected terminal step, or a beam whose
    expansion came back empty (a dead end, answerless, as the reference's end nodes) -- becomes
    a solution; ``choose`` keeps the best ``beam_size - solutions`` of the live children of the
    others. Stops at ``beam_size`` solutions. Returns the best solution by last-step value (the
    runner answers by aggregating ``ctx.solutions``)."""
    beam = ctx.settings.beam_size
    chosen: list[Node] = [ctx.tree.root]
    finished: list[Node] = []
    last: list[Node] = []
    while chosen:
        await expand(ctx, [n for n in chosen if not n.terminal])
        finished.extend(n for n in chosen if n.terminal and n is not ctx.tree.root)
        if len(finished) >= beam:
            break
        pool = [child for n in chosen if not n.terminal for child in ctx.tree.live_children(n)]
        if not pool:
            break
        chosen = await choose(ctx, pool, beam - len(finished))
        last = chosen
    ctx.solutions = finished
    if finished:
        return best_by_value(finished)
    return best_by_value(last) if last else ctx.tree.root


async def _top_k_by_value(ctx: SearchContext, pool: list[Node], k: int) -> list[Node]:
    return top_k(pool, k)


async def sbs(ctx: SearchContext) -> Node:
    return await beam_loop(ctx, _top_k_by_value)
