"""Load a trained equivalence judge for pruning, with errors a user can act on.

Accepts what ``trainer_cli.py fit`` produces: an exported Hugging Face directory (``config.json``
with an ``equiv`` block of training-time settings, weights, tokenizer) or a Lightning ``.ckpt``.
When the judge package's :func:`equiv.judge.export.load_judge` is available it does the loading
(it knows the checkpoint format); the checks here run first either way, so a wrong path or a
directory that holds a plain encoder rather than a classifier is an :class:`InputError`, never
a randomly initialised classification head or a crash inside the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from equiv.errors import InputError

ROBERTA_LIKE = ("roberta", "longformer", "xlm-roberta", "camembert", "xlm-roberta-xl")


def _external_loader() -> Any | None:
    try:
        from equiv.judge.export import load_judge  # issue 3 (training side)
    except ImportError:
        return None
    return load_judge


def _check_classifier_config(config_path: Path) -> dict[str, Any]:
    try:
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"cannot read the judge's config.json: {err}", path=config_path, field="model") from None
    if not isinstance(data, dict):
        raise InputError("config.json is not a JSON object", path=config_path, field="model")
    archs = data.get("architectures") or []
    if not any(str(a).endswith("ForSequenceClassification") for a in archs):
        raise InputError(
            f"is not a sequence classifier (architectures: {archs or 'none'}); pass the judge exported "
            "by trainer_cli.py, not a plain encoder",
            path=config_path.parent,
            field="model",
        )
    id2label = data.get("id2label") or {}
    num_labels = len(id2label) if id2label else int(data.get("num_labels", 2))
    if num_labels != 2:
        raise InputError(f"the judge must have 2 labels, this one has {num_labels}", path=config_path.parent, field="model")
    return data


def _positive_index(config: dict[str, Any], settings: dict[str, Any]) -> int:
    if "positive_index" in settings:
        return int(settings["positive_index"])
    label2id = {str(k).lower(): int(v) for k, v in (config.get("label2id") or {}).items()}
    for name in ("equivalent", "equiv", "label_1"):
        if name in label2id:
            return label2id[name]
    return 1


def load_classifier(path: str | Path) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, settings)`` for a judge directory or Lightning checkpoint.

    ``settings`` is the export's ``equiv`` block (``label_mapping``, ``max_length``,
    ``prefilter_threshold``, ``decision_threshold``, ``model_name``) plus ``positive_index``,
    the output column that means "equivalent".
    """
    p = Path(path)
    if not p.exists():
        raise InputError("judge not found (expected the directory exported by trainer_cli.py fit, or a .ckpt)", path=p, field="model")
    loader = _external_loader()
    if p.is_file():
        if p.suffix != ".ckpt":
            raise InputError("is a file but not a Lightning checkpoint (.ckpt); pass the exported judge directory", path=p, field="model")
        if loader is None:
            raise InputError("loading a Lightning checkpoint needs equiv.judge.export.load_judge; pass the exported directory", path=p, field="model")
        model, tokenizer, settings = _call_loader(loader, p)
        settings = dict(settings or {})
        settings.setdefault("positive_index", _positive_index(model.config.to_dict(), settings))
        return model, tokenizer, settings
    config_path = p / "config.json"
    if not config_path.exists():
        raise InputError("has no config.json; not an exported judge directory", path=p, field="model")
    config = _check_classifier_config(config_path)
    if loader is not None:
        model, tokenizer, settings = _call_loader(loader, p)
        settings = dict(settings or {})
    else:
        model, tokenizer = _load_hf_dir(p)
        block = config.get("equiv")
        settings = dict(block) if isinstance(block, dict) else {}
    settings.setdefault("positive_index", _positive_index(config, settings))
    return model, tokenizer, settings


def _call_loader(loader: Any, p: Path) -> tuple[Any, Any, dict[str, Any]]:
    try:
        return loader(p)
    except InputError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise InputError(f"cannot load the judge: {str(err).splitlines()[0] if str(err) else type(err).__name__}", path=p, field="model") from None


def _load_hf_dir(p: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(p))
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load the judge's tokenizer: {str(err).splitlines()[0]}", path=p, field="model") from None
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(p))
    except (OSError, ValueError, RuntimeError) as err:
        raise InputError(f"cannot load the judge's weights: {str(err).splitlines()[0]}", path=p, field="model") from None
    return model, tokenizer


def model_token_limit(model: Any, tokenizer: Any) -> int:
    """The longest input (tokens) the model can take without an out-of-range position.

    RoBERTa-style models (Longformer included) offset positions by ``pad_token_id + 1``; models
    with a local attention window pad to a multiple of it, so the limit is rounded down to one.
    """
    config = model.config
    limit = int(getattr(config, "max_position_embeddings", 0) or 0) or 10**9
    if getattr(config, "model_type", "") in ROBERTA_LIKE:
        limit -= int(getattr(config, "pad_token_id", 1) or 0) + 1
    tml = getattr(tokenizer, "model_max_length", None)
    if isinstance(tml, int) and 0 < tml < 10**6:
        limit = min(limit, tml)
    window = getattr(config, "attention_window", None)
    if window:
        w = max(window) if isinstance(window, (list, tuple)) else int(window)
        limit = (limit // w) * w
    if limit >= 10**9:
        limit = 512
    return limit
