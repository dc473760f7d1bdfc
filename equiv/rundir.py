"""The run directory of ``search_cli.py eval --out DIR``: its file names, schemas, reading and writing.

One module owns the format (docs/ARCHITECTURE.md, "Run directory") so that the runner, the
multi-worker driver, ``compare`` and ``report`` read and write it the same way:

- file names (:data:`RESULTS`, :data:`SUMMARY`, :data:`CONFIG`, :data:`TREES`, :data:`PAIRS`,
  :data:`WORKERS`) and tree file names (:func:`tree_file_name`);
- the schemas: :class:`ResultRecord` (one ``results.jsonl`` line) and :class:`TreeNode` /
  :class:`TreeFile` (``trees/<id>.json``), written and read through the same definitions;
- reading with torn-line handling: a process killed mid-write leaves at most a torn *last* line,
  which is left out (its problem simply reruns); any other malformed line is an
  :class:`~equiv.errors.InputError` naming file, line and field -- never a silent skip;
- keying records by (id, seed), choosing between two records for one key (:func:`prefer`),
  merging record lists and shards (:func:`merge_records`, :func:`merge_run_dir`) and preparing a
  resume (:func:`prepare_resume`), which also keeps ``judge_pairs.jsonl`` free of pairs whose
  problem has no record, so a crash between the two writes repeats nothing;
- one durable writer (:func:`write_atomic`: temporary file, fsync, rename) and a durable append
  (:func:`append_jsonl`);
- the aggregates: the run's summary (:func:`summarise`) and the compare table
  (:func:`compare_rows`), used by ``summary.json``, ``compare`` and the report alike.

This module sits below ``search`` and ``report`` and imports neither.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence, TypedDict

from equiv.errors import InputError

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
CONFIG = "config.yaml"
TREES = "trees"
PAIRS = "judge_pairs.jsonl"
WORKERS = "workers"

RecordKey = tuple[str, int]
"""Records are keyed by (problem id as a string, seed) -- one search per problem and seed."""

NUMBER_FIELDS = ("prm_calls", "judge_calls", "expanded", "pruned", "seconds")
"""Optional numeric record fields; when present and not null they must be finite numbers."""


class ResultRecord(TypedDict, total=False):
    """One line of ``results.jsonl``: the outcome and the work of one (problem, seed) search.

    ``id`` is required; ``seed`` defaults to 0 in the key. What each counter counts is in
    docs/search.md, "Token accounting".
    """

    id: str | int
    seed: int
    algo: str
    pruner: str
    question: str
    answer: str
    prediction: str | None
    correct: bool
    generated_tokens: int
    prm_calls: int
    judge_calls: int
    judge_pairs: int
    expanded: int
    pruned: int
    duplicates: int
    candidates: int
    truncated: int
    truncated_tokens: int
    dead_ends: int
    policy_requests: int
    nodes: int
    seconds: float
    path: list[str]
    error: str | None
    tree: str


# -- names ----------------------------------------------------------------------------------------
def safe_name(problem_id: str) -> str:
    """A file name for a problem id (MATH-500 ids contain slashes).

    An id that had to be changed gets a short hash of the original, so ``a/b`` and ``a_b`` never
    share a tree file.
    """
    text = str(problem_id)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:120] or "problem"
    if name != text:
        name += "-" + hashlib.sha1(text.encode()).hexdigest()[:8]
    return name


def tree_file_name(problem_id: str, seed: int, *, many_seeds: bool) -> str:
    """``trees/`` file name of one search: the safe id, plus ``.seedN`` when a run has several seeds."""
    return safe_name(problem_id) + (f".seed{seed}" if many_seeds else "") + ".json"


def shard_dir(out_dir: str | Path, worker: int) -> Path:
    """The run directory worker ``worker`` of a multi-worker run writes (an ordinary run directory)."""
    return Path(out_dir) / WORKERS / str(worker)


def shard_path(out_dir: str | Path, worker: int) -> Path:
    """The results file worker ``worker`` appends its records to."""
    return shard_dir(out_dir, worker) / RESULTS


def shard_paths(out_dir: str | Path) -> list[Path]:
    """Existing shard results files, ordered by worker index (so merges are deterministic)."""
    root = Path(out_dir) / WORKERS
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        if path.is_dir() and path.name.isdigit() and (path / RESULTS).exists():
            found.append((int(path.name), path / RESULTS))
    return [path for _, path in sorted(found)]


# -- writing --------------------------------------------------------------------------------------
def write_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` by ``text`` durably: a crash at any point leaves the old file or the new one.

    The temporary file is fsynced before the rename (or the rename could land before the data),
    and the directory after it (or the rename itself could be lost).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # platforms that cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def jsonl_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """JSON Lines text of ``rows`` (UTF-8 kept readable, one object per line)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_jsonl_atomic(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """:func:`write_atomic` for a JSON Lines file."""
    write_atomic(path, jsonl_text(rows))


def append_jsonl(handle: IO[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows to an open JSONL file and fsync, so what a crash keeps is whole lines on disk."""
    handle.write(jsonl_text(rows))
    handle.flush()
    os.fsync(handle.fileno())


# -- reading --------------------------------------------------------------------------------------
def read_json_lines(path: str | Path) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """``(line number, object)`` for each line of a JSONL file, and whether a torn final line
    (the writer died mid-write: no newline after it) was left out. A missing file is empty."""
    path = Path(path)
    if not path.exists():
        return [], False
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    lines = raw.split("\n")
    rows: list[tuple[int, dict[str, Any]]] = []
    torn = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines) and not raw.endswith("\n"):
                torn = True
                continue
            raise InputError(
                f"malformed JSON: {err.msg} (column {err.colno}); fix or delete the line", path=path, line=number
            ) from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=number)
        rows.append((number, obj))
    return rows, torn


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record_key(record: Mapping[str, Any], *, path: str | Path | None = None, line: int | None = None) -> RecordKey:
    """(id, seed) of a record (results line or judge pair); a missing seed is seed 0."""
    if "id" not in record:
        raise InputError("missing", path=path, line=line, field="id")
    pid = record["id"]
    if not isinstance(pid, (str, int)) or isinstance(pid, bool):
        raise InputError(f"must be a string or integer, got {pid!r}", path=path, line=line, field="id")
    seed = record.get("seed", 0)
    if seed is None:
        seed = 0
    if not _is_int(seed):
        raise InputError(f"must be an integer, got {seed!r}", path=path, line=line, field="seed")
    return (str(pid), seed)


def check_record(
    record: Mapping[str, Any], *, path: str | Path | None = None, line: int | None = None, require: Sequence[str] = ()
) -> RecordKey:
    """Validate one results record (types of the fields present, plus ``require``); its key."""
    key = record_key(record, path=path, line=line)
    for name in require:
        if name not in record:
            raise InputError("missing", path=path, line=line, field=name)
    if "correct" in record and not isinstance(record["correct"], bool):
        raise InputError(f"must be true or false, got {record['correct']!r}", path=path, line=line, field="correct")
    if "generated_tokens" in record:
        tokens = record["generated_tokens"]
        if not _is_number(tokens) or not float(tokens).is_integer():
            raise InputError(f"must be an integer, got {tokens!r}", path=path, line=line, field="generated_tokens")
        if tokens < 0:
            raise InputError("must be >= 0", path=path, line=line, field="generated_tokens")
    for name in NUMBER_FIELDS:
        value = record.get(name)
        if value is not None and not _is_number(value):
            raise InputError(f"must be a finite number or null, got {value!r}", path=path, line=line, field=name)
    return key


def read_records(path: str | Path, *, require: Sequence[str] = ()) -> tuple[list[dict[str, Any]], bool]:
    """Validated records of a results file in file order (duplicates kept), and whether a torn
    final line was left out. ``require`` names fields a reader cannot do without."""
    rows, torn = read_json_lines(path)
    for number, record in rows:
        check_record(record, path=path, line=number, require=require)
    return [record for _, record in rows], torn


# -- keying, merging, preferring ------------------------------------------------------------------
def prefer(old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
    """Which of two records for the same (id, seed) to keep.

    The later one (a retried problem is appended after its failed attempt), except that an error
    never replaces a successful result.
    """
    if new.get("error") and not old.get("error"):
        return old
    return new


def merge_records(
    sources: Iterable[Sequence[dict[str, Any]]],
    order: Sequence[RecordKey] | None = None,
) -> list[dict[str, Any]]:
    """One record per (id, seed) (:func:`prefer`), sorted by problem order.

    ``sources`` are record lists from oldest to newest (``results.jsonl`` first, then shards in
    worker order). ``order`` is the run's (id, seed) sequence; records whose key is not in it (a
    problem range changed between runs) are kept, after the ordered ones, in the order first
    seen -- results are never dropped by a merge.
    """
    chosen: dict[RecordKey, dict[str, Any]] = {}
    first_seen: list[RecordKey] = []
    for records in sources:
        for record in records:
            key = record_key(record)
            if key in chosen:
                chosen[key] = prefer(chosen[key], record)
            else:
                chosen[key] = record
                first_seen.append(key)
    position = {key: i for i, key in enumerate(order or ())}
    seen_at = {key: i for i, key in enumerate(first_seen)}
    ranked = sorted(first_seen, key=lambda k: (0, position[k]) if k in position else (1, seen_at[k]))
    return [chosen[key] for key in ranked]


def keyed(records: Iterable[dict[str, Any]]) -> dict[RecordKey, dict[str, Any]]:
    """Records by (id, seed), duplicates resolved by :func:`prefer`, in first-seen order."""
    return {record_key(r): r for r in merge_records([list(records)])}


def load_records(directory: str | Path) -> dict[RecordKey, dict[str, Any]]:
    """A run directory's records by (id, seed) (what ``compare`` and the failure analysis read)."""
    path = Path(directory) / RESULTS
    if not path.exists():
        raise InputError(f"no {RESULTS} here; is this a run directory of `search_cli.py eval`?", path=directory)
    records, _ = read_records(path)
    return keyed(records)


def count_records(out_dir: str | Path) -> int:
    """Records in a run directory's results file (0 when it is missing or unreadable)."""
    try:
        return len(read_records(Path(out_dir) / RESULTS)[0])
    except InputError:
        return 0


# -- judge pairs ----------------------------------------------------------------------------------
def read_pairs(path: str | Path) -> tuple[list[dict[str, Any]], bool]:
    """Lines of a ``judge_pairs.jsonl`` (each carries its problem's ``id`` and ``seed``)."""
    rows, torn = read_json_lines(path)
    for number, pair in rows:
        record_key(pair, path=path, line=number)
    return [pair for _, pair in rows], torn


def pair_lines(problem: Mapping[str, Any], pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One problem's judge pairs as ``judge_pairs.jsonl`` lines (its id and seed first)."""
    return [{"id": problem["id"], "seed": problem["seed"], **pair} for pair in pairs]


def _pairs_for(records: Sequence[Mapping[str, Any]], pairs_by_key: Mapping[RecordKey, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Pairs of the problems that have a successful record, in record order: a failed search
    writes no pairs, and pairs without a record are leftovers of a crash before the record."""
    out: list[dict[str, Any]] = []
    for record in records:
        if not record.get("error"):
            out.extend(pairs_by_key.get(record_key(record), []))
    return out


def _group_pairs(pairs: Iterable[dict[str, Any]]) -> dict[RecordKey, list[dict[str, Any]]]:
    grouped: dict[RecordKey, list[dict[str, Any]]] = {}
    for pair in pairs:
        grouped.setdefault(record_key(pair), []).append(pair)
    return grouped


# -- resume and merge -----------------------------------------------------------------------------
def check_same_experiment(records: Sequence[Mapping[str, Any]], path: Path, *, algo: str, pruner: str) -> None:
    """Refuse a directory holding another algorithm's or pruner's results."""
    for record in records:
        for name, want in (("algo", algo), ("pruner", pruner)):
            if name in record and record[name] != want:
                raise InputError(
                    f"holds results of {name} {record[name]!r}, this run is {want!r}; use another --out",
                    path=path,
                    field=name,
                )


def prepare_resume(
    out_dir: str | Path, *, algo: str, pruner: str, retry_errors: bool
) -> tuple[set[RecordKey], list[dict[str, Any]]]:
    """Finished (id, seed) keys and their records, ready for a rerun to append to.

    Compacts ``results.jsonl`` when records must go (errors to retry, superseded duplicates, a
    torn line), and ``judge_pairs.jsonl`` when it holds pairs of problems without a successful
    record (written just before a record a crash then lost): the rerun writes them again.
    """
    out = Path(out_dir)
    path = out / RESULTS
    records, torn = read_records(path)
    check_same_experiment(records, path, algo=algo, pruner=pruner)
    kept = [r for r in merge_records([records]) if not (retry_errors and r.get("error"))]
    if torn or len(kept) != len(records):
        write_jsonl_atomic(path, kept)
    pairs_path = out / PAIRS
    if pairs_path.exists():
        pairs, pairs_torn = read_pairs(pairs_path)
        wanted = _pairs_for(kept, _group_pairs(pairs))
        if pairs_torn or len(wanted) != len(pairs):
            write_jsonl_atomic(pairs_path, wanted)
    return {record_key(r) for r in kept}, kept


def run_records(out_dir: str | Path) -> list[list[dict[str, Any]]]:
    """Record lists of ``results.jsonl`` and every shard file, oldest source first."""
    out = Path(out_dir)
    return [read_records(out / RESULTS)[0]] + [read_records(p)[0] for p in shard_paths(out)]


def finished_keys(out_dir: str | Path, *, retry_errors: bool) -> set[RecordKey]:
    """(id, seed) pairs a resumed run must skip: done in ``results.jsonl`` or any shard.

    With ``retry_errors`` a key whose best record still holds an error is not finished.
    """
    merged = merge_records(run_records(out_dir))
    return {record_key(r) for r in merged if not (retry_errors and r.get("error"))}


def merge_run_dir(out_dir: str | Path, order: Sequence[RecordKey] | None = None) -> list[dict[str, Any]]:
    """Merge ``results.jsonl`` and all shards into ``results.jsonl``; move trees and judge pairs;
    remove the shards.

    Trees move first, then the judge pairs and the new ``results.jsonl`` are put in place
    atomically, and only then are the shard directories deleted -- so a crash at any point loses
    nothing: a rerun merges again and gets the same files. A problem's pairs come from the
    newest source that has any for it (a problem runs in one worker at a time; after a crash
    the main file already holds a copy, which the shard's replaces).
    """
    out = Path(out_dir)
    shards = shard_paths(out)
    merged = merge_records(run_records(out), order)
    pair_sources = [out / PAIRS] + [shard.parent / PAIRS for shard in shards]
    pairs_by_key: dict[RecordKey, list[dict[str, Any]]] = {}
    for source in pair_sources:
        pairs_by_key.update(_group_pairs(read_pairs(source)[0]))
    for shard in shards:
        trees = shard.parent / TREES
        if trees.is_dir():
            (out / TREES).mkdir(exist_ok=True)
            for tree in sorted(trees.iterdir()):
                os.replace(tree, out / TREES / tree.name)
    if any(source.exists() for source in pair_sources):
        write_jsonl_atomic(out / PAIRS, _pairs_for(merged, pairs_by_key))
    write_jsonl_atomic(out / RESULTS, merged)
    if (out / WORKERS).is_dir():
        shutil.rmtree(out / WORKERS)
    return merged


# -- aggregates -----------------------------------------------------------------------------------
def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float:
    return sum(float(r.get(key) or 0) for r in records) / len(records) if records else 0.0


def summarise(records: Sequence[Mapping[str, Any]], *, algo: str, pruner: str) -> dict[str, Any]:
    """``summary.json``'s numbers over all records (an errored record counts as wrong and
    contributes the work it did before failing)."""
    n = len(records)
    expanded = sum(int(r.get("expanded") or 0) for r in records)
    pruned = sum(int(r.get("pruned") or 0) for r in records)
    per_seed: dict[str, dict[str, float]] = {}
    for seed in sorted({record_key(r)[1] for r in records}):
        rs = [r for r in records if record_key(r)[1] == seed]
        per_seed[str(seed)] = {
            "problems": len(rs),
            "accuracy": sum(bool(r.get("correct")) for r in rs) / len(rs),
            "mean_generated_tokens": _mean(rs, "generated_tokens"),
        }
    correct = sum(bool(r.get("correct")) for r in records)
    return {
        "algo": algo,
        "pruner": pruner,
        "problems": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "errors": sum(1 for r in records if r.get("error")),
        "mean_generated_tokens": _mean(records, "generated_tokens"),
        "mean_prm_calls": _mean(records, "prm_calls"),
        "mean_judge_calls": _mean(records, "judge_calls"),
        "mean_expanded": _mean(records, "expanded"),
        "pruned_per_expansion": pruned / expanded if expanded else 0.0,
        "seconds": sum(float(r.get("seconds") or 0) for r in records),
        "per_seed": per_seed,
    }


def compare_rows(runs: Sequence[tuple[str, Mapping[RecordKey, Mapping[str, Any]]]]) -> tuple[list[dict[str, Any]], int]:
    """The paper-style table: one row per ``(name, records by key)`` run, on the (id, seed) keys
    all runs share; ``token_ratio`` is percent of the FIRST run's mean tokens (None when it is 0).

    Comparing on the shared problems is what makes a partly finished run comparable with a
    complete one.
    """
    if not runs:
        raise InputError("no runs to compare")
    shared = set(runs[0][1])
    for _, records in runs[1:]:
        shared &= set(records)
    if not shared:
        raise InputError("the runs share no problems (same ids and seeds); nothing to compare")
    keys = sorted(shared)
    rows = []
    for name, records in runs:
        sel = [records[k] for k in keys]
        n = len(sel)
        expanded = sum(int(r.get("expanded") or 0) for r in sel)
        pruned = sum(int(r.get("pruned") or 0) for r in sel)
        rows.append(
            {
                "run": str(name),
                "algo": sel[0].get("algo", "?"),
                "pruner": sel[0].get("pruner", "?"),
                "problems": n,
                "accuracy": 100.0 * sum(bool(r.get("correct")) for r in sel) / n,
                "mean_generated_tokens": _mean(sel, "generated_tokens"),
                "mean_prm_calls": _mean(sel, "prm_calls"),
                "mean_judge_calls": _mean(sel, "judge_calls"),
                "errors": sum(1 for r in sel if r.get("error")),
                "pruned_per_expansion": pruned / expanded if expanded else None,
                "total_problems": len(records),
            }
        )
    base = rows[0]["mean_generated_tokens"]
    for row in rows:
        row["token_ratio"] = 100.0 * row["mean_generated_tokens"] / base if base else None
    return rows, len(keys)


# -- trees ----------------------------------------------------------------------------------------
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
            ok = _is_number(value) and (not integer or float(value).is_integer())
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


def read_json_file(path: str | Path) -> Any:
    """One JSON document; unreadable or malformed files are located input errors."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno) from None


def read_tree(path: str | Path) -> TreeFile:
    """One ``trees/<id>.json`` file, with its node links checked.

    Links are checked because a viewer nests nodes by ``parent`` and groups pruned siblings
    under ``merged_into``: a dangling id would silently drop part of the tree.
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
        if n.merged_into is not None and n.merged_into not in ids:
            raise InputError(f"node {n.id} is merged into unknown node {n.merged_into}", path=path, field="merged_into")
    correct = data.get("correct")
    seed = data.get("seed")
    return TreeFile(
        seed=seed if _is_int(seed) else None,
        id=str(data["id"]),
        nodes=nodes,
        question=str(data.get("question") or ""),
        answer=str(data.get("answer") if data.get("answer") is not None else ""),
        prediction=str(data.get("prediction") if data.get("prediction") is not None else ""),
        correct=correct if isinstance(correct, bool) else None,
        algo=str(data.get("algo") or ""),
        path=path,
    )
