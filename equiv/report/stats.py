"""Numbers behind the report: the compare table and per-depth pruning rates (pure functions).

The compare table is ``search_cli.py compare``'s (:func:`equiv.rundir.compare_rows`): each run's accuracy and mean generated
tokens are taken on the problems *all* runs share, and the token ratio is against the FIRST run
(the baseline), as in the paper's "(51.89%)" column. Comparing on the shared problems is what
makes a partly finished run comparable with a complete one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from equiv.report.load import Run
from equiv.rundir import TreeFile, keyed
from equiv.rundir import compare_rows as rundir_compare_rows


@dataclass(frozen=True)
class CompareRow:
    """One run's line in the compare table."""

    name: str
    algo: str
    pruner: str
    problems: int  # shared problems the numbers are computed on
    accuracy: float  # percent
    mean_tokens: float
    token_ratio: float | None  # percent of the baseline's mean tokens; None when the baseline used 0
    errors: int  # records with a non-null ``error`` among the shared problems
    mean_prm_calls: float | None
    mean_judge_calls: float | None
    pruned_per_expansion: float | None  # sum(pruned) / sum(expanded) over the shared problems
    total_problems: int  # records in the run, shared or not


def shared_ids(runs: Sequence[Run]) -> list[str]:
    """Problem ids present in every run, in the first run's order."""
    if not runs:
        return []
    common = set(runs[0].results)
    for run in runs[1:]:
        common &= set(run.results)
    return [pid for pid in runs[0].results if pid in common]


def compare_rows(runs: Sequence[Run]) -> list[CompareRow]:
    """The compare table: one row per run, computed on the problems all runs share.

    The numbers come from :func:`equiv.rundir.compare_rows` -- the function behind
    ``search_cli.py compare`` -- over the records the report loaded, paired by (id, seed), so
    the report and ``compare`` can never disagree.
    """
    table, _ = rundir_compare_rows([(run.name, keyed(run.records)) for run in runs])
    return [
        CompareRow(
            name=run.name,
            algo=run.algo,
            pruner=run.pruner,
            problems=int(row["problems"]),
            accuracy=float(row["accuracy"]),
            mean_tokens=float(row["mean_generated_tokens"]),
            token_ratio=None if row["token_ratio"] is None else float(row["token_ratio"]),
            errors=int(row["errors"]),
            mean_prm_calls=float(row["mean_prm_calls"]),
            mean_judge_calls=float(row["mean_judge_calls"]),
            pruned_per_expansion=row["pruned_per_expansion"],
            total_problems=int(row["total_problems"]),
        )
        for run, row in zip(runs, table)
    ]


def pruning_by_depth(trees: Sequence[TreeFile]) -> dict[int, tuple[int, int]]:
    """depth -> (children merged by the judge, all children generated at that depth).

    A child at depth d is any node with a parent. It counts as merged when it has
    ``merged_into`` and is not an exact duplicate of its representative: the runner folds exact
    duplicates before judging, in unpruned runs too, so counting them would credit the pruner
    with work any search does (the records' ``pruned`` field leaves them out for the same reason).
    """
    counts: dict[int, list[int]] = {}
    for tree in trees:
        for node in tree.nodes:
            if node.parent is None:
                continue
            c = counts.setdefault(node.depth, [0, 0])
            c[1] += 1
            if node.merged_into is not None and not tree.is_duplicate(node):
                c[0] += 1
    return {d: (m, t) for d, (m, t) in sorted(counts.items())}
