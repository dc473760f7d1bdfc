"""The one boundary between a search and its judge: sibling families in, their classes out.

Why one boundary: a merge used to travel search -> prune -> judge -> back into prune -> search ->
prune again for grouping, and three callers (search, the service, the llm-reasoners adapter)
each grouped siblings their own way, asking every one of the n(n-1)/2 sibling pairs although
greedy grouping reads only pairs against representatives. Now every caller hands the judge
:class:`Family` objects and gets one :class:`FamilyGrouping` each from
:meth:`SiblingJudge.group`; every judge (the local :class:`~equiv.prune.cached.CachedJudge` and
its subclasses, the remote :class:`~equiv.prune.remote.RemoteJudge`, the service's worker,
which holds a local one) implements it through :func:`group_families`, the one place a merge
is decided:

- **greedy** grouping is asked in rounds: round ``k`` asks, for every family at once, its
  ``k``-th candidate (in processing order) against the family's representatives so far -- one
  batched :meth:`~SiblingJudge.pair_verdicts` call per round, so a search step of width ``w`` is
  at most ``w - 1`` judge calls, each batched across families (and, in search, across problems),
  and no pair of two members is ever asked. The classes are those greedy grouping gives over
  every pair's verdict, since it reads exactly these pairs.
- **transitive** grouping needs every pair: one call for all pairs of all families.

Each pair is decided by the judge's policy (:func:`equiv.judge.decide.decide`: the rules, then
the model for the pairs they leave open); grouping never compares a probability itself.
``score_ruled`` (also score the pairs a rule decided, for their probability) belongs to one
request, never to whatever else is batched with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from equiv.judge.decide import Verdict
from equiv.judge.policy import DecisionPolicy
from equiv.prune.grouping import (Grouping, GroupingMode, RepresentativeRule, group_equivalent, processing_order,
                                  sibling_pairs)
from equiv.prune.stats import JudgeStats

Pair = tuple[str, str]
AskVerdicts = Callable[[list[Pair], list[str], bool], list[Verdict]]
"""``(pairs, questions, score_ruled) -> one verdict per pair``: how :func:`group_families` asks."""


@dataclass(frozen=True)
class Family:
    """One set of siblings to group: their texts, their problem (the claim guard reads it; "" when
    unknown) and, for the representative rules ``prior`` and ``score``, each candidate's prior or
    score (``score`` with no scores -- siblings grouped before the reward model scored them --
    falls back to the priors)."""

    texts: tuple[str, ...]
    question: str = ""
    priors: tuple[float, ...] | None = None
    scores: tuple[float, ...] | None = None

    @classmethod
    def of(cls, texts: Sequence[str], question: str | None = None, *, priors: Sequence[float] | None = None,
           scores: Sequence[float] | None = None) -> "Family":
        return cls(tuple(texts), question or "", None if priors is None else tuple(priors),
                   None if scores is None else tuple(scores))


@dataclass(frozen=True)
class FamilyGrouping:
    """What the judge answers for one :class:`Family`: its classes and representatives
    (:class:`~equiv.prune.grouping.Grouping`), and one verdict per index pair it asked
    (``pairs``: ``(i, j)`` with ``i < j``, in :func:`~equiv.prune.grouping.sibling_pairs` order;
    greedy asks only pairs with a representative)."""

    grouping: Grouping
    pairs: list[tuple[int, int]]
    verdicts: list[Verdict]

    @property
    def asked(self) -> int:
        """Pairs the judge was asked for this family."""
        return len(self.pairs)

    @property
    def model_calls(self) -> int:
        """Of those, the pairs whose verdict took a learned model's forward."""
        return sum(bool(v.model_call) for v in self.verdicts)

    def decided(self) -> dict[tuple[int, int], Verdict]:
        """Each asked index pair's verdict."""
        return dict(zip(self.pairs, self.verdicts))


@runtime_checkable
class SiblingJudge(Protocol):
    """The judge interface every caller is typed against: search (its dispatcher and runner),
    ``pairs`` and cross-validation, the service and the llm-reasoners adapter; implemented by
    :class:`~equiv.prune.cached.CachedJudge` (every local strategy) and
    :class:`~equiv.prune.remote.RemoteJudge`.

    - :meth:`group`: sibling families -> their classes (:func:`group_families`);
    - :meth:`pair_verdicts`: one :class:`~equiv.judge.decide.Verdict` per pair, with whether it
      took a model forward (what search counts as ``judge_calls``); ``questions`` each pair's
      problem; ``score_ruled`` the probability of pairs a rule decided too;
    - :meth:`pair_probabilities` / :meth:`pair_scores`: every pair's probability / the score a
      threshold is swept over;
    - ``name``, ``policy`` (its :class:`~equiv.judge.policy.DecisionPolicy`), ``threshold``
      (the policy's), ``stats`` (its work), :meth:`describe` (settings to record),
      :meth:`cache_info` / :meth:`clear_cache` (its bounded cache).
    """

    name: str
    policy: DecisionPolicy
    stats: JudgeStats

    @property
    def threshold(self) -> float: ...

    def group(self, families: Sequence[Family], *, mode: GroupingMode = "greedy",
              representative: RepresentativeRule = "first", score_ruled: bool = False) -> list[FamilyGrouping]: ...

    def pair_verdicts(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None, *,
                      score_ruled: bool = False) -> list[Verdict]: ...

    def pair_probabilities(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]: ...

    def pair_scores(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]: ...

    def describe(self) -> dict[str, Any]: ...

    def cache_info(self) -> dict[str, int]: ...

    def clear_cache(self) -> None: ...


def _rule_of(family: Family, representative: str) -> str:
    """The family's representative rule: ``score`` without scores is ``prior`` (grouped before the
    reward model scored the siblings)."""
    return "prior" if representative == "score" and family.scores is None and family.priors is not None \
        else representative


def _order(family: Family, representative: str) -> list[int]:
    return processing_order(len(family.texts), _rule_of(family, representative), family.priors, family.scores)


def group_families(ask: AskVerdicts, families: Sequence[Family], *, mode: GroupingMode = "greedy",
                   representative: RepresentativeRule = "first", score_ruled: bool = False) -> list[FamilyGrouping]:
    """The classes of each family, asking ``ask`` only the pairs the grouping reads: greedy in
    rounds (round ``k``: every family's ``k``-th candidate in processing order against its
    representatives so far, all families in one call), transitive every pair in one call.

    The one place a merge is decided: every judge's :meth:`SiblingJudge.group` is this over its
    own ``pair_verdicts``."""
    if mode not in ("greedy", "transitive"):
        raise ValueError(f"mode must be greedy or transitive, got {mode!r}")
    orders = [_order(f, representative) for f in families]  # checks the priors/scores first
    asked: list[dict[tuple[int, int], Verdict]] = [{} for _ in families]

    def ask_all(wanted: list[tuple[int, int, int]]) -> list[Verdict]:
        """``(family, i, j)`` -> the verdicts, in one call (the texts in index order)."""
        pairs = [(families[f].texts[min(i, j)], families[f].texts[max(i, j)]) for f, i, j in wanted]
        found = ask(pairs, [families[f].question for f, _, _ in wanted], score_ruled) if pairs else []
        if len(found) != len(pairs):
            raise RuntimeError(f"the judge answered {len(found)} verdicts for {len(pairs)} pairs")
        for (f, i, j), verdict in zip(wanted, found):
            asked[f][(min(i, j), max(i, j))] = verdict
        return found

    if mode == "transitive":
        ask_all([(f, i, j) for f, family in enumerate(families) for i, j in sibling_pairs(len(family.texts))])
    else:
        reps: list[list[int]] = [order[:1] for order in orders]
        for k in range(1, max((len(f.texts) for f in families), default=0)):
            wanted = [(f, rep, orders[f][k]) for f in range(len(families)) if k < len(orders[f]) for rep in reps[f]]
            ask_all(wanted)
            for f in range(len(families)):
                if k < len(orders[f]):
                    c = orders[f][k]
                    if not any(asked[f][(min(r, c), max(r, c))].merged for r in reps[f]):
                        reps[f].append(c)
    out = []
    for f, family in enumerate(families):
        decided = dict(sorted(asked[f].items()))
        grouping = group_equivalent(len(family.texts), {p: v.merged for p, v in decided.items()},
                                    probs={p: v.probability for p, v in decided.items()}, mode=mode,
                                    representative=_rule_of(family, representative),  # type: ignore[arg-type]
                                    priors=family.priors, scores=family.scores)
        out.append(FamilyGrouping(grouping, list(decided), list(decided.values())))
    return out


class GroupsSiblings:
    """:meth:`SiblingJudge.group` for a judge that has ``pair_verdicts``: :func:`group_families`
    over it (what every judge inherits, the local and the remote one alike)."""

    def group(self, families: Sequence[Family], *, mode: GroupingMode = "greedy",
              representative: RepresentativeRule = "first", score_ruled: bool = False) -> list[FamilyGrouping]:
        """Each family's classes, representatives and the verdicts of the pairs asked
        (:func:`group_families`: greedy asks each candidate against the representatives before it,
        in rounds batched across families; transitive every pair)."""
        ask = getattr(self, "pair_verdicts")
        return group_families(lambda pairs, questions, scored: ask(pairs, questions, score_ruled=scored),
                              families, mode=mode, representative=representative, score_ruled=score_ruled)


def group_siblings(
    texts: Sequence[str],
    judge: SiblingJudge,
    *,
    mode: GroupingMode = "greedy",
    representative: RepresentativeRule = "first",
    priors: Sequence[float] | None = None,
    scores: Sequence[float] | None = None,
    question: str | None = None,
) -> Grouping:
    """Group one set of sibling step texts with a judge: ``judge.group`` of one :class:`Family`
    (``question``: the siblings' problem, which the claim guard reads). For many sets at once,
    call ``judge.group`` with them all: its rounds are batched across families."""
    if representative in ("prior", "score") and (priors if representative == "prior" else scores) is None:
        raise ValueError(f"representative={representative!r} needs {representative}s")
    family = Family.of(texts, question, priors=priors, scores=scores)
    return judge.group([family], mode=mode, representative=representative)[0].grouping
