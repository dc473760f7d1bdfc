"""Reading evaluation run directories (docs/ARCHITECTURE.md, "Run directory") for reports.

A report must never show numbers that silently differ from the run's records, so every file is
validated as it is read and every problem is reported as an :class:`~equiv.errors.InputError`
naming the file, line and field. Only ``results.jsonl`` is required: ``summary.json`` is missing
when a run was interrupted, ``config.yaml`` when the directory was assembled by hand, and
``trees/`` unless the run was made with ``--save_trees true``; a report then shows what it can.

Problem ids may be integers (GSM8K index) or strings (MATH-500 ``unique_id``, which contains
``/``); they are keyed by ``str(id)`` everywhere, and tree files are matched by the ``id`` stored
inside them, not by their file name, so the runner's file-name sanitising does not matter here.

The runner keys records by (id, seed), and ``compare`` pairs runs by (id, seed). When all loaded
runs used the same single seed, problems are keyed by id alone (shorter labels, same pairing);
otherwise every key becomes ``"<id> seed=<seed>"`` (see :func:`load_runs`). A torn final line (the
runner died mid-write; it drops such a line on resume too) is left out and counted in
:attr:`Run.torn`, which the report shows; any other malformed line is an error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from equiv.errors import InputError

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
CONFIG = "config.yaml"
TREES = "trees"

# Fields a report cannot do without; the rest of the documented record is optional here.
REQUIRED_RESULT_FIELDS = ("id", "correct", "generated_tokens")
REQUIRED_NODE_FIELDS = ("id", "parent", "depth", "text")


@dataclass
class Node:
    """One node of a saved search tree, as documented for ``trees/<id>.json``."""

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


@dataclass
class Tree:
    """A problem's saved search tree plus the record fields stored beside it."""

    id: str
    nodes: list[Node]
    question: str = ""
    answer: str = ""
    prediction: str = ""
    correct: bool | None = None
    algo: str = ""
    path: Path | None = None
    seed: int | None = None

    def merged_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.merged_into is not None]

    def is_duplicate(self, node: Node) -> bool:
        """True when ``node`` was merged as an exact (whitespace-equal) duplicate, not by the judge.

        The runner folds exact duplicates into their first occurrence before judging (also in
        unpruned runs) and stores them like judge merges; only the text tells them apart.
        """
        if node.merged_into is None:
            return False
        rep = self.node_by_id().get(node.merged_into)
        return rep is not None and " ".join(rep.text.split()) == " ".join(node.text.split())

    def node_by_id(self) -> dict[int, Node]:
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


@dataclass
class Run:
    """Everything a report needs from one run directory."""

    path: Path
    name: str
    records: list[dict[str, Any]]  # deduplicated by (id, seed), last record wins, file order
    summary: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    tree_list: list[Tree] = field(default_factory=list)
    duplicates: int = 0  # records superseded by a later record for the same (id, seed)
    torn: bool = False  # a torn final line of results.jsonl was left out
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # problem key -> record
    trees: dict[str, Tree] = field(default_factory=dict)  # problem key -> tree

    def __post_init__(self) -> None:
        if not self.results:
            self.rekey(with_seed=len(self.seeds) > 1)

    @property
    def seeds(self) -> set[Any]:
        return {r.get("seed") for r in self.records}

    def rekey(self, *, with_seed: bool) -> None:
        """Key records and trees by id, or by id and seed (see the module docstring)."""
        self.results = {problem_key(r["id"], r.get("seed"), with_seed): r for r in self.records}
        trees: dict[str, Tree] = {}
        for tree in self.tree_list:
            key = problem_key(tree.id, tree.seed, with_seed)
            if key in trees:
                raise InputError(f"tree for problem {key!r} also in {trees[key].path}", path=tree.path, field="id")
            trees[key] = tree
        self.trees = trees

    @property
    def algo(self) -> str:
        return str(self._meta("algo") or "?")

    @property
    def pruner(self) -> str:
        value = self._meta("pruner")
        if isinstance(value, dict):  # a config section, e.g. {"name": "model", ...}
            value = value.get("name") or value.get("strategy")
        return "none" if value in (None, "", False) else str(value)

    def _meta(self, key: str) -> Any:
        for record in self.results.values():
            if record.get(key) is not None:
                return record[key]
        for source in (self.summary, self.config):
            if source and source.get(key) is not None:
                return source[key]
        return None


def problem_key(pid: Any, seed: Any, with_seed: bool) -> str:
    """The report's key for a problem: its id, plus the seed when runs hold several seeds."""
    return f"{pid} seed={seed}" if with_seed and seed is not None else str(pid)


def _read_json_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno) from None


def _number(value: Any, *, path: Path, line: int | None, name: str, optional: bool, integer: bool = False) -> Any:
    if value is None and optional:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "an integer" if integer else "a finite number"
        raise InputError(f"must be {kind}{' or null' if optional else ''}, got {value!r}", path=path, line=line, field=name)
    return int(value) if integer else float(value)


def read_results(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """``results.jsonl`` -> (records, superseded duplicate records, torn final line left out).

    A second record for the same (id, seed) supersedes the first (the runner compacts on resume,
    but a hand-merged file may hold both); the count is shown in the report.
    """
    from equiv.search.runner import read_result_lines

    records: dict[tuple[str, Any], dict[str, Any]] = {}
    duplicates = 0
    rows, torn = read_result_lines(path)
    for line_no, record in rows:
        for name in REQUIRED_RESULT_FIELDS:
            if name not in record:
                raise InputError("missing", path=path, line=line_no, field=name)
        if not isinstance(record["id"], (int, str)) or isinstance(record["id"], bool):
            raise InputError(f"must be a string or integer, got {record['id']!r}", path=path, line=line_no, field="id")
        if record.get("seed") is not None and (not isinstance(record["seed"], int) or isinstance(record["seed"], bool)):
            raise InputError(f"must be an integer, got {record['seed']!r}", path=path, line=line_no, field="seed")
        if not isinstance(record["correct"], bool):
            raise InputError(f"must be true or false, got {record['correct']!r}", path=path, line=line_no, field="correct")
        record["generated_tokens"] = _number(
            record["generated_tokens"], path=path, line=line_no, name="generated_tokens", optional=False, integer=True
        )
        if record["generated_tokens"] < 0:
            raise InputError("must be >= 0", path=path, line=line_no, field="generated_tokens")
        for name in ("prm_calls", "judge_calls", "expanded", "pruned", "seconds"):
            if name in record:
                record[name] = _number(record[name], path=path, line=line_no, name=name, optional=True)
        key = (str(record["id"]), record.get("seed"))
        if key in records:
            duplicates += 1
            del records[key]  # keep file order of the surviving (latest) record
        records[key] = record
    return list(records.values()), duplicates, torn


def _node(raw: Any, path: Path, index: int) -> Node:
    where = f"nodes[{index}]"
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be an object", path=path)
    for name in REQUIRED_NODE_FIELDS:
        if name not in raw:
            raise InputError(f"{where} is missing it", path=path, field=name)

    def num(name: str, *, optional: bool = True, integer: bool = False) -> Any:
        try:
            return _number(raw.get(name), path=path, line=None, name=name, optional=optional, integer=integer)
        except InputError as err:
            raise InputError(f"{where}: {err.message}", path=path, field=name) from None

    if not isinstance(raw["text"], str):
        raise InputError(f"{where}: must be a string", path=path, field="text")
    return Node(
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
    )


def read_tree(path: Path) -> Tree:
    """One ``trees/<id>.json`` file, with its node links checked.

    Links are checked because the viewer nests nodes by ``parent`` and groups pruned siblings
    under ``merged_into``: a dangling id would silently drop part of the tree from the page.
    """
    data = _read_json_file(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    if "id" not in data:
        raise InputError("missing", path=path, field="id")
    if not isinstance(data.get("nodes"), list):
        raise InputError("missing or not a list", path=path, field="nodes")
    nodes = [_node(raw, path, i) for i, raw in enumerate(data["nodes"])]
    ids = {n.id for n in nodes}
    if len(ids) != len(nodes):
        raise InputError("node ids are not unique", path=path, field="nodes")
    for n in nodes:
        if n.parent is not None and n.parent not in ids:
            raise InputError(f"node {n.id} has unknown parent {n.parent}", path=path, field="parent")
        if n.merged_into is not None and n.merged_into not in ids:
            raise InputError(f"node {n.id} is merged into unknown node {n.merged_into}", path=path, field="merged_into")
    correct = data.get("correct")
    seed = data.get("seed")
    return Tree(
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        id=str(data["id"]),
        nodes=nodes,
        question=str(data.get("question") or ""),
        answer=str(data.get("answer") if data.get("answer") is not None else ""),
        prediction=str(data.get("prediction") if data.get("prediction") is not None else ""),
        correct=correct if isinstance(correct, bool) else None,
        algo=str(data.get("algo") or ""),
        path=path,
    )


def load_run(path: str | Path, name: str | None = None) -> Run:
    """Load and validate one run directory; raises :class:`InputError` on any bad file."""
    root = Path(path)
    if not root.is_dir():
        raise InputError("not a run directory (does not exist or is not a directory)", path=root)
    results_path = root / RESULTS
    if not results_path.is_file():
        raise InputError(f"not a run directory: no {RESULTS} (made by `search_cli.py eval --out DIR`)", path=root)
    records, duplicates, torn = read_results(results_path)
    if not records:
        raise InputError("no results in the file (the run finished no problem yet)", path=results_path)

    summary = None
    if (root / SUMMARY).is_file():
        summary = _read_json_file(root / SUMMARY)
        if not isinstance(summary, dict):
            raise InputError("expected a JSON object", path=root / SUMMARY)

    config = None
    if (root / CONFIG).is_file():
        try:
            config = yaml.safe_load((root / CONFIG).read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            raise InputError(f"malformed YAML: {getattr(err, 'problem', err)}", path=root / CONFIG,
                             line=mark.line + 1 if mark else None) from None
        if config is not None and not isinstance(config, dict):
            raise InputError("expected a mapping", path=root / CONFIG)

    trees = [read_tree(p) for p in sorted((root / TREES).glob("*.json"))] if (root / TREES).is_dir() else []
    return Run(path=root, name=name or root.name, records=records, summary=summary, config=config,
               tree_list=trees, duplicates=duplicates, torn=torn)


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Load several runs and give them distinct display names (the directory name, made unique)."""
    runs = [load_run(p) for p in paths]
    # Pair by id only when every run used the same single seed; otherwise by (id, seed), which
    # is how `search_cli.py compare` pairs records, so the plots and the table agree.
    if len({frozenset(map(str, run.seeds)) for run in runs}) > 1 or any(len(run.seeds) > 1 for run in runs):
        for run in runs:
            run.rekey(with_seed=True)
    seen: dict[str, int] = {}
    for run in runs:
        base = run.name or str(run.path)
        if base in seen:
            seen[base] += 1
            run.name = f"{base} ({seen[base]})"
        else:
            seen[base] = 1
    return runs
