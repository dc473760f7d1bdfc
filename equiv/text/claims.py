"""The claim guard's former interface, kept as thin re-exports while the judges move to
:mod:`equiv.text.guard` (issue #45): the rules live there, one function per rubric clause.

Delete this module once nothing imports ``claim_check`` or ``below_statement_floor`` from it.
"""

from __future__ import annotations

from typing import NamedTuple

from equiv.text.guard import (NUMBER_RULES, computes, computes_nothing, concluded_unit, conclusion, fractions,
                              guard_veto, problem_names, rule_names)
from equiv.text.normalize import FUNCTION_WORDS, step_numbers

__all__ = ["ClaimCheck", "FUNCTION_WORDS", "below_statement_floor", "claim_check", "computes", "concluded_unit",
           "conclusion", "fractions", "problem_names", "step_numbers"]


class ClaimCheck(NamedTuple):
    """Why the guard vetoes a pair, split as before: the number rules' reason and the other rules'
    (empty strings when they do not veto)."""

    numbers: str
    entities: str

    @property
    def veto(self) -> bool:
        return bool(self.numbers or self.entities)


_OTHER_RULES = tuple(name for name in rule_names() if name not in NUMBER_RULES)


def claim_check(a: str, b: str, question: str = "") -> ClaimCheck:
    """:func:`equiv.text.guard.guard_veto`'s number rules and its other rules, each as a reason or ``""``."""
    numbers, others = guard_veto(a, b, question, NUMBER_RULES), guard_veto(a, b, question, _OTHER_RULES)
    return ClaimCheck(numbers.detail if numbers else "", others.detail if others else "")


def below_statement_floor(a: str, b: str, probability: float, floor: float | None) -> bool:
    """Whether a merge of two steps that both compute nothing (:func:`equiv.text.guard.computes_nothing`)
    falls short of ``floor`` (``None``: no floor)."""
    return floor is not None and probability < floor and computes_nothing(a) and computes_nothing(b)
