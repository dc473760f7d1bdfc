"""Load a trained equivalence judge for pruning, with errors a user can act on.

Accepts what ``trainer_cli.py fit`` produces: an exported Hugging Face directory (``config.json``
with an ``equiv`` block of training-time settings, weights, tokenizer) or a Lightning ``.ckpt``.
Loading is :func:`equiv.judge.export.load_judge` (it knows the checkpoint format and rejects a
plain encoder); failures become an :class:`InputError` on the ``model`` option, never a randomly
initialised classification head or a crash inside the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from equiv.errors import InputError

ROBERTA_LIKE = ("roberta", "longformer", "xlm-roberta", "camembert", "xlm-roberta-xl")


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
    ``model_name``, ``policy``) plus ``positive_index``,
    the output column that means "equivalent". Loading and the classifier checks are
    :func:`equiv.judge.export.load_judge`'s; this adds the pruning side's path checks and turns
    any loading failure into an :class:`InputError` on the ``model`` option.
    """
    from equiv.judge.export import load_judge

    p = Path(path)
    if not p.exists():
        raise InputError("judge not found (expected the directory exported by trainer_cli.py fit, or a .ckpt)", path=p, field="model")
    if p.is_file() and p.suffix != ".ckpt":
        raise InputError("is a file but not a Lightning checkpoint (.ckpt); pass the exported judge directory", path=p, field="model")
    try:
        model, tokenizer, settings = load_judge(p)
    except InputError as err:
        raise InputError(err.message, path=err.path or p, line=err.line, field="model") from None
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"cannot load the judge: {reason}", path=p, field="model") from None
    settings = dict(settings or {})
    settings.setdefault("positive_index", _positive_index(model.config.to_dict(), settings))
    return model, tokenizer, settings


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
