"""The one evaluator: pairs of steps, a :class:`~equiv.judge.policy.DecisionPolicy` and a way to
score them -> one :class:`Verdict` per pair (probability, merged, reason).

Every consumer decides through :func:`decide` -- search (through the pruning judges), ``pairs``,
``predict``, fit's own report, the ensemble command, cross-validation and its yardstick -- so a
figure measured by one describes the judge that ships. This module is the only place that
compares a probability with a threshold to decide a merge.

The stages, in order (the first that decides gives the reason; docs/pruning.md). The rules come
first and the model last, so the model scores only the pairs the rules leave open:

1. ``identical`` -- the two steps are the same step (``policy.same_step``): merged, probability 1.
2. ``prefiltered`` -- Levenshtein ratio <= ``policy.prefilter``: kept apart, probability 0.
3. ``guard:<rule>`` -- a guard rule (``policy.guard``, :mod:`equiv.text.guard`) vetoes: kept apart.
4. ``restated`` -- with ``policy.restate`` on, two steps that compute nothing and restate each
   other (:func:`equiv.text.restate.restatement`: the same words, or the same final answer)
   merge, whatever the probability: the floor distrusts the model on such pairs, and these the
   words settle.
5. the model's probability (``scores``: the members' combined probability).
6. ``below_threshold`` -- the probability is below ``policy.threshold``: kept apart.
7. ``floor`` -- both steps compute nothing and the probability is below ``policy.floor``: kept apart.
8. ``threshold`` -- merged.

Every stage reads a pair in one canonical order (:func:`canonical_pair`: the two texts sorted), so
a verdict -- its probability, merge, reason and detail -- is the same for ``(a, b)`` and
``(b, a)``: the rules are symmetric, but the cross-encoder is not (it reads ``[CLS] a [SEP] b``),
and before this the first sibling decided which probability a pair got (18 false merges one way
on fresh solution pairs, 17 with every pair swapped). A scorer passed as a function receives
the pairs in that order; a caller passing probabilities it computed itself scores
:func:`canonical_pair` of each pair (:func:`equiv.judge.members.score_members` does).

Stages 3 and 4 do not read the probability, so running them before the model gives the verdicts
the old order (model, then guard and restatement) gave, without the model's work on the pairs
they decide (on search's sibling pairs the guard alone decides most of those the prefilter
leaves). Their probability is None unless the caller asks for it (``score_ruled``: ``pairs
--output``, threshold sweeps) or passes the scores already computed.

No torch; pure apart from calling ``scores``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from equiv.data.tokenize import canonical_pair
from equiv.judge.policy import DecisionPolicy
from equiv.text.formatting import format_key
from equiv.text.guard import computes_nothing, guard_veto
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace
from equiv.text.restate import restatement

Pair = tuple[str, str]
Scorer = Callable[[list[Pair]], Sequence[float]]

IDENTICAL = "identical"
PREFILTERED = "prefiltered"
GUARD_PREFIX = "guard:"
RESTATED = "restated"
BELOW_THRESHOLD = "below_threshold"
FLOOR = "floor"
THRESHOLD = "threshold"
REASONS = (IDENTICAL, PREFILTERED, GUARD_PREFIX + "<rule>", RESTATED, BELOW_THRESHOLD, FLOOR, THRESHOLD)
"""Every reason a verdict can give, in stage order (``guard:<rule>`` names the vetoing rule)."""
FREE_REASONS = (IDENTICAL, PREFILTERED)
"""Reasons whose probability is fixed (1 and 0) without any model."""

_SAME_STEP_KEY: dict[str, Callable[[str], str]] = {"format": format_key, "whitespace": normalise_whitespace}


@dataclass(frozen=True)
class Verdict:
    """What the policy says about one pair.

    ``probability`` is the model's (1.0 for ``identical``, 0.0 for ``prefiltered``). For a pair a
    guard rule vetoed or the restatement rule merged it is None unless the caller asked for it
    (``score_ruled``) or gave it, so a reader sees how sure the model was of a merge the policy
    refused; the floor keeps it. ``detail`` is the guard rule's short reason ("12 vs 15") or the
    kind of restatement ("same words", "same answer"), empty otherwise. ``model_call`` says
    whether deciding it took a learned model's forward (what search counts as ``judge_calls``);
    the evaluator leaves it False and a judge sets it for the pairs its model scored.
    """

    probability: float | None
    merged: bool
    reason: str
    detail: str = ""
    model_call: bool = False

    @property
    def scored(self) -> bool:
        """Whether the pair has a model probability (neither the shortcut nor the prefilter decided
        it, and the rules did not decide it unscored)."""
        return self.reason not in FREE_REASONS and self.probability is not None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"probability": None if self.probability is None else round(self.probability, 6),
                                  "merged": self.merged, "reason": self.reason}
        if self.detail:
            out["detail"] = self.detail
        return out


def same_step(policy: DecisionPolicy, a: str, b: str) -> bool:
    """Stage 1: whether the shortcut calls the two steps the same step."""
    key = _SAME_STEP_KEY.get(policy.same_step)
    return key is not None and key(a) == key(b)


def prefiltered(policy: DecisionPolicy, a: str, b: str) -> bool:
    """Stage 2: whether the Levenshtein prefilter keeps the pair apart without a model."""
    return policy.prefilter is not None and levenshtein_ratio(a, b) <= policy.prefilter


def below_floor(policy: DecisionPolicy, a: str, b: str, probability: float) -> bool:
    """The statement floor's test (stage 7): both steps compute nothing and the probability is
    below ``policy.floor``. The one place it is written."""
    return (policy.floor is not None and probability < policy.floor
            and computes_nothing(a) and computes_nothing(b))


def rule_verdict(policy: DecisionPolicy, a: str, b: str, question: str = "") -> Verdict | None:
    """Stages 1-4, which read the texts only: the verdict when a rule decides the pair (a guard
    veto or a restatement with probability None), else None (the model decides)."""
    if same_step(policy, a, b):
        return Verdict(1.0, True, IDENTICAL)
    if prefiltered(policy, a, b):
        return Verdict(0.0, False, PREFILTERED)
    for rule in policy.guard:
        veto = guard_veto(a, b, question, rules=(rule,))
        if veto is not None:
            return Verdict(None, False, GUARD_PREFIX + veto.rule, veto.detail)
    if policy.restate:
        kind = restatement(a, b)
        if kind is not None:
            return Verdict(None, True, RESTATED, kind)
    return None


def model_verdict(policy: DecisionPolicy, a: str, b: str, probability: float) -> Verdict:
    """Stages 6-8 for a pair the rules left open and the model scored."""
    at_threshold = probability > policy.threshold if policy.compare == ">" else probability >= policy.threshold
    if not at_threshold:
        return Verdict(probability, False, BELOW_THRESHOLD)
    if below_floor(policy, a, b, probability):
        return Verdict(probability, False, FLOOR)
    return Verdict(probability, True, THRESHOLD)


def decide(pairs: Sequence[Pair], policy: DecisionPolicy, scores: Scorer | Sequence[float | None],
           questions: Sequence[str] | None = None, *, score_ruled: bool = False) -> list[Verdict]:
    """One :class:`Verdict` per pair, in order; each pair decided in its canonical order
    (:func:`canonical_pair`), so swapping a pair's texts changes nothing.

    ``scores``: either a function called once with the pairs that need the model (as asked),
    returning one probability each (the pairs come in canonical order); or one probability per pair already computed (entries of
    pairs a rule decides are not required and may be None; when given they are kept as the
    verdict's probability; they should be the canonical pairs' probabilities). ``questions``: each pair's problem text ("" when unknown), which the
    guard reads for restated givens; the model never does. ``score_ruled``: also score the pairs
    a guard rule or the restatement rule decided, for their probability (the verdict does not
    change); off by default, so the model runs only on the pairs the rules leave open.
    """
    if questions is not None and len(questions) != len(pairs):
        raise ValueError(f"{len(questions)} questions for {len(pairs)} pairs")
    if not callable(scores) and len(scores) != len(pairs):
        raise ValueError(f"{len(scores)} scores for {len(pairs)} pairs")
    asked = list(questions) if questions is not None else [""] * len(pairs)
    pairs = [canonical_pair(a, b) for a, b in pairs]
    out: list[Verdict | None] = [None] * len(pairs)
    todo: list[int] = []  # pairs the model scores: those the rules left open (+ the ruled ones, asked)
    for i, (a, b) in enumerate(pairs):
        ruled = rule_verdict(policy, a, b, asked[i])
        out[i] = ruled
        if ruled is None or (ruled.probability is None and (score_ruled or not callable(scores))):
            todo.append(i)
    if todo:
        if callable(scores):
            got = list(scores([pairs[i] for i in todo]))
            if len(got) != len(todo):
                raise ValueError(f"the scorer returned {len(got)} scores for {len(todo)} pairs")
        else:
            got = [scores[i] for i in todo]
        for i, probability in zip(todo, got):
            ruled = out[i]
            if ruled is not None:  # a rule decided it; the probability is for the reader only
                if probability is not None:
                    out[i] = replace(ruled, probability=float(probability))
                continue
            if probability is None:
                raise ValueError(f"pair {i} needs a score and has none")
            out[i] = model_verdict(policy, pairs[i][0], pairs[i][1], float(probability))
    return [v for v in out if v is not None]


def reason_counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """How many verdicts each reason decided (in stage order, guard rules by name)."""
    order = {reason: k for k, reason in enumerate(REASONS)}
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.reason] = counts.get(verdict.reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0], order[GUARD_PREFIX + "<rule>"]), kv[0])))


def sweep_scores(pairs: Sequence[Pair], verdicts: Sequence[Verdict], policy: DecisionPolicy) -> list[float]:
    """Per pair, the score a threshold sweep reads so that any threshold ``t`` merges exactly the
    pairs :func:`decide` would merge with ``policy`` at ``t``: 1 for ``identical`` and ``restated``; 0 where a
    stage that does not depend on the threshold keeps the pair apart (prefilter, guard, and the
    floor, whose cut-off is the policy's); else the probability. What
    :func:`equiv.judge.calibrate.choose_threshold` sweeps."""
    out = []
    for (a, b), v in zip(pairs, verdicts):
        if v.reason in (IDENTICAL, RESTATED):
            out.append(1.0)
        elif v.reason == PREFILTERED or v.reason.startswith(GUARD_PREFIX) or v.reason == FLOOR:
            out.append(0.0)
        elif v.probability is not None and below_floor(policy, a, b, v.probability):
            out.append(0.0)  # below this threshold now, but the floor would hold it at any lower one
        else:
            out.append(v.probability if v.probability is not None else 0.0)
    return out
