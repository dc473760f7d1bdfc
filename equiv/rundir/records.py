"""``results.jsonl`` and ``judge_pairs.jsonl``: the record schema, validation, keying by (id, seed),
choosing between records (:func:`prefer`), merging shards and preparing a resume."""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypedDict

from equiv.errors import InputError
from equiv.rundir.io import is_int, is_finite_number, read_json_lines, write_jsonl_atomic
from equiv.rundir.layout import PAIRS, RESULTS, TREES, WORKERS, RecordKey, shard_paths

NUMBER_FIELDS = ("prm_calls", "judge_calls", "expanded", "pruned", "seconds")
"""Optional numeric record fields; when present and not null they must be finite numbers."""


@dataclass
class WorkCounters:
    """The work one (problem, seed) search did: the one owner of these record fields.

    The search counts into an instance where it calls the engines (``equiv.search.expansion``)
    and the record carries every field under its own name, in this order; what each counts is in
    docs/search.md, "Token accounting" (and docs/design.md §2: every returned completion token
    counts, including those of candidates later dropped, merged or pruned).
    """

    generated_tokens: int = 0  # every completion token the policy returned
    prm_calls: int = 0  # sequences sent to the PRM
    # Pairs a learned judge (model, embedding) had to run on, as the judge reports it: distinct
    # within this problem, not settled by its free shortcuts (whitespace, the model's prefilter).
    # 0 for rule-based strategies, which cost no forward.
    # Per problem, so a pair another problem already put in the judge's cache still counts here
    # (records must not depend on what else was in flight); the run's cache hits are in
    # summary.json's judge_stats.
    judge_calls: int = 0
    judge_pairs: int = 0  # all sibling pairs sent to the judge, repeats and rule-decided included
    expanded: int = 0  # nodes expanded
    pruned: int = 0  # candidates merged into a representative by the judge
    duplicates: int = 0  # candidates merged as exact duplicates
    candidates: int = 0  # completions returned that the token limit did not cut
    truncated: int = 0  # completions cut by the token limit (dropped; their tokens count)
    truncated_tokens: int = 0  # their tokens (in generated_tokens, but on no tree node)
    dead_ends: int = 0  # nodes made terminal because no usable candidate came back
    retries: int = 0  # policy requests repeated because the previous one gave no usable candidate
    prm_missing: int = 0  # nodes the reward model returned no score for (valued 0.0, flagged)
    policy_requests: int = 0  # requests sent to the policy (expansions, retries, rollouts)
    # Completion tokens an engine generated in this run: generated_tokens less those the
    # completions cache (policy.cache) answered; equal to it without a cache.
    engine_tokens: int = 0
    cache_hits: int = 0  # policy requests the completions cache answered (no engine call)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


WORK_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(WorkCounters))

HOW_FIELDS: tuple[str, ...] = ("seconds", "engine_tokens", "cache_hits")
"""Record fields that say how this run got a result (wall time; what the completions cache
answered), not what the result is: a rerun with a warm cache differs only in these."""
"""The record fields :class:`WorkCounters` owns (integers, present in every record the runner writes)."""


class ResultRecord(TypedDict, total=False):
    """One line of ``results.jsonl``: the outcome of one (problem, seed) search.

    ``id`` is required; ``seed`` defaults to 0 in the key. Between ``correct`` and ``nodes`` a
    record written by the runner holds every :data:`WORK_FIELDS` counter (the work it did,
    owned by :class:`WorkCounters`, not repeated here).
    """

    id: str | int
    seed: int
    algo: str
    pruner: str
    question: str
    answer: str
    prediction: str | None
    correct: bool
    nodes: int
    seconds: float
    path: list[str]
    error: str | None
    tree: str
    aggregations: dict[str, dict[str, Any]]
    """Algorithms that finish several solutions (SBS, lookahead, DFS): each answer aggregation's
    ``{"prediction", "correct"}`` (``majority_vote``, ``prm_min_max``, ``prm_min_vote``,
    ``prm_last_max``, ``prm_last_vote``); ``prediction``/``correct`` are ``majority_vote``'s."""


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
    if not is_int(seed):
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
        if not is_finite_number(tokens) or not float(tokens).is_integer():
            raise InputError(f"must be an integer, got {tokens!r}", path=path, line=line, field="generated_tokens")
        if tokens < 0:
            raise InputError("must be >= 0", path=path, line=line, field="generated_tokens")
    aggregations = record.get("aggregations")
    if aggregations is not None and not (
        isinstance(aggregations, dict) and all(isinstance(v, dict) for v in aggregations.values())
    ):
        raise InputError("must be an object of {prediction, correct} objects", path=path, line=line,
                         field="aggregations")
    for name in NUMBER_FIELDS:
        value = record.get(name)
        if value is not None and not is_finite_number(value):
            raise InputError(f"must be a finite number or null, got {value!r}", path=path, line=line, field=name)
    return key


def read_records(path: str | Path, *, require: Sequence[str] = ()) -> tuple[list[dict[str, Any]], bool]:
    """Validated records of a results file in file order (duplicates kept), and whether a torn
    final line was left out. ``require`` names fields a reader cannot do without. A second
    record for an (id, seed) with another result (:func:`conflicting`) is an input error naming
    its line."""
    rows, torn = read_json_lines(path)
    first: dict[RecordKey, tuple[int, dict[str, Any]]] = {}
    for number, record in rows:
        key = check_record(record, path=path, line=number, require=require)
        if key in first and conflicting(first[key][1], record):
            raise InputError(
                f"a second record for id {key[0]!r} seed {key[1]} (the first is on line {first[key][0]}) with "
                "another result; which one is true is unknown: delete the wrong line",
                path=path, line=number,
            )
        first.setdefault(key, (number, record))
    return [record for _, record in rows], torn


def conflicting(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Two records for one (id, seed) that cannot both be true: both successful and different.

    The runner writes one record per key. Legitimate repeats are a retry after an error (the
    error record, then the result: :func:`prefer` keeps the result) and the identical copy a
    crash during a shard merge leaves; two different successful results are a hand edit or
    two runs mixed, and choosing one silently changed a reported accuracy (issue #44, item 6).
    How the run got it (:data:`HOW_FIELDS`: wall time, cache hits) is not part of the result."""
    if old.get("error") or new.get("error"):
        return False
    return {k: v for k, v in old.items() if k not in HOW_FIELDS} != {k: v for k, v in new.items() if k not in HOW_FIELDS}


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
                if conflicting(chosen[key], record):
                    raise InputError(f"two different results for id {key[0]!r} seed {key[1]} in the run "
                                     "directory's record files; delete the wrong one", field="id")
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
