"""Numbered plans: what a real policy writes first ("1. Find the total weight. 2. Divide it by
three."), read as the list of sub-goals it is.

Why a module of its own: two plans say the same when they list the same sub-goals in the same
order, and the judge reads that best one sub-goal at a time (a short sentence, which a paraphrase
model reads well) rather than as one long text, where plans that split or order the work
differently read alike to the cross-encoder (docs/experiments/2026-12-01-plans-item-by-item.md).
The statement floor and the aligned-plan stage of :func:`equiv.judge.decide.decide` read these.

Standard library only.
"""

from __future__ import annotations

import re

NUMBERED_ITEM = re.compile(r"^[ \t]*(?:[*#]+[ \t]*)?(\d{1,2})[.)][ \t]", re.M)
"""A line that opens a numbered list's item ("1. Find ...", "**2.** Add ...", "3) ...")."""

_ITEM_START = re.compile(r"(?=^[ \t]*(?:[*#]+[ \t]*)?\d{1,2}[.)][ \t])", re.M)
_ITEM_MARKUP = re.compile(r"^[ \t]*(?:[*#]+[ \t]*)?\d{1,2}[.)][ \t]*|\*\*")


def numbered_plan(step: str) -> bool:
    """Whether a step is a numbered list of sub-goals (an item 1 and, on a later line, an item 2):
    what a real policy writes first ("1. Calculate the total weight. 2. Divide by three."). The
    statement floor reads such pairs with a floor of their own (``DecisionPolicy.plan_floor``):
    two plans that split or order the work differently read alike to the model, where two
    one-line statements that read alike nearly always say the same (docs/experiments/
    2026-11-30-a-floor-per-kind-of-statement.md). A step that is one item of a worked list
    ("1. **Initial borrowings:** Mary starts with 5 books.") is not a plan."""
    numbers = [int(n) for n in NUMBERED_ITEM.findall(step)]
    return 1 in numbers and 2 in numbers[numbers.index(1) + 1:]


def plan_items(step: str) -> tuple[str, ...]:
    """The sub-goals of a numbered plan, in order, each without its number and bold markup
    ("1. **Calculate the total cost**: ..." -> "Calculate the total cost: ..."); a line before
    item 1 ("To find the cost, we follow these steps:") is the plan's header, not a sub-goal, and
    is left out. An item runs to the next item, so its sub-bullets stay with it. Empty for a step
    that is not a numbered plan (:func:`numbered_plan`)."""
    if not numbered_plan(step):
        return ()
    parts = [part.strip() for part in _ITEM_START.split(step) if part.strip()]
    if parts and not NUMBERED_ITEM.match(parts[0]):
        parts = parts[1:]
    return tuple(_ITEM_MARKUP.sub("", part).strip() for part in parts)


def aligned_items(a: str, b: str) -> tuple[tuple[str, str], ...]:
    """The sub-goals of two numbered plans paired off in order, or ``()`` when either is not a
    plan or they list different numbers of sub-goals (a plan that splits the work otherwise is
    another plan: of 202 such pairs of a real policy's siblings, 157 read not equivalent)."""
    items_a, items_b = plan_items(a), plan_items(b)
    if not items_a or len(items_a) != len(items_b):
        return ()
    return tuple(zip(items_a, items_b))
