"""The claim guard: named rules, each a difference the rubric says makes two steps not the same step.

First version of the contract (issue #45): the rules wrap :mod:`equiv.text.claims`'s checks; they
are being split into one small function per rubric clause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from equiv.text import claims


@dataclass(frozen=True)
class Veto:
    """Why the guard keeps two steps apart: the rule that vetoed and a short reason ("12 vs 15")."""

    rule: str
    detail: str


@dataclass(frozen=True)
class GuardRule:
    """One guard rule: a stable snake_case name, the RUBRIC.md clause it enforces, and its check,
    ``(a, b, question) -> detail`` when it vetoes, else ``None``."""

    name: str
    clause: str
    check: Callable[[str, str, str], str | None]


def _symmetric(one_way: Callable[[str, str, str], str]) -> Callable[[str, str, str], str | None]:
    """A one-way check read in a canonical pair order, so the verdict cannot depend on which
    sibling came first."""

    def check(a: str, b: str, question: str) -> str | None:
        lo, hi = sorted((a, b))
        return one_way(lo, hi, question) or None

    return check


GUARD_RULES: tuple[GuardRule, ...] = (
    GuardRule("different_numbers", "the computation: the same operations on the same numbers, giving the same results",
              _symmetric(lambda a, b, q: claims.number_conflict(a, b, q))),
    GuardRule("swapped_quantity", "concepts: they talk about the same quantities of the problem",
              _symmetric(lambda a, b, q: claims.entity_conflict(a, b, q))),
    GuardRule("different_names", "concepts: they talk about the same quantities of the problem",
              _symmetric(lambda a, b, q: claims.name_conflict(a, b, q))),
    GuardRule("different_units", "concepts: the same quantities (a unit is part of a quantity)",
              _symmetric(lambda a, b, q: claims.unit_conflict(a, b))),
    GuardRule("different_ordinals", "concepts: the same quantities (the second day is not the third)",
              _symmetric(lambda a, b, q: claims.ordinal_conflict(a, b))),
    GuardRule("reversed_relation", "logical structure: the same premises lead to the same conclusions",
              _symmetric(lambda a, b, q: claims.relation_conflict(a, b))),
)


def rule_names() -> tuple[str, ...]:
    """The rules' names, in the order they are tried."""
    return tuple(rule.name for rule in GUARD_RULES)


def guard_veto(a: str, b: str, question: str | None = None, rules: Sequence[str] | None = None) -> Veto | None:
    """The first rule (in :data:`GUARD_RULES` order, restricted to ``rules``) that vetoes merging
    ``a`` and ``b``, or ``None``. Symmetric: ``guard_veto(a, b) == guard_veto(b, a)``.

    Raises:
        ValueError: ``rules`` names a rule that does not exist.
    """
    if rules is not None:
        unknown = sorted(set(rules) - set(rule_names()))
        if unknown:
            raise ValueError(f"unknown guard rule(s) {', '.join(unknown)}; known: {', '.join(rule_names())}")
    for rule in GUARD_RULES:
        if rules is not None and rule.name not in rules:
            continue
        detail = rule.check(a, b, question or "")
        if detail:
            return Veto(rule.name, detail)
    return None


def computes_nothing(step: str) -> bool:
    """Whether a step computes nothing (no calculator note, no arithmetic): the statement floor's predicate."""
    return not claims.computes(step)
