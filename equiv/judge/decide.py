"""The one evaluator: pairs of steps, a :class:`~equiv.judge.policy.DecisionPolicy` and a way to
score them -> one :class:`Verdict` per pair (probability, merged, reason).

Every consumer decides through :func:`decide` -- search (through the pruning judges), ``pairs``,
``predict``, fit's own report, the ensemble command, cross-validation and its yardstick -- so a
figure measured by one describes the judge that ships. This module is the only place that
compares a probability with a threshold to decide a merge.

The stages, in order (the first that decides gives the reason; docs/pruning.md). The rules come
first and the model last, so the model scores only the pairs the rules leave open:

1. ``identical`` -- the two steps are the same step (``policy.same_step``): merged, probability 1.
2. ``guard:<rule>`` -- a guard rule (``policy.guard``, :mod:`equiv.text.guard`) vetoes: kept apart.
3. ``restated`` -- with ``policy.restate`` on, two steps that compute nothing and restate each
   other (:func:`equiv.text.restate.restatement`: the same words, or the same final answer)
   merge, whatever the probability: the floor distrusts the model on such pairs, and these the
   words settle.
4. ``aligned_plan`` -- with ``policy.plan_items`` set, two numbered plans that compute nothing
   and list as many sub-goals merge when every pair of sub-goals, in order, reads alike at a
   cosine of at least ``plan_items`` (``paraphrase``: the sentence model's similarity,
   :mod:`equiv.judge.paraphrase`): a plan is its list of sub-goals, and the cross-encoder, unsure
   of whole plans, is not asked (docs/experiments/2026-12-01-plans-item-by-item.md).
5. ``prefiltered`` -- Levenshtein ratio <= ``policy.prefilter``: kept apart, probability 0. After
   the rules since 2026-12-01: the prefilter spares the *model* pairs too unlike in characters to
   be worth scoring, and a rule that reads the words (a restatement: "So, the total amount Zach
   spent is [boxed 682]." / "So, Zach spent [boxed 682] dollars.") is not such a pair
   (docs/experiments/2026-12-01-the-rules-before-the-prefilter.md).
6. the model's probability (``scores``: the members' combined probability).
7. ``below_threshold`` -- the probability is below ``policy.threshold``: kept apart.
8. ``floor`` -- both steps compute nothing and the probability is below ``policy.floor``
   (``policy.plan_floor`` where a step is a numbered plan): kept apart.
9. ``threshold`` -- merged.

Every stage reads a pair in one canonical order (:func:`canonical_pair`: the two texts sorted), so
a verdict -- its probability, merge, reason and detail -- is the same for ``(a, b)`` and
``(b, a)``: the rules are symmetric, but the cross-encoder is not (it reads ``[CLS] a [SEP] b``),
and before this the first sibling decided which probability a pair got (18 false merges one way
on fresh solution pairs, 17 with every pair swapped). A scorer passed as a function receives
the pairs in that order; a caller passing probabilities it computed itself scores
:func:`canonical_pair` of each pair (:func:`equiv.judge.members.score_members` does).

Stages 2 to 5 do not read the probability, so running them before the model gives the verdicts
the old order (model, then guard and restatement) gave, without the model's work on the pairs
they decide (on search's sibling pairs the guard alone decides most of those the prefilter
leaves). Their probability is None unless the caller asks for it (``score_ruled``: ``pairs
--output``, threshold sweeps) or passes the scores already computed.

No torch; pure apart from calling ``scores`` and ``paraphrase`` (whose default loads the policy's
sentence model on first use, only when a pair of plans reaches stage 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from equiv.data.tokenize import canonical_pair
from equiv.judge.policy import DecisionPolicy
from equiv.text.formatting import format_key
from equiv.text.guard import computes_nothing, guard_rule, numbered_plan, rule_detail
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace
from equiv.text.plans import aligned_items
from equiv.text.restate import restatement

Pair = tuple[str, str]
Scorer = Callable[[list[Pair]], Sequence[float]]
ParaphraseScorer = Callable[[Sequence[Pair]], Sequence[float]]

IDENTICAL = "identical"
PREFILTERED = "prefiltered"
GUARD_PREFIX = "guard:"
RESTATED = "restated"
ALIGNED_PLAN = "aligned_plan"
BELOW_THRESHOLD = "below_threshold"
FLOOR = "floor"
THRESHOLD = "threshold"
REASONS = (IDENTICAL, GUARD_PREFIX + "<rule>", RESTATED, ALIGNED_PLAN, PREFILTERED, BELOW_THRESHOLD, FLOOR, THRESHOLD)
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
    kind of restatement ("same words", "same answer", "same boxed answer"), empty otherwise. ``model_call`` says
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

    def to_json(self) -> dict[str, object]:
        """The one JSON form of a verdict, written here for every consumer (run records, the pair
        log, the service's answers, predict, cross-validation's rows), so one reader
        (:func:`verdict_from_json`) reads them all: ``probability`` (null where a rule decided the
        pair unscored; unrounded, so a verdict read back is the verdict written), ``merged``,
        ``reason``, ``model_call`` and, when there is one, ``detail``."""
        out: dict[str, object] = {"probability": self.probability, "merged": self.merged, "reason": self.reason,
                                  "model_call": self.model_call}
        if self.detail:
            out["detail"] = self.detail
        return out


OLD_PROBABILITY_KEYS = ("prob", "prob_equivalent")
"""Where files written before the one form kept a verdict's probability: the pair log's and
cross-validation's ``prob``, predict's ``prob_equivalent``."""


class VerdictJSONError(ValueError):
    """A JSON object that is not a verdict; the message names the field (readers add file and line)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"field '{field}': {message}")
        self.field = field
        self.message = message


MERGING_REASONS = (IDENTICAL, RESTATED, ALIGNED_PLAN, THRESHOLD)
"""The reasons of a merge (every other reason keeps the pair apart)."""


def verdict_from_json(row: Mapping[str, object]) -> Verdict:
    """A verdict from its one JSON form (:meth:`Verdict.to_json`), or from what files written
    before it kept: ``prob`` (pair logs, cross-validation) or ``prob_equivalent`` (predict) for
    ``probability``; for ``merged``, predict's ``prediction`` (0/1), else the ``reason`` (a
    pair log's: :data:`MERGING_REASONS` merge), else the probability against the row's
    ``threshold`` (the first pair logs, which had no reason); a missing ``reason`` is the
    threshold's (``threshold`` or ``below_threshold``), a missing ``model_call`` False. Raises
    :class:`VerdictJSONError` naming the field when the object is not a verdict."""
    key = next((k for k in ("probability", *OLD_PROBABILITY_KEYS) if k in row), None)
    if key is None:
        raise VerdictJSONError("probability", "missing")
    prob = row[key]
    if prob is not None and (isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0.0 <= prob <= 1.0):
        raise VerdictJSONError(key, f"not a probability in [0, 1] or null: {prob!r}")
    reason = row.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason):
        raise VerdictJSONError("reason", f"not a reason: {reason!r}")
    threshold = row.get("threshold")
    if "merged" in row or "prediction" in row:
        merged = row["merged"] if "merged" in row else row["prediction"]
        if isinstance(merged, int) and not isinstance(merged, bool) and merged in (0, 1):
            merged = bool(merged)
    elif reason is not None:
        merged = reason in MERGING_REASONS
    elif prob is not None and isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        merged = prob >= threshold
    else:
        raise VerdictJSONError("merged", "missing")
    if not isinstance(merged, bool):
        raise VerdictJSONError("merged", f"not true or false: {merged!r}")
    if reason is None:
        reason = THRESHOLD if merged else BELOW_THRESHOLD
    detail = row.get("detail", "")
    if not isinstance(detail, str):
        raise VerdictJSONError("detail", f"not text: {detail!r}")
    model_call = row.get("model_call", False)
    if not isinstance(model_call, bool):
        raise VerdictJSONError("model_call", f"not true or false: {model_call!r}")
    return Verdict(None if prob is None else float(prob), merged, reason, detail, model_call)


def same_step(policy: DecisionPolicy, a: str, b: str) -> bool:
    """Stage 1: whether the shortcut calls the two steps the same step."""
    key = _SAME_STEP_KEY.get(policy.same_step)
    return key is not None and key(a) == key(b)


def prefiltered(policy: DecisionPolicy, a: str, b: str) -> bool:
    """Stage 5: whether the Levenshtein prefilter keeps a pair the rules left open from the model."""
    return policy.prefilter is not None and levenshtein_ratio(a, b) <= policy.prefilter


def statement_floor(policy: DecisionPolicy, a: str, b: str) -> float | None:
    """The floor a pair of statements is held to: ``policy.plan_floor`` where either step is a
    numbered plan and the policy sets one, else ``policy.floor`` (None: no floor)."""
    if policy.plan_floor is not None and (numbered_plan(a) or numbered_plan(b)):
        return policy.plan_floor
    return policy.floor


def below_floor(policy: DecisionPolicy, a: str, b: str, probability: float) -> bool:
    """The statement floor's test (stage 8): both steps compute nothing and the probability is
    below their floor (:func:`statement_floor`). The one place it is written."""
    if policy.floor is None:  # off, plans too (a plan floor exists only beside a statement floor)
        return False
    # the texts' tests first: a pair that computes never needs to know whether a step is a plan
    return computes_nothing(a) and computes_nothing(b) and probability < statement_floor(policy, a, b)


def rule_verdict(policy: DecisionPolicy, a: str, b: str, question: str = "") -> Verdict | None:
    """Stages 1-3, which read the texts only: the verdict when a rule decides the pair (a guard
    veto or a restatement with probability None), else None (aligned plans, the prefilter and
    the model decide)."""
    if same_step(policy, a, b):
        return Verdict(1.0, True, IDENTICAL)
    for name in policy.guard:
        detail = rule_detail(guard_rule(name), a, b, question or "")
        if detail:
            return Verdict(None, False, GUARD_PREFIX + name, detail)
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


def aligned_plan_verdicts(policy: DecisionPolicy, pairs: Sequence[Pair],
                          paraphrase: ParaphraseScorer | None = None) -> list[Verdict | None]:
    """Stage 4 for pairs the earlier stages left open: per pair, the ``aligned_plan`` merge or
    None (the model decides). Only with ``policy.plan_items`` set, and only for two numbered plans
    that compute nothing and list as many sub-goals; every sub-goal pair is scored in one call of
    ``paraphrase`` (default: the policy's sentence model, loaded on first use)."""
    if policy.plan_items is None:
        return [None] * len(pairs)
    aligned = [aligned_items(a, b) if computes_nothing(a) and computes_nothing(b) else () for a, b in pairs]
    items = sorted({item for pair_items in aligned for item in pair_items})
    if not items:
        return [None] * len(pairs)
    if paraphrase is None:
        from equiv.judge.paraphrase import paraphrase_scorer  # torch and the sentence model: only now

        paraphrase = paraphrase_scorer(policy.paraphrase_model)
    got = list(paraphrase(items))
    if len(got) != len(items):
        raise ValueError(f"the paraphrase scorer returned {len(got)} scores for {len(items)} pairs")
    cosine = dict(zip(items, got))
    out: list[Verdict | None] = []
    for pair_items in aligned:
        least = min((cosine[item] for item in pair_items), default=None)
        if least is None or least < policy.plan_items:
            out.append(None)
        else:
            out.append(Verdict(None, True, ALIGNED_PLAN, f"{len(pair_items)} sub-goals alike, the least at {least:.3f}"))
    return out


def decide(pairs: Sequence[Pair], policy: DecisionPolicy, scores: Scorer | Sequence[float | None],
           questions: Sequence[str] | None = None, *, score_ruled: bool = False,
           paraphrase: ParaphraseScorer | None = None) -> list[Verdict]:
    """One :class:`Verdict` per pair, in order; each pair decided in its canonical order
    (:func:`canonical_pair`), so swapping a pair's texts changes nothing.

    ``scores``: either a function called once with the pairs that need the model (as asked),
    returning one probability each (the pairs come in canonical order); or one probability per pair already computed (entries of
    pairs a rule decides are not required and may be None; when given they are kept as the
    verdict's probability; they should be the canonical pairs' probabilities). ``questions``: each pair's problem text ("" when unknown), which the
    guard reads for restated givens; the model never does. ``score_ruled``: also score the pairs
    a guard rule or the restatement rule decided, for their probability (the verdict does not
    change); off by default, so the model runs only on the pairs the rules leave open.
    ``paraphrase``: the sub-goal similarity of stage 4 (default: the policy's sentence model).
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
        out[i] = rule_verdict(policy, a, b, asked[i])
    open_pairs = [i for i, verdict in enumerate(out) if verdict is None]
    for i, verdict in zip(open_pairs, aligned_plan_verdicts(policy, [pairs[i] for i in open_pairs], paraphrase)):
        out[i] = verdict if verdict is not None else (
            Verdict(0.0, False, PREFILTERED) if prefiltered(policy, *pairs[i]) else None)
    for i, ruled in enumerate(out):
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
        if v.reason in (IDENTICAL, RESTATED, ALIGNED_PLAN):
            out.append(1.0)
        elif v.reason == PREFILTERED or v.reason.startswith(GUARD_PREFIX) or v.reason == FLOOR:
            out.append(0.0)
        elif v.probability is not None and below_floor(policy, a, b, v.probability):
            out.append(0.0)  # below this threshold now, but the floor would hold it at any lower one
        else:
            out.append(v.probability if v.probability is not None else 0.0)
    return out
