"""Which search trees go into a report, and the compact form the page's viewer reads.

A full evaluation can save thousands of trees of hundreds of nodes each; inlining all of them
would make a page no browser opens comfortably. By default the report keeps ``max_trees``
problems, preferring those where pruning happened (what a researcher wants to look at), and
always keeps the same problems for every run so the trees can be compared side by side. The
page says how many were left out and how to ask for specific problems (``--problems``).

``duplicate`` is not in the tree file: it marks a merged node whose text equals its
representative's (an exact duplicate folded before judging, see :meth:`Tree.is_duplicate`).

Nodes are sent as arrays (:data:`NODE_FIELDS` order) rather than objects, which roughly halves
the embedded JSON for large trees; the page's script reads them by the same field list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from equiv.errors import InputError
from equiv.report.load import Run, Tree

NODE_FIELDS = (
    "id", "parent", "depth", "text", "prior", "value", "visits", "tokens",
    "terminal", "on_path", "merged_into", "judge_prob", "duplicate",
)


@dataclass(frozen=True)
class TreeSelection:
    """Problem ids whose trees are embedded, and how many problems with trees were left out."""

    ids: list[str]
    available: int  # problems with a tree in at least one run

    @property
    def omitted(self) -> int:
        return self.available - len(self.ids)


def select_trees(runs: Sequence[Run], problems: Sequence[str] | None, max_trees: int) -> TreeSelection:
    """Choose the problems whose trees are embedded.

    ``problems`` (explicit ids) wins; an id with no tree in any run is an input error rather than
    a silently empty viewer. Otherwise the problems with the most merged nodes (over all runs)
    (exact duplicates not counted) come first, ties in the first run's order, up to ``max_trees``.
    """
    order: list[str] = []
    seen: set[str] = set()
    for run in runs:
        for pid in list(run.results) + list(run.trees):
            if pid not in seen and any(pid in r.trees for r in runs):
                seen.add(pid)
                order.append(pid)
    if problems:
        missing = [p for p in problems if p not in seen]
        if missing:
            raise InputError(f"no saved tree for problem(s) {', '.join(map(repr, missing))} in any run", field="problems")
        return TreeSelection(ids=list(dict.fromkeys(problems)), available=len(order))
    merged = {pid: sum(r.trees[pid].judge_merged_count for r in runs if pid in r.trees) for pid in order}
    position = {pid: i for i, pid in enumerate(order)}
    ranked = sorted(order, key=lambda pid: (-merged[pid], position[pid]))[: max(0, max_trees)]
    ranked.sort(key=position.__getitem__)  # show the chosen ones in problem order
    return TreeSelection(ids=ranked, available=len(order))


def tree_payload(tree: Tree, record: dict[str, Any] | None) -> dict[str, Any]:
    """The viewer's JSON for one tree; record fields fill what the tree file leaves out."""
    record = record or {}

    def pick(name: str) -> Any:
        value = getattr(tree, name)
        return value if value not in ("", None) else record.get(name)

    return {
        "id": tree.id,
        "question": pick("question") or "",
        "answer": "" if pick("answer") is None else str(pick("answer")),
        "prediction": "" if pick("prediction") is None else str(pick("prediction")),
        "correct": pick("correct"),
        "tokens": record.get("generated_tokens"),
        "merged": tree.judge_merged_count,
        "duplicates": tree.merged_count - tree.judge_merged_count,
        "seed": tree.seed,
        "nodes": [[getattr(n, f) for f in NODE_FIELDS[:-1]] + [tree.is_duplicate(n)] for n in tree.nodes],
    }


def script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``.

    Step text is model output and may contain ``</script>``, ``<!--`` or ``&``; escaping ``<``,
    ``>`` and ``&`` as JSON unicode escapes keeps the HTML parser from ever ending the block early,
    while ``JSON.parse`` restores the exact text.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )
