"""The one place the service asks its judge anything: pairs in, one verdict per pair out
(:func:`verdicts`), or sibling steps in, their classes out (:func:`group`).

``/verdicts``, ``/predict`` and ``/merge_model_inference`` go through :func:`verdicts`, ``/group``
through the judge's own ``group`` (:func:`equiv.prune.boundary.group_families`, the one place a
merge is decided, which search and the llm-reasoners adapter call too). Each pair is decided by
the judge's own policy, applied by the one evaluator (:func:`equiv.judge.decide.decide`, through
the judge's ``pair_verdicts``): the rules first -- the same-step shortcut, the guard rules, the
restatement rule, aligned plans, then the Levenshtein prefilter -- and only the pairs they leave
open go to the model, whose probability meets the threshold and the statement floor; the reason is the stage
that decided. ``/verdicts`` and ``/group`` answer each verdict in its one JSON form
(:meth:`~equiv.judge.decide.Verdict.to_json`).
"""

from __future__ import annotations

from typing import Sequence

from equiv.judge.decide import REASONS, Verdict  # noqa: F401  (REASONS: what a verdict's reason can be)
from equiv.prune.boundary import Family, FamilyGrouping, SiblingJudge
from equiv.prune.cached import Pair


def verdicts(judge: SiblingJudge, pairs: Sequence[Pair], questions: Sequence[str] | None = None, *,
             score_ruled: bool = False) -> list[Verdict]:
    """One verdict per pair, in order, from one batched judge call (``questions``: each pair's
    problem, which the guard reads; None = unknown; ``score_ruled``: the probability of the pairs
    a rule decided too, else None -- one request's setting, never a batch's)."""
    if not pairs:
        return []
    asked = list(questions) if questions is not None else [""] * len(pairs)
    return judge.pair_verdicts(list(pairs), asked, score_ruled=score_ruled)


def group(judge: SiblingJudge, steps: Sequence[str], question: str | None = None, *,
          mode: str = "greedy") -> FamilyGrouping:
    """One problem's sibling steps grouped as search groups them (the judge's ``group`` of one
    family): greedy asks each step only against the representatives before it, transitive every
    pair. ``pairs``/``verdicts``: the index pairs asked (``i < j``) and their verdicts."""
    return judge.group([Family.of(steps, question)], mode=mode)[0]  # type: ignore[arg-type]
