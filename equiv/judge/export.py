"""The trained judge as a plain Hugging Face directory, and loading it back.

Search should not need Lightning or the training config to use a judge, so after ``fit`` the best
checkpoint is written as ``config.json`` + weights + tokenizer, loadable with
``AutoModelForSequenceClassification.from_pretrained(dir)`` and ``AutoTokenizer.from_pretrained(dir)``.
``config.json`` carries the judge's settings under ``equiv``: the label mapping it was trained
with, ``max_length``, the source ``model_name``, and ``equiv.policy``, the decision policy
(:mod:`equiv.judge.policy`) every consumer decides with -- the one stored form of the threshold,
prefilter, guard and floor. An export written before the policy existed stores them as scattered
settings (``decision_threshold``, ...); it loads through
:func:`~equiv.judge.policy.policy_from_settings`, and :func:`update_settings` rewrites it with
the policy alone.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
from pathlib import Path
from typing import Any

import torch

from equiv.errors import InputError
from equiv.judge.export_keys import METRICS_FILE, REMOVED_SETTINGS, SETTINGS_KEY
from equiv.judge.policy import LEGACY_KEYS, POLICY_KEY, policy_from_settings
from equiv.quiet import loading_quietly


def refuse_removed_settings(settings: dict[str, Any], source: str | Path | None = None, *,
                            block: str = SETTINGS_KEY, what: str = "export") -> None:
    """One clear error for a judge that turns on a removed lever (:data:`REMOVED_SETTINGS`): its
    classifier learned inputs this code no longer builds (or decided through a combiner it no
    longer has), so its scores would be off the distribution it was trained and calibrated on.
    Re-train without it. ``source`` is the file that stores ``settings`` (an export's
    ``config.json``, or a checkpoint whose ``block`` is ``hyper_parameters``)."""
    for key, lever in REMOVED_SETTINGS.items():
        if settings.get(key):
            raise InputError(f"this {what} uses {lever} ({key}), removed in 2026-11; re-train it with "
                             "trainer_cli.py fit", path=None if source is None else Path(source),
                             field=f"{block}.{key}")


def export_judge(module: Any, out_dir: str | Path, *, metrics: dict[str, float] | None = None) -> Path:
    """Write ``module`` (a :class:`~equiv.judge.module.PairClassifier`) as a HF directory."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = module.model
    settings = module.equiv_settings()
    setattr(model.config, SETTINGS_KEY, settings)
    was_training = model.training
    model.eval()
    try:
        model.save_pretrained(out)
    finally:
        model.train(was_training)
    module.tokenizer.save_pretrained(out)
    if metrics:
        export_metrics(out, metrics)
    return out


def update_settings(judge_dir: str | Path, changes: dict[str, Any], *, remove: tuple[str, ...] = (),
                    policy_knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge ``changes`` into (and drop ``remove`` from) an exported judge's ``equiv`` block, and
    apply ``policy_knobs`` (as :meth:`~equiv.judge.policy.DecisionPolicy.with_knobs` takes them)
    to its ``equiv.policy``.

    The block is written with the policy as the only stored form of the decision: an export from
    before the policy existed is converted here and its scattered settings (:data:`LEGACY_KEYS`)
    dropped, and ``changes`` may not name them (set the policy's knobs instead).
    ``config.json`` is replaced atomically (written beside it, then renamed), so a judge directory
    never holds half a config. Returns the new block.
    """
    legacy = sorted(set(changes) & set(LEGACY_KEYS))
    if legacy:
        raise ValueError(f"{', '.join(legacy)}: old export settings; set the policy's knobs instead (policy_knobs)")
    config_path = Path(judge_dir) / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    block = {k: v for k, v in (config.get(SETTINGS_KEY) or {}).items() if k not in remove}
    policy = policy_from_settings(block, source=config_path)
    block = {k: v for k, v in block.items() if k not in LEGACY_KEYS}
    block.update(changes)
    block[POLICY_KEY] = policy.with_knobs(**(policy_knobs or {})).to_dict()
    config[SETTINGS_KEY] = block
    tmp = config_path.with_name(f".config.json.{os.getpid()}.{secrets.token_hex(4)}.tmp")  # one name per writer
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, config_path)
    return block


def update_policy(judge_dir: str | Path, **knobs: Any) -> dict[str, Any]:
    """Set knobs (``threshold``, ``prefilter``, ``guard``, ``floor``, ``plan_floor``: as
    :meth:`~equiv.judge.policy.DecisionPolicy.with_knobs` takes them) of an export's
    ``equiv.policy``; the block's other settings stay. Returns the new block."""
    return update_settings(judge_dir, {}, policy_knobs=knobs)


def stored_policy(judge_dir: str | Path) -> Any:
    """The :class:`~equiv.judge.policy.DecisionPolicy` an exported judge directory decides with."""
    config_path = Path(judge_dir) / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    return policy_from_settings(config.get(SETTINGS_KEY) or {}, source=config_path)


def export_metrics(out_dir: str | Path, metrics: dict[str, float]) -> Path:
    """Write (or rewrite) the exported judge's ``equiv_metrics.json``."""
    path = Path(out_dir) / METRICS_FILE
    path.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return path


def _strip_prefix(state_dict: dict[str, torch.Tensor], prefix: str = "model.") -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}


# What a Lightning checkpoint of a PairClassifier may hold beyond tensors and plain data
# (dict/list/str/number/None, which ``weights_only`` always allows): paths, should a
# hyper-parameter or a callback's state be one. Reconstructing a path runs no code of the file's
# choosing; anything else a pickle names (``os.system``, a class's ``__reduce__``) is refused.
CHECKPOINT_GLOBALS: tuple[type, ...] = (pathlib.PosixPath, pathlib.WindowsPath, pathlib.PurePosixPath, pathlib.PureWindowsPath)

_UNSUPPORTED_GLOBAL = re.compile(r"(?:unsupported GLOBAL|Unsupported global: GLOBAL) ([\w.]+)")


def read_checkpoint(path: str | Path) -> Any:
    """A ``.ckpt`` file's contents, loaded with ``torch.load(weights_only=True)``.

    A checkpoint is a pickle, and a plain ``torch.load`` calls whatever the file names while
    reading it: a crafted ``.ckpt`` handed to ``--pruner.model`` or ``pairs --model`` would run
    a shell command. ``weights_only`` rebuilds only tensors, plain containers and
    :data:`CHECKPOINT_GLOBALS`; a file naming anything else is refused with one line (nothing
    of it has run), as is a file that is no checkpoint at all.
    """
    p = Path(path)
    try:
        with torch.serialization.safe_globals(list(CHECKPOINT_GLOBALS)):
            return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a non-checkpoint file
        found = _UNSUPPORTED_GLOBAL.search(str(err))
        if found:
            raise InputError(
                f"refused: the checkpoint names {found.group(1)}, which could run code when loaded; "
                "judge checkpoints are loaded as tensors and plain data only",
                path=p,
            ) from None
        raise InputError(f"not a readable Lightning checkpoint ({type(err).__name__})", path=p) from None


def module_from_checkpoint(path: str | Path) -> Any:
    """A :class:`PairClassifier` rebuilt from a Lightning checkpoint without downloading weights.

    The backbone is built from the config stored in the checkpoint (random init), then the trained
    weights are loaded; only the tokenizer is read from ``model_name`` (local dir, cache or bundle).
    """
    from equiv.judge.module import PairClassifier

    p = Path(path)
    checkpoint = read_checkpoint(p)
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint or "hyper_parameters" not in checkpoint:
        raise InputError("not a Lightning checkpoint of a PairClassifier (no state_dict/hyper_parameters)", path=p)
    if "equiv_hf_config" not in checkpoint:
        raise InputError("not a PairClassifier checkpoint (no equiv_hf_config)", path=p)
    # A removed constructor argument would be dropped below and the judge built without it.
    refuse_removed_settings(checkpoint["hyper_parameters"], p, block="hyper_parameters", what="checkpoint")
    import inspect

    accepted = set(inspect.signature(PairClassifier.__init__).parameters) - {"self"}
    # LightningCLI adds bookkeeping keys (_class_path, _instantiator); keep constructor args only.
    hparams = {k: v for k, v in checkpoint["hyper_parameters"].items() if k in accepted}
    hparams["hf_config"] = checkpoint["equiv_hf_config"]
    hparams["pretrained"] = False
    module = PairClassifier(**hparams)
    state = checkpoint["state_dict"]
    missing, unexpected = module.model.load_state_dict(_strip_prefix(state), strict=False)
    if missing:
        raise InputError(f"checkpoint lacks {len(missing)} backbone weights (e.g. {missing[0]})", path=p)
    module.eval()
    return module


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
"""The weight files ``from_pretrained`` reads, one of which a whole export holds."""

VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                    "tokenizer.model")
"""A tokenizer's vocabulary, one of which a whole export holds beside ``tokenizer_config.json``."""

REQUIRED_SETTINGS = ("max_length", POLICY_KEY)
"""``equiv`` settings a judge cannot be used as trained without (its input length and its
decision policy; an export from before the policy existed has its ``decision_threshold``
instead)."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else "no message"


def check_export_whole(directory: str | Path) -> None:
    """Refuse an exported judge that lacks a part, in one line naming what is missing.

    Without its tokenizer files ``AutoTokenizer`` falls back to a tiny vocabulary in which every
    word is ``[UNK]``, and the judge calls nearly every pair equivalent, silently (issue #44,
    item 4); without its ``equiv`` settings it would run at a default length and threshold it
    was never calibrated for. So a whole export has ``config.json`` with an ``equiv`` block
    holding :data:`REQUIRED_SETTINGS`, non-empty weights (one of :data:`WEIGHT_FILES`), and
    ``tokenizer_config.json`` with a vocabulary (one of :data:`VOCABULARY_FILES`).
    """
    p = Path(directory)
    config_path = p / "config.json"
    config = read_json_config(config_path)
    missing: list[str] = []
    weights = [p / name for name in WEIGHT_FILES if (p / name).is_file()]
    if not weights:
        missing.append(f"weights (one of {', '.join(WEIGHT_FILES)})")
    elif all(w.stat().st_size == 0 for w in weights):
        missing.append(f"weights ({weights[0].name} is empty)")
    if not (p / "tokenizer_config.json").is_file():
        missing.append("tokenizer_config.json")
    if not any((p / name).is_file() for name in VOCABULARY_FILES):
        missing.append(f"the tokenizer's vocabulary (one of {', '.join(VOCABULARY_FILES)})")
    settings = config.get(SETTINGS_KEY)
    if not isinstance(settings, dict):
        missing.append(f"the '{SETTINGS_KEY}' settings block in config.json")
    else:
        missing.extend(f"{SETTINGS_KEY}.{key} in config.json" for key in REQUIRED_SETTINGS if settings.get(key) is None
                       and not (key == POLICY_KEY and settings.get("decision_threshold") is not None))
    if missing:
        raise InputError(f"incomplete judge export, missing: {'; '.join(missing)}; export it again with "
                         "trainer_cli.py fit (or python -m equiv.judge.untuned)", path=p)


def read_json_config(path: Path) -> dict[str, Any]:
    """A ``config.json`` as a mapping; unreadable, malformed or not an object is one line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError) as err:
        raise InputError(f"cannot read ({type(err).__name__})", path=path) from None
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    return data


def load_judge(path: str | Path) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, settings)`` from an exported directory or a ``.ckpt`` file.

    ``settings`` is the ``equiv`` block (label_mapping, max_length, model_name, policy; an old
    export's scattered decision settings instead of the policy, which
    :func:`~equiv.judge.policy.policy_from_settings` converts). A directory must be a whole export (:func:`check_export_whole`);
    a weights or tokenizer file that cannot be read is one line, not a traceback. The model is
    in eval mode on CPU.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("judge not found (expected an exported directory or a .ckpt file)", path=p)
    if p.is_file():
        module = module_from_checkpoint(p)
        return module.model, module.tokenizer, module.equiv_settings()
    if not (p / "config.json").is_file():
        raise InputError("is not a Hugging Face model directory (no config.json)", path=p)
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(p)
    except (OSError, ValueError) as err:
        raise InputError(f"unreadable config.json: {str(err).splitlines()[0]}", path=p) from None
    architectures = getattr(config, "architectures", None) or []
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise InputError(
            f"is not a sequence classifier (architectures: {architectures or 'none'}); export a judge with trainer_cli.py fit",
            path=p,
        )
    if getattr(config, "num_labels", 2) != 2:
        raise InputError(f"has {config.num_labels} labels; a judge has 2", path=p)
    check_export_whole(p)  # after "is it a judge at all", whose answer says more
    try:
        with loading_quietly():  # no "Loading weights" bar in a library caller's output
            model = AutoModelForSequenceClassification.from_pretrained(p)
    except Exception as err:  # noqa: BLE001 - SafetensorError, UnpicklingError, OSError...: one line each
        raise InputError(f"cannot load the judge's weights ({type(err).__name__}: {_first_line(err)}); "
                         "re-export it with trainer_cli.py fit", path=p) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(p)
    except Exception as err:  # noqa: BLE001 - as above
        raise InputError(f"cannot load the judge's tokenizer ({type(err).__name__}: {_first_line(err)})", path=p) from None
    model.eval()
    settings = getattr(model.config, SETTINGS_KEY, None) or {}
    return model, tokenizer, dict(settings)
