"""``trees/<id>.json``: the tree-node schema, written by the runner and read by the report."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from equiv.errors import InputError
from equiv.rundir.io import is_int, is_finite_number, read_json_file

REQUIRED_NODE_FIELDS = ("id", "parent", "depth", "text")


@dataclass
class TreeNode:
    """One node of a saved search tree (``trees/<id>.json``), as written by the runner and read
    by the report. A pruned sibling has ``merged_into`` (its class representative's id) and
    ``judge_prob`` (the judge's probability for that pair) and no children."""

    id: int
    parent: int | None
    depth: int
    text: str
    prior: float | None = None
    value: float | None = None
    visits: int = 0
    tokens: int = 0
    terminal: bool = False
    on_path: bool = False
    merged_into: int | None = None
    judge_prob: float | None = None
    prm_missing: bool = False
    """The reward model returned no score for this step; ``value`` is the 0.0 standing in."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Any, *, path: str | Path, index: int) -> "TreeNode":
        """Validate one entry of a tree file's ``nodes`` (located by file and index)."""
        where = f"nodes[{index}]"
        if not isinstance(raw, dict):
            raise InputError(f"{where} must be an object", path=path)
        for name in REQUIRED_NODE_FIELDS:
            if name not in raw:
                raise InputError(f"{where} is missing it", path=path, field=name)

        def num(name: str, *, optional: bool = True, integer: bool = False) -> Any:
            value = raw.get(name)
            if value is None and optional:
                return None
            ok = is_finite_number(value) and (not integer or float(value).is_integer())
            if not ok:
                kind = "an integer" if integer else "a finite number"
                raise InputError(
                    f"{where}: must be {kind}{' or null' if optional else ''}, got {value!r}", path=path, field=name
                )
            return int(value) if integer else float(value)

        if not isinstance(raw["text"], str):
            raise InputError(f"{where}: must be a string", path=path, field="text")
        return cls(
            id=num("id", optional=False, integer=True),
            parent=num("parent", integer=True),
            depth=num("depth", optional=False, integer=True),
            text=raw["text"],
            prior=num("prior"),
            value=num("value"),
            visits=num("visits", integer=True) or 0,
            tokens=num("tokens", integer=True) or 0,
            terminal=bool(raw.get("terminal", False)),
            on_path=bool(raw.get("on_path", False)),
            merged_into=num("merged_into", integer=True),
            judge_prob=num("judge_prob"),
            prm_missing=bool(raw.get("prm_missing", False)),
        )


def tree_document(record: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A tree file's JSON: the record fields stored beside the tree, then its nodes
    (:meth:`TreeNode.to_json` dictionaries)."""
    return {
        "id": record["id"],
        "seed": record["seed"],
        "question": record["question"],
        "answer": record["answer"],
        "prediction": record["prediction"],
        "correct": record["correct"],
        "algo": record["algo"],
        "nodes": list(nodes),
    }


@dataclass
class TreeFile:
    """A problem's saved search tree plus the record fields stored beside it."""

    id: str
    nodes: list[TreeNode]
    question: str = ""
    answer: str = ""
    prediction: str = ""
    correct: bool | None = None
    algo: str = ""
    path: Path | None = None
    seed: int | None = None

    def merged_nodes(self) -> list[TreeNode]:
        return [n for n in self.nodes if n.merged_into is not None]

    def is_duplicate(self, node: TreeNode) -> bool:
        """True when ``node`` was merged as an exact (whitespace-equal) duplicate, not by the judge.

        The runner folds exact duplicates into their first occurrence before judging (also in
        unpruned runs) and stores them like judge merges; only the text tells them apart.
        """
        if node.merged_into is None:
            return False
        rep = self.node_by_id().get(node.merged_into)
        return rep is not None and " ".join(rep.text.split()) == " ".join(node.text.split())

    def node_by_id(self) -> dict[int, TreeNode]:
        cache = self.__dict__.get("_by_id")
        if cache is None or len(cache) != len(self.nodes):
            cache = self.__dict__["_by_id"] = {n.id: n for n in self.nodes}
        return cache

    @property
    def judge_merged_count(self) -> int:
        return sum(1 for n in self.nodes if n.merged_into is not None and not self.is_duplicate(n))

    @property
    def merged_count(self) -> int:
        return sum(1 for n in self.nodes if n.merged_into is not None)


def _cycle(links: Mapping[int, int | None]) -> list[int] | None:
    """A cycle of ``links`` (node -> the node it hangs under, or ``None``) as the ids around it, or
    ``None``. Linear: each node is walked once, and a walk stops at a node already cleared."""
    cleared: set[int] = set()
    for start in links:
        walk: dict[int, int] = {}  # node -> its position on this walk
        node: int | None = start
        while node is not None and node not in cleared:
            if node in walk:
                order = list(walk)
                return order[walk[node]:] + [node]
            walk[node] = len(walk)
            node = links.get(node)
        cleared.update(walk)
    return None


def check_acyclic(nodes: Sequence[TreeNode], *, path: str | Path) -> None:
    """Refuse a tree whose links loop, in one line naming the file, the field and the loop.

    Every reader walks these links: the root path of a step (``siblings``' prefixes), the
    viewer's nesting (a node under its parent, a pruned sibling under its representative). A
    loop would make each of them walk for ever (issue #53, item 6: ``siblings`` reached 5.7 GB).
    Parent links are checked first; then the links the viewer nests by (``merged_into`` where set,
    else ``parent``), which can only loop through a ``merged_into``."""
    loop = _cycle({n.id: n.parent for n in nodes})
    if loop is not None:
        raise InputError(f"nodes {' -> '.join(map(str, loop))} form a cycle of parent links; a tree has none",
                         path=path, field="parent")
    loop = _cycle({n.id: n.merged_into if n.merged_into is not None else n.parent for n in nodes})
    if loop is not None:
        raise InputError(f"nodes {' -> '.join(map(str, loop))} form a cycle of merged_into and parent links "
                         "(a pruned sibling hangs under a representative that hangs under it)",
                         path=path, field="merged_into")


def read_tree(path: str | Path) -> TreeFile:
    """One ``trees/<id>.json`` file, with its node links checked.

    Links are checked because a viewer nests nodes by ``parent`` and groups pruned siblings
    under ``merged_into``: a dangling id would silently drop part of the tree, and a node that is
    its own parent, or a loop of links, would make every reader walk for ever
    (:func:`check_acyclic`). Every reader of a tree file (``siblings``, ``report``) comes through here.
    """
    path = Path(path)
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    if "id" not in data:
        raise InputError("missing", path=path, field="id")
    if not isinstance(data.get("nodes"), list):
        raise InputError("missing or not a list", path=path, field="nodes")
    nodes = [TreeNode.from_json(raw, path=path, index=i) for i, raw in enumerate(data["nodes"])]
    ids = {n.id for n in nodes}
    if len(ids) != len(nodes):
        raise InputError("node ids are not unique", path=path, field="nodes")
    for n in nodes:
        if n.parent is not None and n.parent not in ids:
            raise InputError(f"node {n.id} has unknown parent {n.parent}", path=path, field="parent")
        if n.parent == n.id:
            raise InputError(f"node {n.id} is its own parent", path=path, field="parent")
        if n.merged_into is not None and n.merged_into not in ids:
            raise InputError(f"node {n.id} is merged into unknown node {n.merged_into}", path=path, field="merged_into")
        if n.merged_into == n.id:
            raise InputError(f"node {n.id} is merged into itself", path=path, field="merged_into")
    check_acyclic(nodes, path=path)
    correct = data.get("correct")
    seed = data.get("seed")
    return TreeFile(
        seed=seed if is_int(seed) else None,
        id=str(data["id"]),
        nodes=nodes,
        question=str(data.get("question") or ""),
        answer=str(data.get("answer") if data.get("answer") is not None else ""),
        prediction=str(data.get("prediction") if data.get("prediction") is not None else ""),
        correct=correct if isinstance(correct, bool) else None,
        algo=str(data.get("algo") or ""),
        path=path,
    )
