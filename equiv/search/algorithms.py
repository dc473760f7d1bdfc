"""The search algorithms, registered by name (the ``--algo`` choices).

Each algorithm is an async function of one problem's :class:`~equiv.search.expansion.SearchContext`
that grows ``ctx.tree`` through :func:`~equiv.search.expansion.expand` and returns the node its
answer ends at. An :class:`Algorithm` entry declares it for the rest of the code: the runner
calls ``search``, the CLI lists the names, and the docs' table and the tests' parametrisations
read :data:`ALGORITHMS`. Adding one (docs/contributing.md, "Extending equiv")::

    ALGORITHMS.add(Algorithm("greedy", greedy, "always the best-valued child"))

How a merged class is valued (``search.merge_value``) is the expansion's, the same for every
algorithm, so no entry carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from equiv.registry import Registry
from equiv.search.dfs import dfs
from equiv.search.expansion import SearchContext
from equiv.search.lookahead import lookahead
from equiv.search.mcts import mcts
from equiv.search.sbs import sbs
from equiv.search.tree import Node

SearchFn = Callable[[SearchContext], Awaitable[Node]]


@dataclass(frozen=True)
class Algorithm:
    """One search algorithm as the runner and the CLI see it."""

    name: str
    """What ``--algo`` selects it by (also the record's ``algo``)."""
    search: SearchFn
    """Grows ``ctx.tree`` for one problem; returns the node its answer ends at."""
    summary: str
    """One line for ``--help`` and the docs' table."""
    collects_solutions: bool = False
    """True: it appends every finished solution to ``ctx.solutions`` and the runner answers by
    aggregating them (majority vote, PRM min-max, ...: :mod:`equiv.search.aggregate`)."""


ALGORITHMS: Registry[Algorithm] = Registry("algorithm", field="algo")
ALGORITHMS.add(Algorithm("mcts", mcts, "PUCT simulations, the most-visited child committed per step"))
ALGORITHMS.add(Algorithm("sbs", sbs, "step-level beam search over PRM values", collects_solutions=True))
ALGORITHMS.add(Algorithm("dfs", dfs, "depth-first, best child first, until num_sequence solutions",
                         collects_solutions=True))
ALGORITHMS.add(Algorithm("lookahead", lookahead, "beam search valued by k-step rollouts (Snell et al.)",
                         collects_solutions=True))
