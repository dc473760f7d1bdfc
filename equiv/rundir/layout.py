"""Where things are in a run directory: file names, tree file names, worker shards."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
CONFIG = "config.yaml"
TREES = "trees"
PAIRS = "judge_pairs.jsonl"
WORKERS = "workers"

RecordKey = tuple[str, int]
"""Records are keyed by (problem id as a string, seed) -- one search per problem and seed."""


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
