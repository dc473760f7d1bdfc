"""Levenshtein ratio and whitespace normalisation: the cheap checks in front of every judge.

The ratio is EquivPruner's: ``1 - distance(a, b) / max(len(a), len(b))`` (rapidfuzz's
``Levenshtein.normalized_similarity``), *not* python-Levenshtein's ``ratio``, which is an indel
ratio and gives systematically higher values. The paper's prefilter treats a pair with ratio
<= 0.75 as not equivalent without calling the model; the ``levenshtein`` baseline merges a pair
when the ratio is > 0.95.
"""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein

# Two sibling steps that differ only in spacing or line breaks are the same step: the key the
# ``exact`` strategy compares and the model strategy's first, free check (owned by equiv.text.normalize).
from equiv.text.normalize import normalise_whitespace

__all__ = ["levenshtein_ratio", "normalise_whitespace"]


def levenshtein_ratio(a: str, b: str) -> float:
    """``1 - distance / max(len(a), len(b))``; 1.0 for two empty strings."""
    return float(Levenshtein.normalized_similarity(a, b))

