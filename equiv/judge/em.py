"""The EM E-step as pure functions: pairs + a scorer -> refined pairs (no Lightning here).

EquivPruner's motivation: a pair labelled "not equivalent" often shares sentences that are
equivalent on their own, and those shared parts blur what the label is about. Between epochs the
current judge scores sentence sub-pairs of each training sample; sub-pairs it calls equivalent
with probability above a threshold are removed from the sample, and the next epoch trains on what
is left (the M-step). The paper leaves four choices open; ours, with the reasons, are in
docs/training.md ("EM refinement") and in :class:`EMConfig`.

Everything here is deterministic given the scorer's probabilities (ties broken by sentence
position), which is what makes the refined set identical on every DDP rank and after a resume.

The flow is ``plan_samples`` (split, choose which sub-pairs to score) -> one flat list of
sub-pairs -> ``scorer`` (one batched call) -> ``apply_scores`` (match, remove, rejoin) ->
``summarise``. :func:`e_step` runs all of it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterable, Mapping, Sequence

from equiv.data.records import PairRecord
from equiv.data.sentences import split_sentences
from equiv.errors import InputError

Pair = tuple[str, str]
Scorer = Callable[[Sequence[Pair]], Sequence[float]]
Splitter = Callable[[str], list[str]]

PAIRINGS = ("greedy", "aligned")
ONE_SIDE_EMPTY = ("keep", "drop")
BOTH_SIDES_EMPTY = ("drop", "keep")

# Outcome statuses.
UNCHANGED = "unchanged"  # examined, nothing above the threshold
CHANGED = "changed"  # sentences removed, both sides non-empty
DROPPED = "dropped"  # removed from the training set
ONE_SIDE_EMPTY_KEPT = "one_side_empty_kept"  # refinement would empty one side; sample left as it was
BOTH_SIDES_EMPTY_KEPT = "both_sides_empty_kept"  # every sentence matched; sample left as it was
SKIPPED_LABEL = "skipped_label"  # its label is not refined
SKIPPED_SINGLE = "skipped_single"  # one sentence per side: the only sub-pair is the sample itself
SKIPPED_LONG = "skipped_long"  # more sentences on a side than max_sentences


@dataclass(frozen=True)
class EMConfig:
    """How the E-step refines a training sample.

    Attributes:
        threshold: a sub-pair is "confidently equivalent" when its probability is strictly above
            this. High by default: removing text is only safe when the judge is sure.
        pairing: ``"greedy"`` scores every sentence of side 1 against every sentence of side 2
            and takes a one-to-one matching greedily by probability (highest first, ties by
            position); it finds shared sentences even when the two steps order them differently.
            ``"aligned"`` scores only sentence i against sentence i (cheaper: min(n, m) sub-pairs
            instead of n*m), which assumes the steps run in parallel.
        max_sentences: samples with more sentences than this on either side are left unchanged,
            which bounds the E-step at ``max_sentences**2`` sub-pairs per sample.
        refine_labels: binary labels whose samples are refined. Default ``(0,)``: the paper's
            case is a not-equivalent pair that contains equivalent parts; removing those focuses
            the sample on what differs and keeps the label true. In an equivalent pair removing
            equivalent parts leaves a remainder that is still equivalent but harder, and when every
            part matches the sample would vanish, so positives are left alone unless asked.
        one_side_empty: when the matched sentences cover one side entirely but not the other,
            ``"keep"`` leaves the sample unchanged (one side is a part of the other; "extra
            content" is exactly what makes such a pair not equivalent, and a pair with an empty
            side is not a pair), ``"drop"`` removes it.
        both_sides_empty: when every sentence on both sides is matched, ``"drop"`` removes the
            sample (it carried no signal beyond the equivalent parts, and for label 0 the judge
            and the label disagree on every part), ``"keep"`` leaves it unchanged.
        split_unpunctuated: also split where a capitalised sentence starter follows a word with
            no punctuation (joined solution lines, as in GSM8K-style steps); see
            :func:`equiv.data.sentences.sentence_spans`.
    """

    threshold: float = 0.9
    pairing: str = "greedy"
    max_sentences: int = 8
    refine_labels: tuple[int, ...] = (0,)
    one_side_empty: str = "keep"
    both_sides_empty: str = "drop"
    split_unpunctuated: bool = True

    def splitter(self) -> "Splitter":
        """The sentence splitter these settings ask for."""
        return partial(split_sentences, unpunctuated=self.split_unpunctuated)

    def __post_init__(self) -> None:
        object.__setattr__(self, "refine_labels", tuple(int(x) for x in self.refine_labels))
        if not (isinstance(self.threshold, (int, float)) and 0.0 <= float(self.threshold) < 1.0):
            raise InputError(f"must be a probability in [0, 1), got {self.threshold!r}", field="em.threshold")
        if self.pairing not in PAIRINGS:
            raise InputError(f"must be one of {PAIRINGS}, got {self.pairing!r}", field="em.pairing")
        if not isinstance(self.max_sentences, int) or self.max_sentences < 1:
            raise InputError(f"must be a positive integer, got {self.max_sentences!r}", field="em.max_sentences")
        if not self.refine_labels or set(self.refine_labels) - {0, 1}:
            raise InputError(f"must be a non-empty subset of [0, 1], got {list(self.refine_labels)}", field="em.refine_labels")
        if self.one_side_empty not in ONE_SIDE_EMPTY:
            raise InputError(f"must be one of {ONE_SIDE_EMPTY}, got {self.one_side_empty!r}", field="em.one_side_empty")
        if self.both_sides_empty not in BOTH_SIDES_EMPTY:
            raise InputError(
                f"must be one of {BOTH_SIDES_EMPTY}, got {self.both_sides_empty!r}", field="em.both_sides_empty"
            )


@dataclass(frozen=True)
class SamplePlan:
    """One sample split into sentences, with the sub-pairs (cells ``(i, j)``) to score."""

    index: int
    sentences1: tuple[str, ...]
    sentences2: tuple[str, ...]
    cells: tuple[tuple[int, int], ...]
    skip: str | None = None  # a SKIPPED_* status when the sample is not examined


@dataclass(frozen=True)
class SampleOutcome:
    """What the E-step did to one sample. ``sentence1/2`` are the texts to train on (None if dropped)."""

    index: int
    status: str
    sentence1: str | None
    sentence2: str | None
    removed: tuple[tuple[int, int, float], ...] = ()  # matched (i, j, probability) sub-pairs

    @property
    def examined(self) -> bool:
        return not self.status.startswith("skipped")

    @property
    def sentences_removed(self) -> int:
        return 2 * len(self.removed) if self.status == CHANGED else 0


@dataclass
class EStepResult:
    outcomes: list[SampleOutcome]
    probabilities: list[float]  # every scored sub-pair, in plan order
    stats: dict[str, float] = field(default_factory=dict)


def plan_samples(
    pairs: Sequence[Pair],
    labels: Sequence[int | None],
    settings: EMConfig,
    split: Splitter | None = None,
) -> list[SamplePlan]:
    """Split each sample and decide which sentence sub-pairs to score."""
    split = split or settings.splitter()
    if len(pairs) != len(labels):
        raise ValueError(f"{len(pairs)} pairs but {len(labels)} labels")
    plans = []
    for index, ((text1, text2), label) in enumerate(zip(pairs, labels)):
        s1, s2 = tuple(split(text1)), tuple(split(text2))
        skip = None
        if label not in settings.refine_labels:
            skip = SKIPPED_LABEL
        elif len(s1) > settings.max_sentences or len(s2) > settings.max_sentences:
            skip = SKIPPED_LONG
        elif len(s1) <= 1 and len(s2) <= 1:
            skip = SKIPPED_SINGLE
        if skip is not None:
            cells: tuple[tuple[int, int], ...] = ()
        elif settings.pairing == "aligned":
            cells = tuple((i, i) for i in range(min(len(s1), len(s2))))
        else:
            cells = tuple((i, j) for i in range(len(s1)) for j in range(len(s2)))
        plans.append(SamplePlan(index, s1, s2, cells, skip))
    return plans


def subpair_texts(plans: Iterable[SamplePlan]) -> list[Pair]:
    """The flat list of sentence sub-pairs to score, in plan order (whitespace trimmed)."""
    return [(p.sentences1[i].strip(), p.sentences2[j].strip()) for p in plans for i, j in p.cells]


def match_subpairs(
    cells: Sequence[tuple[int, int]], probabilities: Sequence[float], threshold: float
) -> list[tuple[int, int, float]]:
    """A one-to-one matching of cells above ``threshold``, greedy by probability.

    Highest probability first; ties go to the smaller ``(i, j)`` so the result does not depend on
    input order. For aligned cells (all ``i == j``) this is simply every cell above the threshold.
    """
    ranked = sorted(
        ((float(p), i, j) for (i, j), p in zip(cells, probabilities) if float(p) > threshold),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    used1: set[int] = set()
    used2: set[int] = set()
    matched = []
    for p, i, j in ranked:
        if i in used1 or j in used2:
            continue
        used1.add(i)
        used2.add(j)
        matched.append((i, j, p))
    return sorted(matched, key=lambda t: (t[0], t[1]))


def rejoin(sentences: Sequence[str], removed: set[int]) -> str:
    """The kept sentences joined back (the splitter keeps whitespace), trimmed at the ends."""
    return "".join(s for k, s in enumerate(sentences) if k not in removed).strip()


def apply_scores(
    plans: Sequence[SamplePlan],
    pairs: Sequence[Pair],
    probabilities: Sequence[float],
    settings: EMConfig,
) -> list[SampleOutcome]:
    """Remove each sample's matched sub-pairs, given probabilities in :func:`subpair_texts` order."""
    expected = sum(len(p.cells) for p in plans)
    if len(probabilities) != expected:
        raise ValueError(f"scorer returned {len(probabilities)} probabilities for {expected} sub-pairs")
    outcomes = []
    offset = 0
    for plan, (text1, text2) in zip(plans, pairs):
        probs = probabilities[offset : offset + len(plan.cells)]
        offset += len(plan.cells)
        if plan.skip is not None:
            outcomes.append(SampleOutcome(plan.index, plan.skip, text1, text2))
            continue
        matched = tuple(match_subpairs(plan.cells, probs, settings.threshold))
        if not matched:
            outcomes.append(SampleOutcome(plan.index, UNCHANGED, text1, text2))
            continue
        new1 = rejoin(plan.sentences1, {i for i, _, _ in matched})
        new2 = rejoin(plan.sentences2, {j for _, j, _ in matched})
        if new1 and new2:
            outcomes.append(SampleOutcome(plan.index, CHANGED, new1, new2, matched))
        elif not new1 and not new2:
            if settings.both_sides_empty == "drop":
                outcomes.append(SampleOutcome(plan.index, DROPPED, None, None, matched))
            else:
                outcomes.append(SampleOutcome(plan.index, BOTH_SIDES_EMPTY_KEPT, text1, text2, matched))
        elif settings.one_side_empty == "drop":
            outcomes.append(SampleOutcome(plan.index, DROPPED, None, None, matched))
        else:
            outcomes.append(SampleOutcome(plan.index, ONE_SIDE_EMPTY_KEPT, text1, text2, matched))
    return outcomes


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of an ascending list (numpy's default method)."""
    if not sorted_values:
        return float("nan")
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarise(outcomes: Sequence[SampleOutcome], probabilities: Sequence[float], threshold: float) -> dict[str, float]:
    """Per-E-step statistics, keyed as logged (without the ``em/`` prefix)."""
    probs = sorted(float(p) for p in probabilities)
    stats: dict[str, float] = {
        "samples_examined": sum(o.examined for o in outcomes),
        "samples_changed": sum(o.status == CHANGED for o in outcomes),
        "sentences_removed": sum(o.sentences_removed for o in outcomes),
        "samples_dropped": sum(o.status == DROPPED for o in outcomes),
        "samples_one_side_empty_kept": sum(o.status == ONE_SIDE_EMPTY_KEPT for o in outcomes),
        "samples_skipped_long": sum(o.status == SKIPPED_LONG for o in outcomes),
        "subpairs_scored": len(probs),
        "subpairs_above_threshold": sum(p > threshold for p in probs),
    }
    if probs:
        stats.update(
            prob_mean=sum(probs) / len(probs),
            prob_min=probs[0],
            prob_p50=_quantile(probs, 0.5),
            prob_p90=_quantile(probs, 0.9),
            prob_p99=_quantile(probs, 0.99),
            prob_max=probs[-1],
        )
    return stats


def e_step(
    pairs: Sequence[Pair],
    labels: Sequence[int | None],
    scorer: Scorer,
    settings: EMConfig,
    split: Splitter | None = None,
) -> EStepResult:
    """Refine ``pairs`` (binary ``labels``) with one batched ``scorer`` call over all sub-pairs."""
    plans = plan_samples(pairs, labels, settings, split)
    texts = subpair_texts(plans)
    probabilities = [float(p) for p in scorer(texts)] if texts else []
    outcomes = apply_scores(plans, pairs, probabilities, settings)
    return EStepResult(outcomes, probabilities, summarise(outcomes, probabilities, settings.threshold))


# --- Refinement state: overrides relative to the original training records -------------------
#
# The state is what a checkpoint stores: for each original index either new texts or "dropped".
# Storing texts (not sentence indices) keeps a resume exact even if the splitter changes later.

Overrides = Mapping[int, Pair | None]


def apply_overrides(originals: Sequence[PairRecord], overrides: Overrides) -> list[PairRecord]:
    """The training records after refinement: originals with overridden texts, dropped ones left out."""
    out = []
    for index, record in enumerate(originals):
        if index not in overrides:
            out.append(record)
        elif overrides[index] is not None:
            s1, s2 = overrides[index]  # type: ignore[misc]
            out.append(record.with_sentences(s1, s2))
    return out


def current_pairs(originals: Sequence[PairRecord], overrides: Overrides) -> tuple[list[int], list[Pair]]:
    """Original indices and current texts of the samples still in the training set."""
    indices, pairs = [], []
    for index, record in enumerate(originals):
        text = overrides.get(index, (record.sentence1, record.sentence2))
        if text is not None:
            indices.append(index)
            pairs.append(text)
    return indices, pairs


def merge_outcomes(
    originals: Sequence[PairRecord],
    previous: Overrides,
    indices: Sequence[int],
    outcomes: Sequence[SampleOutcome],
    cumulative: bool,
) -> dict[int, Pair | None]:
    """New overrides after an E-step whose ``outcomes[k]`` belongs to original ``indices[k]``.

    Non-cumulative: the E-step ran on the originals, so the overrides are exactly its changes.
    Cumulative: it ran on the current texts, so earlier changes stay and new ones compose.
    """
    result: dict[int, Pair | None] = dict(previous) if cumulative else {}
    for index, outcome in zip(indices, outcomes):
        if outcome.status == DROPPED:
            result[index] = None
        elif outcome.status == CHANGED:
            result[index] = (outcome.sentence1, outcome.sentence2)  # type: ignore[assignment]
    # An override equal to the original text is no override.
    for index in [i for i, t in result.items() if t is not None]:
        record = originals[index]
        if result[index] == (record.sentence1, record.sentence2):
            del result[index]
    return result


def fingerprint(records: Sequence[PairRecord]) -> str:
    """A hash of the original training set, so a resume onto different data fails loudly."""
    digest = hashlib.sha256()
    for record in records:
        for part in (record.sentence1, record.sentence2, str(record.result)):
            digest.update(part.encode("utf-8"))
            digest.update(b"\x00")
    return digest.hexdigest()
