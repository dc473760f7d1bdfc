"""Equivalence pruning runtime: strategies behind one ``PairJudge`` interface, and grouping.

Typical use (see docs/pruning.md)::

    from equiv.prune import PrunerConfig, build_judge, group_siblings
    judge = build_judge(PrunerConfig(strategy="model", model="runs/judge/export"))
    grouping = group_siblings(steps, judge)        # classes + representatives

Importing this package does not import torch; the model and embedding strategies load it
when built.
"""

from equiv.prune.grouping import Grouping, group_equivalent, group_siblings, sibling_pairs
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace
from equiv.prune.strategies import (
    CachedJudge,
    EmbeddingJudge,
    ExactJudge,
    FormulaJudge,
    JudgeStats,
    LevenshteinJudge,
    HybridJudge,
    ModelJudge,
    PairVerdict,
    PrunerConfig,
    build_judge,
)

__all__ = [
    "CachedJudge",
    "EmbeddingJudge",
    "ExactJudge",
    "FormulaJudge",
    "Grouping",
    "JudgeStats",
    "LevenshteinJudge",
    "HybridJudge",
    "ModelJudge",
    "PairVerdict",
    "PrunerConfig",
    "build_judge",
    "group_equivalent",
    "group_siblings",
    "levenshtein_ratio",
    "normalise_whitespace",
    "sibling_pairs",
]
