"""What a run directory is bound to: the settings its records were made with, and their data.

Rerunning ``eval`` into an existing run directory resumes it: finished (id, seed) pairs are
skipped. That is right only if the rerun would make the same records, so a directory holding
records is bound to

- the result-defining settings, in ``config.yaml`` (which of them count is the search layer's
  call: ``equiv.search.cli.RESULT_DEFINING``), and
- the problems, in ``data.json`` (:func:`data_binding`): dataset, resolved path, SHA-256 of the
  file, hub split and id, question/answer fields, grader kind. Problem ids are row indices
  (``gsm8k-0``...), so without this a rerun over another file of the same dataset skips every
  problem and reports the old file's results under the new file's name, exit 0.

The check comes first and the files are replaced only after it passed (:func:`bind`): a refused
rerun changes nothing. A check that cannot be made is not one that passed: records or a binding
file that cannot be read are input errors, never "0 records, nothing to compare".
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

from equiv.errors import InputError
from equiv.rundir.io import read_json_file, write_atomic
from equiv.rundir.layout import CONFIG
from equiv.rundir.records import run_records

DATA = "data.json"
"""The data binding of a run directory (:func:`data_binding`), beside ``config.yaml``."""


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex), read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def data_binding(
    *,
    dataset: str,
    path: str | Path | None,
    split: str | None = None,
    hub_id: str | None = None,
    question_field: str | None = None,
    answer_field: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    """What identifies a run's problems: for a local file its resolved path and content hash,
    for the hub its id and split; plus what turns rows into problems (fields, grader kind).

    ``start``/``end`` and ``sample`` are not in it: ids are indices in the full file, so another
    range selects other problems but never relabels one."""
    resolved = Path(path).resolve() if path is not None else None
    return {
        "dataset": dataset,
        "path": str(resolved) if resolved is not None else None,
        "sha256": file_sha256(resolved) if resolved is not None and resolved.is_file() else None,
        "split": split,
        "hub_id": hub_id,
        "question_field": question_field,
        "answer_field": answer_field,
        "kind": kind,
    }


def holds_records(out_dir: str | Path) -> bool:
    """Whether the directory holds any record (``results.jsonl`` or a worker shard).

    Reads strictly: a malformed line is an :class:`InputError` (a torn last line is not), so a
    damaged file can never pass for an empty one and let other settings in."""
    return any(run_records(out_dir))


def read_bound_config(out_dir: str | Path) -> dict[str, Any] | None:
    """The ``config.yaml`` a directory holding records is bound to; None when it holds none.

    Missing, unreadable or not a mapping: an :class:`InputError` -- the records' settings are
    then unknown, and resuming would mix them with this run's."""
    import yaml

    out = Path(out_dir)
    if not holds_records(out):
        return None
    path = out / CONFIG
    advice = "restore it, or use another --out"
    if not path.exists():
        raise InputError(f"missing, but the directory holds records made with unknown settings; {advice}", path=path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read the settings this run directory is bound to ({err}); {advice}", path=path) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError(
            f"malformed YAML ({getattr(err, 'problem', None) or err}): the settings this run directory is bound to "
            f"cannot be checked; {advice}",
            path=path,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if not isinstance(config, dict):
        raise InputError(f"expected a mapping of settings; {advice}", path=path)
    return config


def read_bound_data(out_dir: str | Path) -> dict[str, Any] | None:
    """The directory's ``data.json`` (None when absent: a run directory older than the file)."""
    path = Path(out_dir) / DATA
    if not path.exists():
        return None
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object (the data this run directory is bound to)", path=path)
    return data


def bind(out_dir: str | Path, config_text: str, data: Mapping[str, Any]) -> None:
    """Write the binding: ``data.json``, then ``config.yaml``, each atomically. Call only after
    the check passed (a failed check must leave the old binding in place)."""
    import json

    out = Path(out_dir)
    write_atomic(out / DATA, json.dumps(dict(data), indent=2, sort_keys=True) + "\n")
    write_atomic(out / CONFIG, config_text)
