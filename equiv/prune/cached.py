"""Equivalence strategies behind one interface (:class:`equiv.search.types.PairJudge`).

Every strategy answers "how likely is each of these pairs equivalent?" for a *batch* of pairs,
because search collects the sibling pairs of many problems and asks once. Each judge has

- ``name`` and ``threshold``: a pair is equivalent when ``probability >= threshold``;
- ``pair_probabilities(pairs)``: what grouping consumes. Rule-based strategies return 0.0/1.0
  (their own threshold is already applied, so any ``threshold`` in (0, 1] reads them right);
  ``embedding`` returns the cosine similarity clipped at 0; ``model`` the judge's probability;
  ``hybrid`` the judge's logit combined with formula/Levenshtein features (:mod:`equiv.judge.hybrid`);
- ``pair_scores(pairs)``: the continuous score a threshold is swept over (Levenshtein ratio,
  cosine, model probability; 0/1 for ``exact`` and ``formula``);
- ``pair_verdicts(pairs)``: the probability and whether deciding the pair takes a learned
  model's forward (not a free rule, the same-step shortcut or the prefilter) -- what search
  counts as a problem's ``judge_calls``, so the judge alone says what its work was;
- ``stats`` (:class:`JudgeStats`): pairs asked, cache hits, and how each new pair was decided,
  so search can report judge work apart from PRM work.

Every judge caches per pair with an order-insensitive key, so within a search a pair of step
texts is judged once however often and in whichever order it is asked (a judge that reads the
problem's question, ``reads_question``, keys on the question too: the same two steps may be
equivalent for one problem and not for another). The model strategy is
the paper's two-stage check: identical steps are equivalent (free), a Levenshtein ratio <=
``prefilter`` is not equivalent (free), and only the rest go to the classifier in one batched,
length-sorted, dynamically padded, no-grad call (bf16 autocast on GPU). "Identical" means equal
after whitespace normalisation for the rules, and equal up to formatting
(:func:`equiv.text.formatting.format_key`: digit grouping, currency signs, ``12.0`` vs ``12``,
spaces around operators, a final full stop, case) for the trained judges, which the rubric they
are trained on counts as the same step and which the classifier alone sometimes misses.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Sequence

from equiv.errors import InputError, check_fraction
from equiv.text.claims import below_statement_floor, claim_check
from equiv.text.levenshtein import normalise_whitespace

Pair = tuple[str, str]


@dataclass
class JudgeStats:
    """Judge work, cumulative since construction or :meth:`reset`.

    ``pairs`` counts every pair asked (repeats included) and equals ``cache_hits + exact +
    prefiltered + scored`` where ``scored`` is what reached the model (or embedding / rule).
    """

    pairs: int = 0
    cache_hits: int = 0
    exact: int = 0
    prefiltered: int = 0
    scored: int = 0
    forward_batches: int = 0
    guarded: int = 0  # pairs asked whose merge the claim guard vetoed (repeats included)
    floored: int = 0  # pairs asked, neither step computing, whose score fell short of the statement floor
    seconds: float = 0.0

    def reset(self) -> None:
        for name, value in asdict(JudgeStats()).items():
            setattr(self, name, value)

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class PairVerdict(NamedTuple):
    """What a judge says about one pair: its probability and whether it took a model forward."""

    probability: float
    model_call: bool


def pair_key(a: str, b: str) -> Pair:
    """The order-insensitive identity of a pair (the judge's cache key)."""
    return (a, b) if a <= b else (b, a)



def check_threshold(value: float, strategy: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InputError(f"must be a number, got {value!r}", field="threshold")
    if not 0.0 < float(value) <= 1.0:
        raise InputError(f"must be in (0, 1] for strategy {strategy!r}, got {value}", field="threshold")
    return float(value)


def check_statement_floor(value: float | None, path: str | None = None) -> float | None:
    """A statement floor (``statement_threshold``) as a judge keeps it: in [0, 1], and 0 (like
    ``None``) meaning no floor."""
    if value is None:
        return None
    return check_fraction(value, "statement_threshold", path) or None


class CachedJudge:
    """Shared machinery: order-insensitive cache, stats, and the exact-match shortcut.

    Subclasses implement :meth:`_judge_new` for pairs not seen before and return
    ``(probability, score)`` per pair. The cache key ignores order, but a new pair reaches
    :meth:`_judge_new` in the order it was first asked: search asks (earlier, later) sibling,
    the order the judge was trained on.
    """

    name: str = "base"
    learned: bool = False  # True: a new pair costs a model forward (model, embedding); False: a rule
    threshold: float = 0.5
    exact_shortcut: bool = True
    # what "the same step" means for the shortcut: whitespace-equal for rules, formatting-equal
    # (format_key) for the trained judges; a function of one text
    same_step_key = staticmethod(normalise_whitespace)
    strict: bool = False  # True: a score decides "equivalent" when > threshold (Levenshtein), else >=
    # The claim guard (equiv.text.claims): a pair whose steps state or conclude different numbers, or
    # swap or name different things, is "not equivalent" whatever the score; see claim_guard in PrunerConfig.
    claim_guard: bool = False
    # The statement floor (equiv.text.claims.below_statement_floor): a pair of steps that both compute
    # nothing is "not equivalent" unless its score reaches this; None = no floor.
    statement_threshold: float | None = None
    # True: the score of a pair depends on its problem's question (a model trained with_question);
    # the question then joins the cache key and reaches _judge_new.
    reads_question: bool = False

    def __init__(self) -> None:
        self.stats = JudgeStats()
        self._cache: dict[tuple[str, ...], tuple[float, float]] = {}
        self._model_calls: set[tuple[str, ...]] = set()  # cached keys whose decision took a model forward

    def _key(self, a: str, b: str, question: str) -> tuple[str, ...]:
        """The cache key: :func:`pair_key`, and the question when the score depends on it."""
        return (*pair_key(a, b), question) if self.reads_question else pair_key(a, b)

    def clear_cache(self) -> None:
        """Forget judged pairs (benchmarks; a new search over unrelated problems)."""
        self._cache.clear()
        self._model_calls.clear()

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        """``(probability, score)`` of pairs not judged before: what a strategy implements."""
        raise NotImplementedError

    def _judge_new_asked(self, pairs: list[Pair], questions: list[str]) -> list[tuple[float, float]]:
        """:meth:`_judge_new` with each pair's question ("" when unknown): a judge whose score
        depends on the question (``reads_question``) overrides this instead."""
        return self._judge_new(pairs)

    def needs_model(self, a: str, b: str) -> bool:
        """Whether a new pair that the shortcut did not decide costs a forward of a learned model.

        Rules cost none; a learned judge overrides this where it decides some pairs for free
        (the model strategy's Levenshtein prefilter).
        """
        return self.learned

    def pair_results(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[tuple[float, float]]:
        """``(probability, score)`` per pair in one pass (``pairs`` needs both without double counting).

        ``questions``: the problem each pair belongs to (search and labelled files know it), which
        the claim guard reads for restated givens and the problem's entities; without it the guard
        checks numbers only, and counts a number the other step lacks as a new claim.
        """
        if questions is not None and len(questions) != len(pairs):
            raise ValueError(f"{len(questions)} questions for {len(pairs)} pairs")
        if questions is None and self.reads_question:
            raise InputError(f"the {self.name} judge reads each pair's question; give the pairs' questions",
                             field="questions")
        start = time.perf_counter()
        asked_questions = list(questions) if questions is not None else [""] * len(pairs)
        keys = []
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise InputError(f"pair {i} must be two strings, got {pair!r}"[:200], field="pairs")
            keys.append(self._key(pair[0], pair[1], asked_questions[i]))
        self.stats.pairs += len(keys)
        new: list[tuple[str, ...]] = []
        asked: list[Pair] = []  # the new pairs as asked, not as keyed
        new_questions: list[str] = []
        seen: set[tuple[str, ...]] = set()
        for key, pair, question in zip(keys, pairs, asked_questions):
            if key in self._cache or key in seen:
                self.stats.cache_hits += 1
                continue
            seen.add(key)
            if self.exact_shortcut and self.same_step_key(key[0]) == self.same_step_key(key[1]):
                self._cache[key] = (1.0, 1.0)
                self.stats.exact += 1
            else:
                new.append(key)
                asked.append((pair[0], pair[1]))
                new_questions.append(question)
        if new:
            for key, pair, result in zip(new, asked, self._judge_new_asked(asked, new_questions)):
                self._cache[key] = result
                if self.needs_model(*pair):
                    self._model_calls.add(key)
        out = [self._cache[key] for key in keys]
        if self.claim_guard or self.statement_threshold is not None:
            out = self._hold_back(pairs, out, questions)
        self.stats.seconds += time.perf_counter() - start
        return out

    def _hold_back(self, pairs: Sequence[Pair], results: list[tuple[float, float]],
                   questions: Sequence[str] | None) -> list[tuple[float, float]]:
        """Zero (probability and score) every pair the claim guard vetoes (its steps' claims
        conflict) and every pair of two statements whose score is below the statement floor (a
        model judge's score is its probability; a rule's, such as the Levenshtein ratio, its
        continuous score), so a threshold swept over the scores sees both. Applied after the cache,
        because one pair of texts may belong to problems that give different numbers."""
        kept = []
        for i, ((a, b), result) in enumerate(zip(pairs, results)):
            if result[0] > 0.0:
                if self.claim_guard and claim_check(a, b, questions[i] if questions else "").veto:
                    self.stats.guarded += 1
                    result = (0.0, 0.0)
                elif below_statement_floor(a, b, result[1], self.statement_threshold):
                    self.stats.floored += 1
                    result = (0.0, 0.0)
            kept.append(result)
        return kept

    def pair_verdicts(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[PairVerdict]:
        """Probability and model-forward flag per pair, in order; a cached pair keeps its flag,
        so a count over distinct pairs does not depend on what was asked before."""
        results = self.pair_results(pairs, questions)
        asked_questions = questions if questions is not None else [""] * len(pairs)
        return [
            PairVerdict(prob, self._key(a, b, q) in self._model_calls)
            for (prob, _), (a, b), q in zip(results, pairs, asked_questions)
        ]

    def pair_probabilities(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """Equivalence probability per pair, in order (``>= threshold`` means equivalent)."""
        return [prob for prob, _ in self.pair_results(pairs, questions)]

    def pair_scores(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """The continuous score a threshold is swept over, per pair, in order."""
        return [score for _, score in self.pair_results(pairs, questions)]

    def describe(self) -> dict[str, Any]:
        """Settings to record beside results (what exactly judged the pairs)."""
        return {"strategy": self.name, "threshold": self.threshold, "claim_guard": self.claim_guard,
                "statement_threshold": self.statement_threshold}
