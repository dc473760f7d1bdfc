"""Cross-problem batching of policy, PRM and judge calls (a deterministic asyncio micro-batcher).

Search algorithms are ``async`` functions that ``await`` a :class:`DispatcherHandle` (an
:class:`~equiv.search.expansion.EngineHandle`). Each call parks its requests in a queue and waits. Problems run as concurrent workers; when *every*
live worker is parked, the :class:`Dispatcher` flushes the queues with one batched call per
engine (policy, then PRM, then judge: every parked sibling family of every problem handed to
the judge's ``group`` at once, :func:`judge_groupings`) and resolves the waiting futures. Concurrency 1 is the
sequential path through exactly the same code. Requests of different temperatures (lookahead's
greedy rollouts beside sampled expansions) share a batch: every Policy honours
``StepRequest.temperature`` per request.

Why a "flush when all are blocked" rule rather than a timer: it is deterministic (no clocks),
it batches as much as the workload allows, and because every worker runs one problem
sequentially, "all blocked" is simply ``parked == live``. Results do not depend on what is
batched together because each StepRequest carries its own seed.

A batched call that raises is retried per problem, so one bad problem fails alone and the
others go on (the runner records the failure as that problem's ``error``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

from equiv.prune.boundary import Family, FamilyGrouping, SiblingJudge
from equiv.search.types import Candidate, Policy, RewardModel, ScoreRequest, StepRequest

KINDS = ("generate", "score", "judge")


@dataclass
class _Parked:
    key: Any  # sortable problem key (problem index, seed index)
    order: int  # submission number, a tie-break within one key
    items: list
    future: asyncio.Future


@dataclass
class BatchLog:
    """What each flush sent to each engine (for tests and benchmarks)."""

    calls: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    items: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    largest: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})

    def add(self, kind: str, size: int) -> None:
        self.calls[kind] += 1
        self.items[kind] += size
        self.largest[kind] = max(self.largest[kind], size)


class Dispatcher:
    """Merges the engine requests of concurrently running problems into batched calls."""

    def __init__(self, policy: Policy, reward: RewardModel | None, judge: SiblingJudge | None) -> None:
        self.engines: dict[str, Callable[[Sequence], list]] = {"generate": policy.generate}
        if reward is not None:
            self.engines["score"] = reward.score
        self.judge = judge
        if judge is not None:
            self.engines["judge"] = judge_groupings(judge)
        self.queues: dict[str, list[_Parked]] = {k: [] for k in KINDS}
        self.live = 0
        self.parked = 0
        self._order = 0
        self.closed = False  # set when the run is being torn down: no more engine calls
        self.log = BatchLog()

    # -- worker bookkeeping -------------------------------------------------------------------
    def enter(self) -> None:
        """A worker starts (call before it first runs, so it counts as not blocked)."""
        self.live += 1

    def leave(self) -> None:
        """A worker has no more problems; the others may now all be blocked."""
        self.live -= 1
        self._maybe_flush()

    def handle(self, key: Hashable) -> "DispatcherHandle":
        return DispatcherHandle(self, key)

    # -- parking and flushing ------------------------------------------------------------------
    async def submit(self, kind: str, key: Any, items: list) -> list:
        if not items:
            return []
        if kind not in self.engines:
            raise RuntimeError(f"no engine for {kind!r} requests (none configured)")
        future = asyncio.get_running_loop().create_future()
        self._order += 1
        self.queues[kind].append(_Parked(key, self._order, list(items), future))
        self.parked += 1
        self._maybe_flush()
        return await future

    def _maybe_flush(self) -> None:
        if not self.closed and self.parked > 0 and self.parked >= self.live:
            self.flush()

    def flush(self) -> None:
        """One batched call per engine kind, in the fixed order policy -> PRM -> judge."""
        self.parked = 0
        for kind in KINDS:
            entries = sorted(self.queues[kind], key=lambda p: (p.key, p.order))
            self.queues[kind] = []
            if entries:
                self._call(kind, entries)

    def _call(self, kind: str, entries: list[_Parked]) -> None:
        engine = self.engines[kind]
        flat = [item for e in entries for item in e.items]
        try:
            out = _checked(engine(flat), len(flat), kind)
        except Exception as batch_error:  # noqa: BLE001 - isolated per problem below
            if len(entries) == 1:
                _fail(entries[0], batch_error)
                return
            for entry in entries:  # retry alone so only the failing problem fails
                try:
                    res = _checked(engine(entry.items), len(entry.items), kind)
                except Exception as err:  # noqa: BLE001
                    _fail(entry, err)
                else:
                    self.log.add(kind, len(entry.items))
                    _resolve(entry, res)
            return
        self.log.add(kind, len(flat))
        pos = 0
        for entry in entries:
            _resolve(entry, out[pos : pos + len(entry.items)])
            pos += len(entry.items)


def _checked(out: Any, expected: int, kind: str) -> list:
    out = list(out)
    if len(out) != expected:
        raise RuntimeError(f"{kind} engine returned {len(out)} results for {expected} requests")
    return out


def _resolve(entry: _Parked, result: list) -> None:
    if not entry.future.done():
        entry.future.set_result(list(result))


def _fail(entry: _Parked, err: BaseException) -> None:
    if not entry.future.done():
        entry.future.set_exception(err)


GroupAsk = tuple[Family, str, str]
"""One family to group, with its grouping mode and representative rule (a problem's ``--pruner.*``)."""


def judge_groupings(judge: SiblingJudge) -> Callable[[Sequence[GroupAsk]], list[FamilyGrouping]]:
    """Each ``(family, mode, representative)`` item's grouping: the judge's ``group`` of every
    family asking with the same settings at once (in a run, all of them), so its rounds are batched
    across every parked problem."""

    def run(items: Sequence[GroupAsk]) -> list[FamilyGrouping]:
        out: list[FamilyGrouping | None] = [None] * len(items)
        by_setting: dict[tuple[str, str], list[int]] = {}
        for k, (_, mode, representative) in enumerate(items):
            by_setting.setdefault((mode, representative), []).append(k)
        for (mode, representative), ks in by_setting.items():
            found = judge.group([items[k][0] for k in ks], mode=mode,  # type: ignore[arg-type]
                                representative=representative)  # type: ignore[arg-type]
            for k, grouping in zip(ks, found):
                out[k] = grouping
        return [g for g in out if g is not None]

    return run


class DispatcherHandle:
    """One problem's :class:`~equiv.search.expansion.EngineHandle`: its calls go through the run's dispatcher."""

    def __init__(self, dispatcher: Dispatcher, key: Hashable) -> None:
        self._dispatcher = dispatcher
        self.key = key

    @property
    def has_judge(self) -> bool:
        return "judge" in self._dispatcher.engines

    async def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]:
        return await self._dispatcher.submit("generate", self.key, list(requests))

    async def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        return await self._dispatcher.submit("score", self.key, list(requests))

    @property
    def judge_threshold(self) -> float:
        """The judge's policy threshold (recorded beside the pairs it logs, :mod:`.pairlog`)."""
        if self._dispatcher.judge is None:
            raise RuntimeError("no judge configured")
        return float(self._dispatcher.judge.threshold)

    async def group(self, families: Sequence[Family], *, mode: str = "greedy",
                    representative: str = "first") -> list[FamilyGrouping]:
        """Each family's grouping, from the judge's ``group`` (see :func:`judge_groupings`)."""
        return await self._dispatcher.submit("judge", self.key, [(f, mode, representative) for f in families])


async def run_workers(
    dispatcher: Dispatcher, jobs: Sequence[Any], work: Callable[[Any], Any], concurrency: int
) -> None:
    """Run ``await work(job)`` for every job with at most ``concurrency`` in flight.

    Workers take jobs in order. ``work`` must not raise for a per-problem failure (the runner
    records it); anything that does escape (KeyboardInterrupt, a bug) stops the run.
    """
    queue = iter(list(jobs))

    async def worker() -> None:
        try:
            for job in queue:
                await work(job)
        except BaseException:
            dispatcher.closed = True
            raise
        finally:
            dispatcher.leave()

    n = max(1, min(concurrency, len(jobs)))
    if not jobs:
        return
    for _ in range(n):
        dispatcher.enter()
    tasks = [asyncio.ensure_future(worker()) for _ in range(n)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
