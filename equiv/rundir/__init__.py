"""The run directory of ``search_cli.py eval --out DIR``: its file names, schemas, reading and writing.

One package owns the format (docs/ARCHITECTURE.md, "Run directory") so that the runner, the
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
- what a run directory is bound to (:mod:`equiv.rundir.binding`): ``config.yaml``,
  ``data.json`` (the data's path and content hash), ``models.json`` (content fingerprints of
  local models: the judge, a local policy or PRM) and ``binding.sha256`` (to tell a hand
  edit), read strictly and replaced only after a
  rerun's settings were found equal (:func:`bind`);
- one writer at a time (:func:`hold_run_dir`: an ``fcntl.flock`` on :data:`LOCK` held for the
  whole run; a second writer is refused naming the holder's pid, host and start time);
- the aggregates: the run's summary (:func:`summarise`) and the compare table
  (:func:`compare_rows`), used by ``summary.json``, ``compare`` and the report alike.

The package sits below ``search`` and ``report`` and imports neither; import from
``equiv.rundir`` (the submodules are ``layout``, ``io``, ``lock``, ``records``, ``trees``, ``binding``, ``summary``;
``outputs`` -- where the other commands may write -- and ``siblings`` are imported by their users directly).
"""

from __future__ import annotations

from equiv.rundir.layout import (
    RESULTS,
    SUMMARY,
    CONFIG,
    TREES,
    PAIRS,
    WORKERS,
    RecordKey,
    safe_name,
    tree_file_name,
    shard_dir,
    shard_path,
    shard_paths,
)
from equiv.rundir.io import (
    write_atomic,
    jsonl_text,
    write_jsonl_atomic,
    append_jsonl,
    read_json_lines,
    read_json_file,
)
from equiv.rundir.records import (
    NUMBER_FIELDS,
    WORK_FIELDS,
    ResultRecord,
    WorkCounters,
    record_key,
    check_record,
    read_records,
    prefer,
    merge_records,
    keyed,
    load_records,
    count_records,
    read_pairs,
    pair_lines,
    check_same_experiment,
    prepare_resume,
    run_records,
    finished_keys,
    merge_run_dir,
)
from equiv.rundir.trees import (
    REQUIRED_NODE_FIELDS,
    TreeNode,
    tree_document,
    TreeFile,
    read_tree,
)
from equiv.rundir.binding import (
    DATA,
    MODELS,
    DIGEST,
    file_sha256,
    fingerprint,
    model_bindings,
    read_bound_models,
    binding_digests,
    check_digest,
    data_binding,
    holds_records,
    read_bound_config,
    read_bound_data,
    bind,
)
from equiv.rundir.lock import LOCK, hold_run_dir
from equiv.rundir.summary import (
    summarise,
    compare_rows,
)

__all__ = [
    "RESULTS",
    "SUMMARY",
    "CONFIG",
    "TREES",
    "PAIRS",
    "WORKERS",
    "RecordKey",
    "safe_name",
    "tree_file_name",
    "shard_dir",
    "shard_path",
    "shard_paths",
    "write_atomic",
    "jsonl_text",
    "write_jsonl_atomic",
    "append_jsonl",
    "read_json_lines",
    "read_json_file",
    "NUMBER_FIELDS",
    "ResultRecord",
    "WORK_FIELDS",
    "WorkCounters",
    "record_key",
    "check_record",
    "read_records",
    "prefer",
    "merge_records",
    "keyed",
    "load_records",
    "count_records",
    "read_pairs",
    "pair_lines",
    "check_same_experiment",
    "prepare_resume",
    "run_records",
    "finished_keys",
    "merge_run_dir",
    "REQUIRED_NODE_FIELDS",
    "TreeNode",
    "tree_document",
    "TreeFile",
    "read_tree",
    "DATA",
    "MODELS",
    "DIGEST",
    "file_sha256",
    "fingerprint",
    "model_bindings",
    "read_bound_models",
    "binding_digests",
    "check_digest",
    "data_binding",
    "holds_records",
    "read_bound_config",
    "read_bound_data",
    "bind",
    "summarise",
    "compare_rows",
    "LOCK",
    "hold_run_dir",
]
