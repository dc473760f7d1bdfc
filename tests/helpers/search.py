"""One search run through the real dispatcher, on the question ``Q``, for the algorithm tests."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from equiv.prune.strategies import PrunerConfig
from equiv.search.config import SearchConfig
from equiv.search.dispatch import Dispatcher, run_workers
from equiv.search.expansion import SearchContext, SeedStream

Q = "q"


def run_search(search: Callable[[SearchContext], Awaitable[Any]], policy: Any, reward: Any, judge: Any = None, *,
               prune: bool = True, pruner: PrunerConfig | None = None, seed: int = 0,
               **settings: Any) -> tuple[Any, SearchContext]:
    """Run one search on the question ``Q`` (read at call time, so a caller may set it) through the
    real dispatcher; returns (final node, ctx). ``pruner`` sets grouping / representative rules;
    ``seed`` the run seed of the per-request seed stream."""
    dispatcher = Dispatcher(policy, reward, judge if prune else None)
    ctx = SearchContext(
        Q,
        dispatcher.handle(0),
        SearchConfig(**settings),
        SeedStream(seed, "p"),
        pruner or PrunerConfig(),
    )
    out: dict[str, Any] = {}

    async def work(_job: int) -> None:
        out["final"] = await search(ctx)

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    return out["final"], ctx
