"""The search tree shared by all algorithms.

One flat list of :class:`Node` objects indexed by id (the root, id 0, is the question). Nodes
carry what every algorithm and the report need: the step text, the policy prior, the PRM value,
MCTS visit statistics, the completion tokens the step cost, and merge bookkeeping. A sibling
pruned as equivalent stays in the tree (so the report can show it and token accounting stays
honest) with ``merged_into`` pointing at its class representative; it never gets children and is
never selected.

The JSON export is the ``trees/<id>.json`` node schema of docs/ARCHITECTURE.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from equiv.rundir import TreeNode


@dataclass
class Node:
    """One reasoning step (or the root question)."""

    id: int
    parent: int | None
    depth: int
    text: str
    prior: float = 1.0
    value: float | None = None  # PRM value of this step (merge_value class_max: max over its class)
    visits: int = 0
    value_sum: float = 0.0
    tokens: int = 0  # completion tokens the policy spent producing this step
    logprob: float = 0.0
    terminal: bool = False  # the solution ends here (or was cut at the depth limit)
    merged_into: int | None = None
    judge_prob: float | None = None  # equivalence probability to the representative
    own_prior: float = 1.0  # prior before merging (kept for the report)
    own_value: float | None = None  # PRM value before merging
    prm_missing: bool = False  # the reward model returned no score: value 0.0 stands in for it
    children: list[int] = field(default_factory=list)
    expanded: bool = False
    on_path: bool = False

    @property
    def pruned(self) -> bool:
        return self.merged_into is not None

    def q(self) -> float:
        """Mean backed-up value; an unvisited node falls back to its PRM value (0 if unscored)."""
        if self.visits > 0:
            return self.value_sum / self.visits
        return self.value if self.value is not None else 0.0


class Tree:
    """All nodes of one problem's search, plus path helpers and JSON export."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.nodes: list[Node] = [Node(id=0, parent=None, depth=0, text="")]

    @property
    def root(self) -> Node:
        return self.nodes[0]

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def add_child(self, parent: Node, text: str, **attrs: Any) -> Node:
        node = Node(id=len(self.nodes), parent=parent.id, depth=parent.depth + 1, text=text, **attrs)
        self.nodes.append(node)
        parent.children.append(node.id)
        return node

    def live_children(self, node: Node) -> list[Node]:
        """Children that were not merged away: the only ones an algorithm may select."""
        return [self.nodes[c] for c in node.children if self.nodes[c].merged_into is None]

    def ancestry(self, node: Node) -> list[Node]:
        """Nodes from the first step down to ``node`` (root excluded)."""
        chain: list[Node] = []
        cur: Node | None = node
        while cur is not None and cur.parent is not None:
            chain.append(cur)
            cur = self.nodes[cur.parent]
        return chain[::-1]

    def steps(self, node: Node) -> tuple[str, ...]:
        """Step texts from the root to ``node``: the partial solution a request continues."""
        return tuple(n.text for n in self.ancestry(node))

    def mark_path(self, node: Node) -> None:
        """Flag the chosen solution (for the report); clears any earlier marking."""
        for n in self.nodes:
            n.on_path = False
        self.root.on_path = True
        for n in self.ancestry(node):
            n.on_path = True

    def to_json(self) -> list[dict[str, Any]]:
        """The nodes in the run directory's tree-file schema (:class:`equiv.rundir.TreeNode`)."""
        return [
            TreeNode(
                id=n.id,
                parent=n.parent,
                depth=n.depth,
                text=n.text,
                prior=float(n.prior),
                value=None if n.value is None else float(n.value),
                visits=int(n.visits),
                tokens=int(n.tokens),
                terminal=bool(n.terminal),
                on_path=bool(n.on_path),
                merged_into=n.merged_into,
                judge_prob=None if n.judge_prob is None else float(n.judge_prob),
                prm_missing=bool(n.prm_missing),
            ).to_json()
            for n in self.nodes
        ]
