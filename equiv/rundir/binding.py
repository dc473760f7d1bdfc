"""What a run directory is bound to: the settings its records were made with, and their data.

Rerunning ``eval`` into an existing run directory resumes it: finished (id, seed) pairs are
skipped. That is right only if the rerun would make the same records, so a directory holding
records is bound to

- the result-defining settings, in ``config.yaml`` (which of them count is the search layer's
  call: ``equiv.rundir.resume.RESULT_DEFINING``), and
- the problems, in ``data.json`` (:func:`data_binding`): dataset, resolved path, SHA-256 of the
  file, hub split and id, question/answer fields, grader kind. Problem ids are row indices
  (``gsm8k-0``...), so without this a rerun over another file of the same dataset skips every
  problem and reports the old file's results under the new file's name, exit 0.

- the models, in ``models.json`` (:func:`model_bindings`): for each model setting that names a
  local directory or file (the judge, and the policy or PRM when they are local), a content
  fingerprint (:func:`fingerprint`). The path alone said nothing: a judge retrained into the
  same folder, or its policy's threshold edited, mixed two judges' records (issue #44,
  item 5). A hub id is bound by its name in ``config.yaml``.

``binding.sha256`` (:data:`DIGEST`) holds a digest of each binding file's content as this
package wrote it (for ``config.yaml``, of its result-defining settings), so a hand-edited
binding is refused as edited instead of being trusted (:func:`check_digest`). Digests of the
result-defining settings, not of the text, because a rerun may rewrite ``config.yaml`` with other
devices or batch sizes: a crash between that write and the digest's leaves both agreeing.

The check comes first and the files are replaced only after it passed (:func:`bind`): a refused
rerun changes nothing. A check that cannot be made is not one that passed: records or a binding
file that cannot be read are input errors, never "0 records, nothing to compare". A directory
from before ``data.json``, ``models.json`` or ``binding.sha256`` is checked on what it has, and
gets the missing files at its next (accepted) run.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from equiv.errors import InputError, regular_input
from equiv.rundir.io import read_json_file, write_atomic
from equiv.rundir.layout import CONFIG
from equiv.rundir.records import run_records

DATA = "data.json"
"""The data binding of a run directory (:func:`data_binding`), beside ``config.yaml``."""

MODELS = "models.json"
"""The model binding of a run directory (:func:`model_bindings`): content fingerprints."""

DIGEST = "binding.sha256"
"""Digests of the binding files as written (:func:`binding_digests`), to tell a hand edit."""


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex), read in chunks."""
    digest = hashlib.sha256()
    with open(regular_input(path), "rb") as handle:
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


def fingerprint(path: str | Path) -> dict[str, Any]:
    """A content fingerprint of a model directory (or file): SHA-256 over the sorted
    ``(relative path, size, SHA-256 of the content)`` of every file in it.

    Every file counts and every byte of it -- weights included, not size and modification time,
    which a retrain into the same folder can leave looking alike and a copy can change. The cost
    is one read of the directory per ``eval`` start (a judge: well under a second to a few seconds;
    a local 7B policy: tens of seconds, small beside loading it). Entries whose name starts with
    ``.`` are left out (hub download metadata, lock files, our own temporary files); symbolic
    links are followed (a hub cache snapshot is made of them)."""
    root = Path(path).resolve()
    if root.is_file():
        files = [(root.name, root)]
    else:
        files = []
        for folder, dirs, names in os.walk(root, followlinks=True):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in names:
                if not name.startswith("."):
                    full = Path(folder) / name
                    files.append((full.relative_to(root).as_posix(), full))
    digest = hashlib.sha256()
    total = 0
    for relative, full in sorted(files):
        size = full.stat().st_size
        total += size
        digest.update(f"{relative}\0{size}\0{file_sha256(full)}\n".encode("utf-8"))
    return {"path": str(root), "sha256": digest.hexdigest(), "files": len(files), "bytes": total}


def model_bindings(models: Mapping[str, str | None]) -> dict[str, Any]:
    """``{setting: fingerprint}`` for each model setting (``pruner.model``...) naming an existing
    local path; None for a hub id, a ``tiny:``/``gguf:`` name or no model.

    An empty or blank value names no model (the likelihood reward's configs say ``model: ""``).
    ``Path("")`` is the working directory and exists, so it was once fingerprinted as the model:
    every file under the directory the command ran in (a checkout: over a gigabyte, read at
    every start), the run directory itself among them when ``--out`` lies below it, so such a
    run could never resume."""
    out: dict[str, Any] = {}
    for setting, value in sorted(models.items()):
        named = value is not None and str(value).strip() != ""
        local = named and ":" not in str(value) and Path(str(value)).exists()
        out[setting] = fingerprint(str(value)) if local else None
    return out


def read_bound_models(out_dir: str | Path) -> dict[str, Any] | None:
    """The directory's ``models.json`` (None when absent: a run directory older than the file)."""
    path = Path(out_dir) / MODELS
    if not path.exists():
        return None
    models = read_json_file(path)
    if not isinstance(models, dict):
        raise InputError("expected a JSON object (the models this run directory is bound to)", path=path)
    return models


def _canonical_sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def binding_digests(defining: Mapping[str, Any], data: Mapping[str, Any] | None,
                    models: Mapping[str, Any] | None) -> dict[str, str]:
    """What ``binding.sha256`` holds: per binding file, the SHA-256 of its canonical content
    (``config.yaml``: of ``defining``, its result-defining settings as the search layer reads them)."""
    digests = {CONFIG: _canonical_sha256(dict(defining))}
    if data is not None:
        digests[DATA] = _canonical_sha256(dict(data))
    if models is not None:
        digests[MODELS] = _canonical_sha256(dict(models))
    return digests


def check_digest(out_dir: str | Path, defining: Mapping[str, Any], data: Mapping[str, Any] | None,
                 models: Mapping[str, Any] | None) -> None:
    """Refuse a binding file edited by hand since this package wrote it, in one line naming it.

    ``defining``, ``data`` and ``models`` are what the directory's files hold now. Without
    ``binding.sha256`` (a directory from before it) there is nothing to check against."""
    out = Path(out_dir)
    path = out / DIGEST
    if not path.exists():
        return
    stored = read_json_file(path)
    if not isinstance(stored, dict):
        raise InputError("expected a JSON object of binding digests; restore it, or use another --out", path=path)
    now = binding_digests(defining, data, models)
    for name in (CONFIG, DATA, MODELS):
        if name in stored and stored[name] != now.get(name):
            raise InputError(
                f"was edited after the run wrote it (its content no longer matches {DIGEST}); the records were made "
                "with the settings it held then: restore it, or use another --out",
                path=out / name,
            )


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
        config = yaml.safe_load(regular_input(path).read_text(encoding="utf-8"))
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


def bind(out_dir: str | Path, config_text: str, data: Mapping[str, Any], models: Mapping[str, Any] | None = None,
         defining: Mapping[str, Any] | None = None) -> None:
    """Write the binding: ``data.json``, ``models.json``, ``config.yaml`` and, given ``defining``
    (the config's result-defining settings), ``binding.sha256``, each atomically. Call only
    after the check passed (a failed check must leave the old binding in place)."""
    out = Path(out_dir)
    write_atomic(out / DATA, json.dumps(dict(data), indent=2, sort_keys=True) + "\n")
    if models is not None:
        write_atomic(out / MODELS, json.dumps(dict(models), indent=2, sort_keys=True) + "\n")
    write_atomic(out / CONFIG, config_text)
    if defining is not None:
        digests = binding_digests(defining, data, models)
        write_atomic(out / DIGEST, json.dumps(digests, indent=2, sort_keys=True) + "\n")
