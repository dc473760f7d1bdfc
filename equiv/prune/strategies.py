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
texts is judged once however often and in whichever order it is asked. The model strategy is
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
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, Sequence

from equiv.devices import resolve_autocast_dtype, resolve_device
from equiv.errors import InputError
from equiv.text.formatting import format_key
from equiv.text.formula import formulas_equivalent
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace

Pair = tuple[str, str]
STRATEGIES = ("none", "exact", "levenshtein", "embedding", "formula", "model", "hybrid")
DEFAULT_LEVENSHTEIN_THRESHOLD = 0.95  # the paper's "Levenshtein ratio > 0.95" baseline
DEFAULT_EMBEDDING_THRESHOLD = 0.9
DEFAULT_MODEL_THRESHOLD = 0.5  # argmax of a two-class head, as the reference decides
DEFAULT_PREFILTER = 0.75


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


def _check_threshold(value: float, strategy: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InputError(f"must be a number, got {value!r}", field="threshold")
    if not 0.0 < float(value) <= 1.0:
        raise InputError(f"must be in (0, 1] for strategy {strategy!r}, got {value}", field="threshold")
    return float(value)


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
    # The claim guard (equiv.text.claims): a pair whose steps state different numbers or swap a
    # problem's entity is "not equivalent" whatever the score; see claim_guard in PrunerConfig.
    claim_guard: bool = False

    def __init__(self) -> None:
        self.stats = JudgeStats()
        self._cache: dict[Pair, tuple[float, float]] = {}
        self._model_calls: set[Pair] = set()  # cached pairs whose decision took a model forward

    def clear_cache(self) -> None:
        """Forget judged pairs (benchmarks; a new search over unrelated problems)."""
        self._cache.clear()
        self._model_calls.clear()

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        raise NotImplementedError

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
        start = time.perf_counter()
        keys = []
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise InputError(f"pair {i} must be two strings, got {pair!r}"[:200], field="pairs")
            keys.append(pair_key(pair[0], pair[1]))
        self.stats.pairs += len(keys)
        new: list[Pair] = []
        asked: list[Pair] = []  # the new pairs as asked, not as keyed
        seen: set[Pair] = set()
        for key, pair in zip(keys, pairs):
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
        if new:
            for key, pair, result in zip(new, asked, self._judge_new(asked)):
                self._cache[key] = result
                if self.needs_model(*pair):
                    self._model_calls.add(key)
        out = [self._cache[key] for key in keys]
        if self.claim_guard:
            out = self._guard(pairs, out, questions)
        self.stats.seconds += time.perf_counter() - start
        return out

    def _guard(self, pairs: Sequence[Pair], results: list[tuple[float, float]],
               questions: Sequence[str] | None) -> list[tuple[float, float]]:
        """Veto (probability and score 0) every pair whose steps' claims conflict. Applied after
        the cache, because one pair of texts may belong to problems that give different numbers."""
        from equiv.text.claims import claim_check

        guarded = []
        for i, ((a, b), result) in enumerate(zip(pairs, results)):
            if result[0] > 0.0 and claim_check(a, b, questions[i] if questions else "").veto:
                self.stats.guarded += 1
                result = (0.0, 0.0)
            guarded.append(result)
        return guarded

    def pair_verdicts(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[PairVerdict]:
        """Probability and model-forward flag per pair, in order; a cached pair keeps its flag,
        so a count over distinct pairs does not depend on what was asked before."""
        results = self.pair_results(pairs, questions)
        return [
            PairVerdict(prob, pair_key(a, b) in self._model_calls) for (prob, _), (a, b) in zip(results, pairs)
        ]

    def pair_probabilities(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """Equivalence probability per pair, in order (``>= threshold`` means equivalent)."""
        return [prob for prob, _ in self.pair_results(pairs, questions)]

    def pair_scores(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """The continuous score a threshold is swept over, per pair, in order."""
        return [score for _, score in self.pair_results(pairs, questions)]

    def describe(self) -> dict[str, Any]:
        """Settings to record beside results (what exactly judged the pairs)."""
        return {"strategy": self.name, "threshold": self.threshold, "claim_guard": self.claim_guard}


class ExactJudge(CachedJudge):
    """Equivalent iff the texts are equal after whitespace normalisation."""

    name = "exact"

    def __init__(self) -> None:
        super().__init__()
        self.threshold = 0.5

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        self.stats.scored += len(pairs)
        return [(0.0, 0.0)] * len(pairs)  # whitespace-equal pairs were resolved by the shortcut


class LevenshteinJudge(CachedJudge):
    """Equivalent iff ``1 - distance/max(len) > threshold`` (strict, as in the paper).

    ``pair_probabilities`` returns the decision as 1.0/0.0 so the strict ``>`` survives the
    ``>= threshold`` convention of grouping; ``pair_scores`` returns the ratio itself.
    """

    name = "levenshtein"
    exact_shortcut = False  # the baseline is the ratio alone, even for whitespace-only differences
    strict = True

    def __init__(self, threshold: float | None = None) -> None:
        super().__init__()
        self.threshold = _check_threshold(DEFAULT_LEVENSHTEIN_THRESHOLD if threshold is None else threshold, self.name)

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        self.stats.scored += len(pairs)
        out = []
        for a, b in pairs:
            ratio = levenshtein_ratio(a, b)
            out.append((1.0 if ratio > self.threshold else 0.0, ratio))
        return out


class FormulaJudge(CachedJudge):
    """Equivalent iff both steps compute the same normalised formulas (see :mod:`.formula`)."""

    name = "formula"

    def __init__(self) -> None:
        super().__init__()
        self.threshold = 0.5

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        self.stats.scored += len(pairs)
        return [(1.0, 1.0) if formulas_equivalent(a, b) else (0.0, 0.0) for a, b in pairs]


class EmbeddingJudge(CachedJudge):
    """Cosine similarity of sentence embeddings (the SBERT baseline: bundled all-MiniLM-L6-v2).

    Each distinct text is encoded once (embeddings are cached per text, pairs per pair), in
    batches. ``pair_probabilities`` is the cosine clipped at 0; equivalent iff ``>= threshold``.
    """

    name = "embedding"
    learned = True
    exact_shortcut = False  # the SBERT baseline is the cosine alone

    def __init__(
        self,
        model: str | None = None,
        *,
        threshold: float | None = None,
        batch_size: int = 64,
        device: str = "auto",
    ) -> None:
        super().__init__()
        from equiv.backbones import BUNDLED_MINILM, resolve_model_name

        self.threshold = _check_threshold(DEFAULT_EMBEDDING_THRESHOLD if threshold is None else threshold, self.name)
        self.model_name = model or BUNDLED_MINILM
        path = resolve_model_name(self.model_name)
        if not Path(path).exists() and (path.startswith((".", "/", "~")) or Path(path).suffix):
            raise InputError("embedding model directory does not exist", path=path, field="model")
        from sentence_transformers import SentenceTransformer

        self.device = resolve_device(device)
        try:
            self.encoder = SentenceTransformer(path, device=self.device)
        except (OSError, ValueError) as err:
            raise InputError(f"cannot load a sentence-transformers model: {err}".splitlines()[0], path=path, field="model") from None
        self.batch_size = batch_size
        self._embeddings: dict[str, Any] = {}

    def clear_cache(self) -> None:
        super().clear_cache()
        self._embeddings.clear()

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        import torch

        texts = sorted({t for pair in pairs for t in pair} - self._embeddings.keys())
        if texts:
            vectors = self.encoder.encode(
                texts, batch_size=self.batch_size, convert_to_tensor=True, normalize_embeddings=True,
                show_progress_bar=False,
            )
            self.stats.forward_batches += math.ceil(len(texts) / self.batch_size)
            for text, vector in zip(texts, vectors.float().cpu()):
                self._embeddings[text] = vector
        self.stats.scored += len(pairs)
        left = torch.stack([self._embeddings[a] for a, _ in pairs])
        right = torch.stack([self._embeddings[b] for _, b in pairs])
        cosine = (left * right).sum(-1).clamp(-1.0, 1.0).tolist()
        return [(max(c, 0.0), c) for c in cosine]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.model_name}


class ModelJudge(CachedJudge):
    """The trained pair classifier, behind the paper's two-stage check (see module docstring).

    Loaded with :func:`equiv.prune.loading.load_classifier` from an exported Hugging Face
    directory (``config.json`` key ``equiv`` holds the training-time settings) or a Lightning
    checkpoint. ``threshold`` defaults to the export's ``decision_threshold`` (else 0.5),
    ``prefilter`` to its ``prefilter_threshold`` (else 0.75), ``max_length`` to its
    ``max_length`` (else the model's limit); a ``max_length`` beyond what the model's position
    embeddings allow is lowered to that limit with a warning, never run into an index error.
    An ensemble export (:mod:`equiv.judge.ensemble`: ``equiv.members``) loads every member and
    scores each pair with each, feeding each its own input form; the probability is the sigmoid
    of their mean logit, and one forward batch per member is counted.
    """

    name = "model"
    learned = True
    same_step_key = staticmethod(format_key)

    def __init__(
        self,
        path: str | Path,
        *,
        threshold: float | None = None,
        prefilter: float | None = None,
        batch_size: int = 64,
        max_length: int | None = None,
        device: str = "auto",
        dtype: str = "auto",
        claim_guard: bool | None = None,
    ) -> None:
        super().__init__()
        from equiv.prune.loading import load_classifier, model_token_limit

        self.path = str(path)
        self.device = resolve_device(device)
        self.autocast_dtype = resolve_autocast_dtype(dtype, self.device)
        model, tokenizer, settings = load_classifier(path)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.settings = settings
        self.positive_index = int(settings.get("positive_index", 1))
        self.claim_guard = bool(settings.get("claim_guard", False)) if claim_guard is None else bool(claim_guard)
        default_threshold = settings.get("decision_threshold") or DEFAULT_MODEL_THRESHOLD
        self.threshold = _check_threshold(default_threshold if threshold is None else threshold, self.name)
        default_prefilter = settings.get("prefilter_threshold")
        self.prefilter = float(DEFAULT_PREFILTER if default_prefilter is None else default_prefilter)
        if prefilter is not None:
            self.prefilter = float(prefilter)
        if not 0.0 <= self.prefilter <= 1.0:
            raise InputError(f"must be in [0, 1], got {self.prefilter}", field="prefilter")
        if batch_size < 1:
            raise InputError(f"must be >= 1, got {batch_size}", field="batch_size")
        self.batch_size = int(batch_size)
        limit = model_token_limit(self.model, tokenizer)
        wanted = max_length or settings.get("max_length") or limit
        if int(wanted) < 8:
            raise InputError(f"must be >= 8 tokens, got {wanted}", field="max_length")
        if int(wanted) > limit:
            warnings.warn(f"max_length {wanted} is beyond the model's {limit} positions; using {limit}", stacklevel=2)
            wanted = limit
        self.max_length = int(wanted)
        from equiv.judge.ensemble import Member, member_dirs

        self.members = [Member.from_settings(self.model, tokenizer, settings, self.max_length)]
        for extra in member_dirs(path)[1:]:
            m_model, m_tokenizer, m_settings = load_classifier(extra)
            limit = min(self.max_length, model_token_limit(m_model, m_tokenizer))
            self.members.append(Member.from_settings(m_model.to(self.device).eval(), m_tokenizer, m_settings, limit))

    @property
    def mark_differences(self) -> bool:
        """Whether the (first) classifier reads pairs with their differences marked."""
        return self.members[0].mark_differences

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        from equiv.judge.ensemble import score_members

        out: list[tuple[float, float] | None] = [None] * len(pairs)
        to_score: list[int] = []
        for i, (a, b) in enumerate(pairs):
            if not self.needs_model(a, b):
                out[i] = (0.0, 0.0)
                self.stats.prefiltered += 1
            else:
                to_score.append(i)
        if to_score:
            batch = [pairs[i] for i in to_score]
            probs = score_members(self.members, batch, batch_size=self.batch_size, autocast_dtype=self.autocast_dtype)
            self.stats.scored += len(to_score)
            self.stats.forward_batches += math.ceil(len(to_score) / self.batch_size) * len(self.members)
            final = self._final_probabilities(batch, [float(p) for p in probs])
            for i, p in zip(to_score, final):
                out[i] = (p, p)
        return [o for o in out if o is not None]

    def _final_probabilities(self, pairs: list[Pair], probs: list[float]) -> list[float]:
        """What the classifier's probabilities become (themselves; the hybrid judge combines them)."""
        return probs

    def needs_model(self, a: str, b: str) -> bool:
        """The paper's prefilter: a Levenshtein ratio <= ``prefilter`` is "not equivalent" for free."""
        return levenshtein_ratio(a, b) > self.prefilter

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.path, "prefilter": self.prefilter, "max_length": self.max_length,
                "members": len(self.members)}


@dataclass
class PrunerConfig:
    """How search (and ``pairs``) prunes equivalent siblings.

    Attributes:
        strategy: which judge; ``none`` turns pruning off. ``model`` uses the judge the export
            describes: an export with a stored combiner (``fit --hybrid true``) is a ``hybrid``
            judge, anything else the plain classifier; ``hybrid`` insists on the combiner.
        model: exported judge directory or Lightning checkpoint (``model``, ``hybrid``), or a
            sentence-transformers model (``embedding``; default the bundled all-MiniLM-L6-v2).
        threshold: equivalent iff probability >= threshold; None = the strategy's default
            (levenshtein 0.95, embedding 0.9, model: the export's ``decision_threshold`` or 0.5).
        prefilter: Levenshtein ratio <= prefilter is "not equivalent" without the model; None =
            the export's ``prefilter_threshold``, else the paper's 0.75.
        batch_size: pairs per forward pass.
        max_length: token limit per pair; None = the export's, else the model's limit.
        device: ``auto`` (CUDA if visible), ``cpu``, ``cuda``, ``cuda:N``.
        dtype: ``auto`` (bf16 autocast on CUDA, fp32 on CPU), ``float32``, ``bfloat16``, ``float16``.
        grouping: ``greedy`` (the paper: merge into the first matching class) or ``transitive``.
        representative: which member keeps a class: ``first``, highest ``prior``, or highest ``score``.
        claim_guard: veto merges whose steps state different numbers or swap a problem's entity
            (:mod:`equiv.text.claims`); None = the export's ``claim_guard`` for ``model``/``hybrid``
            (off for the other strategies).
    """

    strategy: Literal["none", "exact", "levenshtein", "embedding", "formula", "model", "hybrid"] = "none"
    model: str | None = None
    threshold: float | None = None
    prefilter: float | None = None
    batch_size: int = 64
    max_length: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    grouping: Literal["greedy", "transitive"] = "greedy"
    representative: Literal["first", "prior", "score"] = "first"
    claim_guard: bool | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InputError(f"unknown strategy {self.strategy!r}; choose from {', '.join(STRATEGIES)}", field="strategy")
        if self.grouping not in ("greedy", "transitive"):
            raise InputError(f"unknown grouping {self.grouping!r}; choose greedy or transitive", field="grouping")
        if self.representative not in ("first", "prior", "score"):
            raise InputError(
                f"unknown representative rule {self.representative!r}; choose first, prior or score", field="representative"
            )
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputError(f"must be a positive integer, got {self.batch_size!r}", field="batch_size")
        if self.threshold is not None:
            _check_threshold(self.threshold, self.strategy)
        if self.prefilter is not None and not 0.0 <= float(self.prefilter) <= 1.0:
            raise InputError(f"must be in [0, 1], got {self.prefilter}", field="prefilter")


def build_judge(cfg: PrunerConfig) -> CachedJudge | None:
    """The judge ``cfg`` describes, or None for ``strategy: none``.

    Options that would silently do nothing (a threshold for ``exact``/``formula``, a prefilter
    for anything but ``model``, a model for rule-based strategies) are errors, not no-ops.
    """
    s = cfg.strategy
    if s == "none":
        if cfg.claim_guard:
            raise InputError("strategy 'none' merges nothing; there is nothing for the claim guard to veto",
                             field="claim_guard")
        return None
    judge = _build_judge(cfg)
    if cfg.claim_guard is not None and s not in ("model", "hybrid"):
        judge.claim_guard = bool(cfg.claim_guard)
    return judge


def _build_judge(cfg: PrunerConfig) -> CachedJudge:
    s = cfg.strategy
    if cfg.prefilter is not None and s not in ("model", "hybrid"):
        raise InputError(f"only the model strategy has a prefilter (strategy is {s!r})", field="prefilter")
    if cfg.model is not None and s not in ("model", "hybrid", "embedding"):
        raise InputError(f"strategy {s!r} takes no model", field="model")
    if cfg.threshold is not None and s in ("exact", "formula"):
        raise InputError(f"strategy {s!r} is a 0/1 rule and takes no threshold", field="threshold")
    if s == "exact":
        return ExactJudge()
    if s == "formula":
        return FormulaJudge()
    if s == "levenshtein":
        return LevenshteinJudge(cfg.threshold)
    if s == "embedding":
        return EmbeddingJudge(cfg.model, threshold=cfg.threshold, batch_size=cfg.batch_size, device=cfg.device)
    if cfg.model is None:
        raise InputError(f"the {s} strategy needs a judge: an exported directory or a .ckpt file", field="model")
    from equiv.prune.loading import stored_judge_kind

    kind = stored_judge_kind(cfg.model)
    if s == "hybrid" and kind != "hybrid":
        raise InputError(
            "this judge has no hybrid combiner (equiv.hybrid in config.json); train it with --hybrid true "
            "or use --strategy model", path=cfg.model, field="strategy")
    judge_class = HybridJudge if kind == "hybrid" else ModelJudge
    return judge_class(
        cfg.model,
        threshold=cfg.threshold,
        prefilter=cfg.prefilter,
        batch_size=cfg.batch_size,
        max_length=cfg.max_length,
        device=cfg.device,
        dtype=cfg.dtype,
        claim_guard=cfg.claim_guard,
    )


class HybridJudge(ModelJudge):
    """The classifier's logit and rule features combined by the export's stored combiner.

    Same two-stage check, batching, caching and stats as :class:`ModelJudge`: pairs equal up to
    formatting are equivalent and a ratio <= ``prefilter`` is not, for free; every other pair costs
    one classifier forward, and its probability is then replaced by the combiner's
    (:class:`equiv.judge.hybrid.Combiner`, fitted on the calibration split). ``threshold``
    defaults to the combiner's own, not the raw model's ``decision_threshold``.
    """

    name = "hybrid"

    def __init__(self, path: str | Path, *, threshold: float | None = None, **kwargs: Any) -> None:
        from equiv.judge.hybrid import HYBRID_KEY, Combiner

        super().__init__(path, threshold=threshold, **kwargs)
        if HYBRID_KEY not in self.settings:
            raise InputError("this judge has no hybrid combiner (equiv.hybrid in config.json)", path=path, field="model")
        self.combiner = Combiner.from_dict(self.settings[HYBRID_KEY], source=str(Path(path) / "config.json"))
        self.raw_threshold = float(self.settings.get("decision_threshold") or DEFAULT_MODEL_THRESHOLD)
        self.threshold = _check_threshold(self.combiner.threshold if threshold is None else threshold, self.name)

    def _final_probabilities(self, pairs: list[Pair], probs: list[float]) -> list[float]:
        from equiv.judge.hybrid import pair_features

        return self.combiner.probabilities([pair_features(a, b, p) for (a, b), p in zip(pairs, probs)])

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "raw_threshold": self.raw_threshold,
                "combiner": dict(zip(self.combiner.features, self.combiner.weights), bias=self.combiner.bias)}
