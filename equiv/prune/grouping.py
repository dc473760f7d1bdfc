"""Group sibling candidates into equivalence classes, each kept by one representative.

Pure functions: :func:`group_equivalent` turns the verdicts of the pairs a mode reads into
classes (whether each pair merges is the judge's decision policy's,
:func:`equiv.judge.decide.decide`; grouping never compares a probability itself). Which pairs
are asked, and how they are batched across families, is :func:`equiv.prune.boundary.group_families`'
(every judge's ``group``): greedy grouping asks only each candidate against the representatives
before it.

Rules (all deterministic):

- **Processing order.** ``representative="first"``: candidate index order. ``"prior"``:
  descending prior, ``"score"``: descending score (e.g. PRM value); ties by index.
- **greedy** (the paper's): walk candidates in processing order; each joins the FIRST existing
  class (in creation order) whose representative it matches (the pair's verdict merges), otherwise
  it founds a new class and is its representative. A candidate is compared with
  representatives only, never with other members.
- **transitive**: classes are the connected components of the "matches" graph over all pairs,
  so A~B and B~C put A, B, C together even when A and C do not match.
- **Representative** of a class: its first member in processing order, i.e. the lowest index,
  the highest prior, or the highest score. Under greedy this is also the candidate that founded
  the class.
- ``classes`` are ordered by their representative's processing rank; within a class the
  representative comes first, then the members in processing order.
- ``prob_to_representative[i]`` is the judged probability of the pair (i, representative of i),
  None for representatives themselves (and when no probabilities are given). Under transitive
  grouping that pair need not merge itself (the member joined through another member).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

GroupingMode = Literal["greedy", "transitive"]
RepresentativeRule = Literal["first", "prior", "score"]


@dataclass(frozen=True)
class Grouping:
    """Equivalence classes of ``n`` candidates (see the module docstring for the rules)."""

    classes: list[list[int]]
    representatives: list[int]
    representative_of: list[int]
    prob_to_representative: list[float | None]

    @property
    def n(self) -> int:
        return len(self.representative_of)

    @property
    def pruned(self) -> list[int]:
        """Candidates merged into another's class (not representatives), ascending."""
        return [i for i, r in enumerate(self.representative_of) if r != i]

    def to_dict(self) -> dict[str, Any]:
        return {
            "classes": self.classes,
            "representatives": self.representatives,
            "representative_of": self.representative_of,
            "prob_to_representative": self.prob_to_representative,
        }


def sibling_pairs(n: int) -> list[tuple[int, int]]:
    """All index pairs ``(i, j)`` with ``i < j`` (row-major): the pairs a judge must see."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def processing_order(
    n: int, representative: str, priors: Sequence[float] | None, scores: Sequence[float] | None
) -> list[int]:
    """Candidates ``0..n-1`` in the order grouping walks them (the module docstring's rule)."""
    if representative == "first":
        return list(range(n))
    if representative not in ("prior", "score"):
        raise ValueError(f"representative must be first, prior or score, got {representative!r}")
    values = priors if representative == "prior" else scores
    name = "priors" if representative == "prior" else "scores"
    if values is None:
        raise ValueError(f"representative={representative!r} needs {name}")
    if len(values) != n:
        raise ValueError(f"{len(values)} {name} for {n} candidates")
    for i, v in enumerate(values):
        if v is None or not isinstance(v, (int, float)) or math.isnan(v):
            raise ValueError(f"{name}[{i}] is {v!r}; every candidate needs a number")
    return sorted(range(n), key=lambda i: (-float(values[i]), i))


def _lookup(values: Mapping[tuple[int, int], Any], i: int, j: int) -> Any:
    key = (i, j) if i < j else (j, i)
    if key in values:
        return values[key]
    if (key[1], key[0]) in values:
        return values[(key[1], key[0])]
    raise KeyError(f"no verdict for candidate pair {key}; pass one for every pair of sibling_pairs(n)")


def group_equivalent(
    n: int,
    merged: Mapping[tuple[int, int], bool],
    *,
    probs: Mapping[tuple[int, int], float | None] | None = None,
    mode: GroupingMode = "greedy",
    representative: RepresentativeRule = "first",
    priors: Sequence[float] | None = None,
    scores: Sequence[float] | None = None,
) -> Grouping:
    """Equivalence classes of candidates ``0..n-1`` given which pairs merge.

    ``merged`` maps ``(i, j)`` (either order) to whether the judge's policy merges i and j;
    ``probs`` (optional, same keys) gives each pair's probability for ``prob_to_representative``
    (None where a rule decided the pair unscored).
    Every pair the chosen mode looks at must be present (all of :func:`sibling_pairs` is always
    enough).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if mode not in ("greedy", "transitive"):
        raise ValueError(f"mode must be greedy or transitive, got {mode!r}")
    order = processing_order(n, representative, priors, scores)
    rank = {c: r for r, c in enumerate(order)}
    if mode == "greedy":
        classes: list[list[int]] = []
        for c in order:
            for members in classes:
                if bool(_lookup(merged, members[0], c)):
                    members.append(c)
                    break
            else:
                classes.append([c])
    else:
        parent = list(range(n))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for i, j in sibling_pairs(n):
            if bool(_lookup(merged, i, j)):
                ri, rj = find(i), find(j)
                if ri != rj:
                    # The root is the member earliest in processing order: the representative.
                    if rank[ri] < rank[rj]:
                        parent[rj] = ri
                    else:
                        parent[ri] = rj
        by_root: dict[int, list[int]] = {}
        for c in order:
            by_root.setdefault(find(c), []).append(c)
        classes = sorted(by_root.values(), key=lambda members: rank[members[0]])
    representatives = [members[0] for members in classes]
    representative_of = [0] * n
    prob_to_rep: list[float | None] = [None] * n
    for members in classes:
        rep = members[0]
        for m in members:
            representative_of[m] = rep
            if m != rep and probs is not None:
                prob = _lookup(probs, m, rep)  # None: a rule decided the pair, no model scored it
                prob_to_rep[m] = None if prob is None else float(prob)
    return Grouping(classes, representatives, representative_of, prob_to_rep)
