"""Pairs to label, the MathEquiv way: a Levenshtein window, a split by problem, a balanced sample.

Pure functions over pair rows (dicts with ``sentence1``, ``sentence2``, ``levenshtein_ratio`` and a
problem: ``problem``, else the ``id`` without its last ``-`` part, as
:func:`equiv.data.records.problem_key` reads it). The order the paper followed, and this module's:

1. :func:`split_by_problem` -- problems, not pairs, go to ``train`` / ``valid`` / ``test``
   (8:1:1 by default), *before* anything else, so no problem is in two splits;
2. :func:`in_window` -- keep a pair when its Levenshtein ratio is in ``[low, high]`` (the paper's
   [0.75, 0.99]: near-identical pairs teach nothing and very different ones are not worth a label);
3. :func:`balanced_sample` -- a seeded sample of each split, of a size in proportion to the split.

**What "balanced" means for pairs nobody has labelled yet.** The paper balanced a sample it does
not describe further; before labelling, nothing but the texts is known. So the sample is balanced
over what *is* known and most shapes the labels: the Levenshtein ratio (equal-width bins over the
window, each bin given an equal share: ratio is the strongest single predictor of equivalence,
so a uniform draw would be dominated by whichever ratio band the policy's siblings crowd) and the
problem (within a bin, problems take turns, and ``per_problem`` caps any one problem: a problem
with a wide tree would otherwise fill the split with near-copies of its own steps). A bin with
fewer pairs than its share gives all it has; the others fill the rest in turn.

Everything is deterministic in ``seed``: the same pairs and seed give the same files.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Mapping, Sequence

from equiv.errors import InputError, check_fraction

PAPER_WINDOW = (0.75, 0.99)
PAPER_SPLIT = (8, 1, 1)
SPLIT_NAMES = ("train", "valid", "test")
DEFAULT_BINS = 5

Pair = Mapping[str, Any]


def pair_problem(pair: Pair) -> str:
    """The problem a pair belongs to: ``problem``, else its ``id`` without the last ``-<k>`` part."""
    problem = pair.get("problem")
    if isinstance(problem, str) and problem:
        return problem
    rid = pair.get("id")
    if isinstance(rid, str) and "-" in rid:
        return rid.rsplit("-", 1)[0]
    raise InputError("has neither 'problem' nor an id of the form <problem>-<k>; cannot split by problem",
                     field="problem")


def check_window(low: float, high: float) -> tuple[float, float]:
    """``(low, high)`` as floats, refusing anything but ``0 <= low <= high <= 1`` in one line."""
    low, high = check_fraction(low, "window"), check_fraction(high, "window")
    if low > high:
        raise InputError(f"low {low} is above high {high}", field="window")
    return low, high


def in_window(pairs: Sequence[Pair], low: float, high: float) -> list[Pair]:
    """The pairs whose ``levenshtein_ratio`` is in ``[low, high]`` (both ends included, as in the paper)."""
    low, high = check_window(low, high)
    return [p for p in pairs if low <= float(p["levenshtein_ratio"]) <= high]


def split_sizes(n: int, weights: Sequence[int]) -> list[int]:
    """``n`` items shared in proportion to ``weights`` by largest remainder (ties to the earlier split):
    the sizes sum to ``n``, and 10 problems at 8:1:1 give exactly 8, 1, 1."""
    if len(weights) != len(SPLIT_NAMES) or any(not isinstance(w, int) or w < 0 for w in weights) or sum(weights) == 0:
        raise InputError(f"needs three non-negative integer weights, not all 0, got {list(weights)}", field="split")
    total = sum(weights)
    exact = [n * w / total for w in weights]
    sizes = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in order[: n - sum(sizes)]:
        sizes[i] += 1
    return sizes


def split_by_problem(pairs: Sequence[Pair], weights: Sequence[int] = PAPER_SPLIT, *, seed: int = 0
                     ) -> dict[str, list[Pair]]:
    """``{"train": [...], "valid": [...], "test": [...]}``: the problems (sorted, then shuffled with
    ``seed``) cut by :func:`split_sizes`; every pair goes where its problem went, in input order."""
    problems = sorted({pair_problem(p) for p in pairs})
    random.Random(f"split:{seed}").shuffle(problems)
    where: dict[str, str] = {}
    start = 0
    for name, size in zip(SPLIT_NAMES, split_sizes(len(problems), weights)):
        where.update((problem, name) for problem in problems[start:start + size])
        start += size
    out: dict[str, list[Pair]] = {name: [] for name in SPLIT_NAMES}
    for pair in pairs:
        out[where[pair_problem(pair)]].append(pair)
    return out


def _ratio_bin(ratio: float, low: float, high: float, bins: int) -> int:
    if high <= low:
        return 0
    return min(bins - 1, max(0, int((ratio - low) / (high - low) * bins)))


def _problems_take_turns(pairs: list[Pair], rng: random.Random) -> list[Pair]:
    """The pairs reordered so problems take turns (problem order and each problem's pairs shuffled)."""
    by_problem: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_problem[pair_problem(pair)].append(pair)
    queues = [by_problem[k] for k in sorted(by_problem)]
    rng.shuffle(queues)
    for queue in queues:
        rng.shuffle(queue)
    out: list[Pair] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        out.extend(q[turn] for q in queues if turn < len(q))
    return out


def balanced_sample(pairs: Sequence[Pair], size: int | None, *, per_problem: int | None = None,
                    window: tuple[float, float] = PAPER_WINDOW, bins: int = DEFAULT_BINS, seed: int = 0
                    ) -> list[Pair]:
    """At most ``size`` pairs (all when ``None``), balanced over ratio bins and problems, at most
    ``per_problem`` of any one problem (module docstring); returned in bin-and-turn order."""
    if size is not None and size < 0:
        raise InputError(f"must be at least 0, got {size}", field="sample")
    if per_problem is not None and per_problem < 1:
        raise InputError(f"must be at least 1, got {per_problem}", field="per_problem")
    if bins < 1:
        raise InputError(f"must be at least 1, got {bins}", field="bins")
    low, high = check_window(*window)
    rng = random.Random(f"sample:{seed}")
    binned: list[list[Pair]] = [[] for _ in range(bins)]
    for pair in pairs:
        binned[_ratio_bin(float(pair["levenshtein_ratio"]), low, high, bins)].append(pair)
    queues = [_problems_take_turns(b, rng) for b in binned]
    taken: list[Pair] = []
    count: dict[str, int] = defaultdict(int)
    limit = len(pairs) if size is None else size
    positions = [0] * bins
    while len(taken) < limit and any(pos < len(q) for pos, q in zip(positions, queues)):
        for b, queue in enumerate(queues):  # one pair from each bin per round: equal shares
            while positions[b] < len(queue):
                pair = queue[positions[b]]
                positions[b] += 1
                problem = pair_problem(pair)
                if per_problem is None or count[problem] < per_problem:
                    count[problem] += 1
                    taken.append(pair)
                    break
            if len(taken) >= limit:
                break
    return taken


def sample_splits(splits: Mapping[str, Sequence[Pair]], total: int | None, weights: Sequence[int], *,
                  per_problem: int | None = None, window: tuple[float, float] = PAPER_WINDOW,
                  bins: int = DEFAULT_BINS, seed: int = 0) -> dict[str, list[Pair]]:
    """:func:`balanced_sample` of each split, ``total`` shared by the split ``weights`` (80k/10k/10k
    for 100k at 8:1:1, as the paper); ``None`` keeps every pair (the cap per problem still applies)."""
    sizes = split_sizes(total, weights) if total is not None else [None] * len(SPLIT_NAMES)
    return {name: balanced_sample(splits[name], size, per_problem=per_problem, window=window, bins=bins,
                                  seed=seed)
            for name, size in zip(SPLIT_NAMES, sizes)}
