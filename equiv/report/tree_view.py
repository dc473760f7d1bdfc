"""Which search trees go into a report, and the compact form the page's viewer reads.

A full evaluation can save thousands of trees of hundreds of nodes each; inlining all of them
would make a page no browser opens comfortably. By default the report keeps ``max_trees``
problems within a size budget (``max_mb``), preferring those where pruning happened (what a researcher wants to look at), and
always keeps the same problems for every run so the trees can be compared side by side. The
page says how many were left out and how to ask for specific problems (``--problems``).

``duplicate`` is not in the tree file: it marks a merged node whose text equals its
representative's (an exact duplicate folded before judging, see :meth:`equiv.rundir.TreeFile.is_duplicate`).

Nodes are sent as arrays (:data:`NODE_FIELDS` order) rather than objects, which roughly halves
the embedded JSON for large trees; the page's script reads them by the same field list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from equiv.errors import InputError
from equiv.report.load import Run
from equiv.rundir import TreeFile

NODE_FIELDS = (
    "id", "parent", "depth", "text", "prior", "value", "visits", "tokens",
    "terminal", "on_path", "merged_into", "judge_prob", "duplicate",
)


# Rough bytes per node besides its text in the embedded JSON (numbers, flags, separators).
NODE_OVERHEAD = 70


@dataclass(frozen=True)
class TreeSelection:
    """Problem keys whose trees are embedded, and why the others were left out."""

    ids: list[str]
    available: int  # problems with a tree in at least one run
    over_budget: int = 0  # problems left out only because the page would exceed max_mb

    @property
    def omitted(self) -> int:
        return self.available - len(self.ids)


def tree_bytes(runs: Sequence[Run], pid: str) -> int:
    """Approximate embedded size of one problem's trees over all runs."""
    return sum(len(n.text.encode("utf-8")) + NODE_OVERHEAD for r in runs if pid in r.trees for n in r.trees[pid].nodes)


def select_trees(
    runs: Sequence[Run], problems: Sequence[str] | None, max_trees: int, max_mb: float = 20.0
) -> TreeSelection:
    """Choose the problems whose trees are embedded.

    ``problems`` (explicit ids) wins and ignores the limits; an id with no tree in any run is an
    input error rather than a silently empty viewer (with several seeds, a bare id selects all of
    its seeds). Otherwise the problems with the most judge merges over all runs come first (ties
    in the first run's order), up to ``max_trees`` problems and about ``max_mb`` megabytes of tree
    data: a page of tens of MB takes a browser many seconds to open. The first-ranked problem is
    always kept, whatever its size, so the viewer is never empty when trees exist.
    """
    order: list[str] = []
    seen: set[str] = set()
    has_tree = {pid for r in runs for pid in r.trees}
    for run in runs:
        for pid in list(run.results) + list(run.trees):
            if pid not in seen and pid in has_tree:
                seen.add(pid)
                order.append(pid)
    if problems:
        chosen: list[str] = []
        for want in problems:
            hits = [pid for pid in order if pid == want or pid.startswith(f"{want} seed=")]
            if not hits:
                raise InputError(f"no saved tree for problem {want!r} in any run", field="problems")
            chosen += [h for h in hits if h not in chosen]
        return TreeSelection(ids=chosen, available=len(order))
    merged = {pid: sum(r.trees[pid].judge_merged_count for r in runs if pid in r.trees) for pid in order}
    position = {pid: i for i, pid in enumerate(order)}
    ranked = sorted(order, key=lambda pid: (-merged[pid], position[pid]))[: max(0, max_trees)]
    budget = max_mb * 1e6
    kept: list[str] = []
    used = 0
    over = 0
    for pid in ranked:
        size = tree_bytes(runs, pid)
        if kept and used + size > budget:
            over += 1
            continue
        kept.append(pid)
        used += size
    kept.sort(key=position.__getitem__)  # show the chosen ones in problem order
    return TreeSelection(ids=kept, available=len(order), over_budget=over)


def merge_reasons(tree: TreeFile, pairs: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Why each judge-merged node of ``tree`` merged: the ``reason`` of its pair with the node it
    merged into, from the run's ``judge_pairs.jsonl`` rows (:mod:`equiv.search.pairlog`), keyed by
    node id (as text, a JSON key); nodes without a logged pair are left out."""
    by_pair = {frozenset((int(p["a_node"]), int(p["b_node"]))): str(p["reason"]) for p in pairs
               if p.get("kind") == "merged" and "reason" in p and str(p.get("id")) == str(tree.id)
               and p.get("seed") == tree.seed}
    out = {}
    for n in tree.nodes:
        if n.merged_into is not None and not tree.is_duplicate(n):
            reason = by_pair.get(frozenset((int(n.id), int(n.merged_into))))
            if reason is not None:
                out[str(n.id)] = reason
    return out


def tree_payload(tree: TreeFile, record: dict[str, Any] | None,
                 pairs: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The viewer's JSON for one tree; record fields fill what the tree file leaves out, and the
    run's judge pairs (``pairs``) say why each merged node merged (``reasons``)."""
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
        "reasons": merge_reasons(tree, pairs),
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
