"""Lookahead search (Snell et al. 2024): beam search valued by k-step greedy rollouts.

Like SBS, each round expands all beams in one batched call and groups siblings into
equivalence classes first. Pruning happens *before* the rollouts (docs/design.md §1): only class
representatives are rolled out, which is where pruning saves work here. Each non-terminal
representative is continued for up to ``lookahead_steps`` steps at ``lookahead_temperature``
(greedy by default), one batched policy call per lookahead step for all rollouts; the PRM score
of the rollout's last step is the candidate's lookahead value, used for the top-k. Rollout
steps are discarded (only the first step joins the tree) but their tokens count, as every policy
call's do (:func:`~equiv.search.expansion.generate`: a rollout step cut by the token limit is
``truncated``, like any other).
"""

from __future__ import annotations

from equiv.search.expansion import SearchContext, generate, score
from equiv.search.sbs import beam_loop
from equiv.search.tree import Node
from equiv.search.types import ScoreRequest, StepRequest


async def rollout_values(ctx: SearchContext, nodes: list[Node]) -> dict[int, float]:
    """Lookahead value per node id (the node's own PRM value when nothing is rolled out)."""
    values = {n.id: (n.value if n.value is not None else float("-inf")) for n in nodes}
    k = ctx.settings.lookahead_steps
    live = [n for n in nodes if not n.terminal]
    if k <= 0 or not live:
        return values
    paths = {n.id: list(ctx.tree.steps(n)) for n in live}
    active = [n for n in live]
    for _ in range(k):
        if not active:
            break
        requests = [
            StepRequest(
                ctx.question,
                tuple(paths[n.id]),
                n=1,
                seed=ctx.seeds.next(paths[n.id], purpose="rollout"),
                temperature=ctx.settings.lookahead_temperature,
            )
            for n in active
        ]
        outputs = await generate(ctx, requests)
        still = []
        for node, cands in zip(active, outputs):
            if not cands or cands[0].truncated:
                continue  # a runaway step ends the rollout; the value comes from the steps before
            paths[node.id].append(cands[0].text)
            depth = node.depth + len(paths[node.id]) - len(ctx.tree.steps(node))
            if not cands[0].finished and depth < ctx.settings.max_depth:
                still.append(node)
        active = still
    requests = [ScoreRequest(ctx.question, tuple(paths[n.id])) for n in live]
    scores = await score(ctx, requests)
    for node, per_step in zip(live, scores):
        if per_step:
            values[node.id] = float(per_step[-1])
    return values


async def _top_k_by_rollout(ctx: SearchContext, pool: list[Node], k: int) -> list[Node]:
    values = await rollout_values(ctx, pool)
    return sorted(pool, key=lambda n: (-values[n.id], n.id))[:k]


async def lookahead(ctx: SearchContext) -> Node:
    return await beam_loop(ctx, _top_k_by_rollout)
