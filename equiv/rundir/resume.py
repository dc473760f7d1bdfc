"""Resuming a run directory: what a rerun must match, checked before anything is written.

``search_cli.py eval --out DIR`` on a directory that already holds records resumes it, and only
when the records would be of the same experiment: the result-defining settings
(:data:`RESULT_DEFINING`), the data (``data.json``) and the local models' content
(``models.json``) must be what the directory is bound to (:mod:`equiv.rundir.binding`), else one
line names what changed. A run that fails before any record removes the directory it created
(:func:`remove_if_nothing_ran`), so its binding is never silently reused. Moved here from
``equiv.search.cli`` (issue 67), where it sat beside parsing and the Ray paths; the run
directory's format and its rules have one owner.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from equiv.errors import InputError
from equiv.rundir.binding import CONFIG, DATA, DIGEST, MODELS, check_digest, read_bound_config, read_bound_data, read_bound_models
from equiv.rundir.layout import PAIRS, RESULTS, SUMMARY

RUN_FILES = (RESULTS, SUMMARY, CONFIG, DATA, MODELS, DIGEST, PAIRS)  # what eval writes in its run directory


# Settings that change what a record would be: resuming with another value would mix two
# experiments in one results.jsonl. Devices, batch sizes, concurrency and the problem range
# (start/end/sample: ids are indices in the full file, so a range never relabels a problem) may
# change between a run and its resumption. The data's file content is bound by data.json.
RESULT_DEFINING = {
    "algo": None,
    "data": ("dataset", "path", "split", "hub_id", "question_field", "answer_field", "kind"),
    "search": None,  # all of it
    "policy": ("model", "prompt_format", "temperature", "top_p", "max_new_tokens", "step_delimiter", "system_prompt",
               "fewshot_path", "fewshot_count", "fewshot_seed"),
    "reward": ("kind", "model", "options"),
    "pruner": ("strategy", "model", "threshold", "prefilter", "grouping", "representative", "guard",
               "floor", "plan_floor", "plan_items", "restate", "judge_fingerprint"),
}
UNSET_UNBOUND = frozenset({"pruner.plan_floor", "pruner.plan_items"})
"""Result-defining settings added after run directories were bound with a digest of their
settings: unset (None) they are left out, so a directory bound before they existed still resumes
(its digest holds) and one that sets them is bound to them."""


LEGACY_PRUNER_KEYS = {"claim_guard": "guard", "statement_threshold": "floor"}
"""Pruner settings renamed with the decision policy: a run directory written before keeps its meaning."""


def defining(config: dict[str, Any]) -> dict[str, Any]:
    """The result-defining settings of a resolved configuration, flat (``search.width``,
    ``pruner.strategy``, ...); renamed pruner keys read under their new names."""
    pruner = config.get("pruner")
    if isinstance(pruner, dict) and any(old in pruner for old in LEGACY_PRUNER_KEYS):
        pruner = dict(pruner)
        for old, new in LEGACY_PRUNER_KEYS.items():
            if old in pruner:
                value = pruner.pop(old)
                pruner.setdefault(new, value)
        config = {**config, "pruner": pruner}
    out: dict[str, Any] = {}
    for group, keys in RESULT_DEFINING.items():
        value = config.get(group)
        if keys is None or not isinstance(value, dict):
            out[group] = value
        else:
            out.update({f"{group}.{k}": value.get(k) for k in keys})
    flat: dict[str, Any] = {}
    for key, value in out.items():
        if key in UNSET_UNBOUND and value is None:
            continue
        if isinstance(value, dict) and key == "search":
            flat.update({f"search.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def _short(fingerprint: dict[str, Any] | None) -> str:
    return str(fingerprint["sha256"])[:12] if fingerprint else "none (not a local path)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# The model settings a run directory binds by content when they name a local path (models.json).
MODEL_SETTINGS = (("pruner", "model"), ("policy", "model"), ("reward", "model"))


def models_of(init: Any) -> dict[str, str | None]:
    """``{"pruner.model": value, ...}`` of the settings in :data:`MODEL_SETTINGS`."""
    return {f"{group}.{name}": getattr(getattr(init, group, None), name, None) for group, name in MODEL_SETTINGS}


def check_resume_config(out: Path, config_text: str, data: dict[str, Any] | None = None,
                        models: dict[str, Any] | None = None) -> None:
    """Refuse to resume a run directory with other result-defining settings, other data or other
    models, or whose binding files were edited by hand.

    ``data`` is this run's :func:`~equiv.rundir.binding.data_binding`; it is compared with the
    directory's ``data.json`` (resolved path and content hash, so the same relative path from
    another working directory is the same file, and an edited file is not). A directory from
    before ``data.json`` is compared on the ``data.*`` settings of its ``config.yaml``.
    ``models`` is this run's :func:`~equiv.rundir.binding.model_bindings`, compared with
    ``models.json`` by content fingerprint (a judge retrained into the same folder is another
    judge). Unreadable records or settings raise (equiv.rundir.binding)."""
    import yaml

    old = read_bound_config(out)
    if old is None:
        return
    new = yaml.safe_load(config_text) or {}
    before, after = defining(old), defining(new)
    old_data = read_bound_data(out)
    old_models = read_bound_models(out)
    check_digest(out, before, old_data, old_models)  # a hand edit is named as one, not as a change
    if old_models is not None and models is not None:
        for setting in sorted(set(old_models) | set(models)):
            was, now = old_models.get(setting), models.get(setting)
            if (was or {}).get("sha256") != (now or {}).get("sha256"):
                raise InputError(
                    f"holds results made with another {setting} (its content changed: fingerprint "
                    f"{_short(was)} -> {_short(now)}, over {(now or was or {}).get('path')}); a retrained or edited "
                    "model makes other records: use another --out, or restore the model",
                    path=out / MODELS,
                )
    if old_data is not None and data is not None:
        before = {k: v for k, v in before.items() if not k.startswith("data.")}
        after = {k: v for k, v in after.items() if not k.startswith("data.")}
        before.update({f"data.{k}": v for k, v in old_data.items()})
        after.update({f"data.{k}": v for k, v in data.items()})
    changed = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if changed:
        diffs = ", ".join(f"{k}: {_shown(before.get(k))} -> {_shown(after.get(k))}" for k in changed[:3])
        raise InputError(
            f"holds results made with other settings ({diffs}); rerun with the same settings to resume, "
            "or use another --out",
            path=out / CONFIG,
        )


def remove_if_nothing_ran(out: Path, fresh: bool) -> bool:
    """Remove the run directory this command created when the run failed before any record was
    written (a judge that does not load, a model that is missing): left behind, its binding would
    be silently reused by the next run. A directory that existed before, or holds any record
    (Ray workers' shards included), is kept. True when it was removed."""
    if not fresh or not out.is_dir() or any(f.stat().st_size for f in out.rglob(RESULTS)):
        return False
    shutil.rmtree(out, ignore_errors=True)
    return True
