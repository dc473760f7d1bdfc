"""Reading evaluation run directories (docs/ARCHITECTURE.md, "Run directory") for reports.

A report must never show numbers that silently differ from the run's records, so every file is
validated as it is read and every problem is reported as an :class:`~equiv.errors.InputError`
naming the file, line and field. Only ``results.jsonl`` is required: ``summary.json`` is missing
when a run was interrupted, ``config.yaml`` when the directory was assembled by hand, and
``trees/`` unless the run was made with ``--run.save_trees true``; a report then shows what it can.

Problem ids may be integers (GSM8K index) or strings (MATH-500 ``unique_id``, which contains
``/``); they are keyed by ``str(id)`` everywhere, and tree files are matched by the ``id`` stored
inside them, not by their file name, so the runner's file-name sanitising does not matter here.

The runner keys records by (id, seed), and ``compare`` pairs runs by (id, seed). When all loaded
runs used the same single seed, problems are keyed by id alone (shorter labels, same pairing);
otherwise every key becomes ``"<id> seed=<seed>"`` (see :func:`load_runs`). A torn final line (the
runner died mid-write; it drops such a line on resume too) is left out and counted in
:attr:`Run.torn`, which the report shows; any other malformed line is an error. The files are read
through :mod:`equiv.rundir`, the same reader the runner and ``compare`` use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from equiv.errors import InputError
from equiv.rundir import CONFIG, RESULTS, SUMMARY, TREES, TreeFile, merge_records, read_json_file, read_records, read_tree

# Fields a report cannot do without; the rest of the documented record is optional here.
REQUIRED_RESULT_FIELDS = ("id", "correct", "generated_tokens")


@dataclass
class Run:
    """Everything a report needs from one run directory."""

    path: Path
    name: str
    records: list[dict[str, Any]]  # one per (id, seed) (equiv.rundir.prefer), first-seen order
    summary: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    tree_list: list[TreeFile] = field(default_factory=list)
    duplicates: int = 0  # records superseded by a later record for the same (id, seed)
    torn: bool = False  # a torn final line of results.jsonl was left out
    missing_trees: list[str] = field(default_factory=list)  # tree files records name that do not exist
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # problem key -> record
    trees: dict[str, TreeFile] = field(default_factory=dict)  # problem key -> tree

    def __post_init__(self) -> None:
        if not self.results:
            self.rekey(with_seed=len(self.seeds) > 1)

    @property
    def seeds(self) -> set[Any]:
        return {r.get("seed") for r in self.records}

    def rekey(self, *, with_seed: bool) -> None:
        """Key records and trees by id, or by id and seed (see the module docstring)."""
        self.results = {report_key(r["id"], r.get("seed"), with_seed): r for r in self.records}
        trees: dict[str, TreeFile] = {}
        for tree in self.tree_list:
            key = report_key(tree.id, tree.seed, with_seed)
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


def report_key(pid: Any, seed: Any, with_seed: bool) -> str:
    """The report's key for a problem: its id, plus the seed when runs hold several seeds."""
    return f"{pid} seed={seed}" if with_seed and seed is not None else str(pid)


def read_results(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """``results.jsonl`` -> (one record per (id, seed), superseded records, torn final line left out).

    A second record for the same (id, seed) supersedes the first unless it is an error and the
    first is not (:func:`equiv.rundir.prefer`; the runner compacts on resume, but a hand-merged
    file may hold both); the count is shown in the report.
    """
    records, torn = read_records(path, require=REQUIRED_RESULT_FIELDS)
    kept = merge_records([records])
    return kept, len(records) - len(kept), torn


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
        summary = read_json_file(root / SUMMARY)
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
    # A record that names a tree file which is gone: counted, so "trees for 2 of 2" cannot hide it.
    missing = [str(root / r["tree"]) for r in records if isinstance(r.get("tree"), str) and not (root / r["tree"]).is_file()]
    return Run(path=root, name=name or root.name, records=records, summary=summary, config=config,
               tree_list=trees, duplicates=duplicates, torn=torn, missing_trees=missing)


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
