"""Judge work counters: one object every judge counts into, local or remote.

Search reports judge work apart from PRM work (``summary.json``'s ``judge_stats``, the service's
``/metrics``), so the local judges and the remote one must count alike; they do, by handing every
answered pair to :meth:`JudgeStats.count` with whether it took new work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from equiv.judge.decide import ALIGNED_PLAN, FLOOR, GUARD_PREFIX, IDENTICAL, PREFILTERED, RESTATED, Verdict


@dataclass
class JudgeStats:
    """Judge work, cumulative since construction or :meth:`reset`.

    ``pairs`` counts every pair asked (repeats included) and equals ``cache_hits + exact +
    prefiltered + scored + ruled``: ``scored`` is what reached the model (or embedding / rule),
    ``ruled`` what a guard rule or the restatement rule decided without it, ``cache_hits`` the
    asks answered from what the judge had already done.
    """

    pairs: int = 0
    cache_hits: int = 0
    exact: int = 0
    prefiltered: int = 0
    scored: int = 0
    ruled: int = 0  # new pairs a guard rule, the restatement rule or aligned plans decided unscored (no judge model)
    forward_batches: int = 0
    guarded: int = 0  # pairs asked whose merge a guard rule vetoed (repeats included)
    floored: int = 0  # pairs asked, neither step computing, at the threshold but short of the statement floor
    restated: int = 0  # pairs asked, neither step computing, merged as restatements of each other (restate on)
    aligned_plans: int = 0  # pairs asked, two plans merged sub-goal by sub-goal (plan_items set)
    seconds: float = 0.0

    def count(self, verdicts: Sequence[Verdict], fresh: Sequence[bool], seconds: float = 0.0) -> None:
        """Count one call's answers: ``fresh[i]`` says whether answering pair ``i`` took new work
        (else it was a cache hit); the reason and whether it has a probability say which work."""
        self.pairs += len(verdicts)
        for verdict, new in zip(verdicts, fresh):
            if not new:
                self.cache_hits += 1
            elif verdict.reason == IDENTICAL:
                self.exact += 1
            elif verdict.reason == PREFILTERED:
                self.prefiltered += 1
            elif verdict.probability is None:
                self.ruled += 1
            else:
                self.scored += 1
            self.guarded += verdict.reason.startswith(GUARD_PREFIX)
            self.floored += verdict.reason == FLOOR
            self.restated += verdict.reason == RESTATED
            self.aligned_plans += verdict.reason == ALIGNED_PLAN
        self.seconds += seconds

    def reset(self) -> None:
        for name, value in asdict(JudgeStats()).items():
            setattr(self, name, value)

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)
