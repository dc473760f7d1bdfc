"""Equivalence pruning runtime: strategies behind one judge interface (``SiblingJudge``: sibling
families in, classes out), and grouping.

Typical use (see docs/pruning.md)::

    from equiv.prune import PrunerConfig, build_judge, group_siblings
    judge = build_judge(PrunerConfig(strategy="model", model="runs/judge/export"))
    grouping = group_siblings(steps, judge)        # classes + representatives

Importing this package does not import torch; the model and embedding strategies load it
when built.
"""

from equiv.judge.decide import Verdict
from equiv.prune.boundary import Family, FamilyGrouping, SiblingJudge, group_families, group_siblings
from equiv.prune.cached import CachedJudge, pair_key
from equiv.prune.embedding import EmbeddingJudge
from equiv.prune.grouping import Grouping, group_equivalent, sibling_pairs
from equiv.prune.model_judge import ModelJudge
from equiv.prune.remote import RemoteJudge
from equiv.prune.rules import FormulaJudge, LevenshteinJudge
from equiv.prune.stats import JudgeStats
from equiv.prune.strategies import STRATEGIES, PrunerConfig, Strategy, build_judge
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace

__all__ = [
    "CachedJudge",
    "EmbeddingJudge",
    "Family",
    "FamilyGrouping",
    "FormulaJudge",
    "Grouping",
    "JudgeStats",
    "LevenshteinJudge",
    "ModelJudge",
    "PrunerConfig",
    "RemoteJudge",
    "STRATEGIES",
    "SiblingJudge",
    "Strategy",
    "Verdict",
    "build_judge",
    "group_equivalent",
    "group_families",
    "group_siblings",
    "levenshtein_ratio",
    "normalise_whitespace",
    "pair_key",
    "sibling_pairs",
]
