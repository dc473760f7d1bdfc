"""Devices, dtypes and padding: the small helpers every model-running part shares.

The judge, the policies and the PRMs all turn a user's ``device``/``dtype`` setting into torch
objects and pad token rows into batches; they do it here, the same way, so a setting means the
same thing everywhere and a bad one is one clear :class:`~equiv.errors.InputError` naming the
field (never a ``KeyError`` or a CUDA error deep inside a model load).

torch is imported inside the functions: :mod:`equiv.prune` promises not to import it until a
model-backed strategy is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from equiv.errors import InputError

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("float32", "bfloat16", "float16")
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def resolve_device(name: str, *, field: str = "device") -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; anything else is checked.

    A name torch cannot parse, or a CUDA device on a machine without one, is an InputError on
    ``field``. Returns the name (pass it to ``torch.device`` where an object is needed).
    """
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise InputError(f"unknown device {name!r} (use auto, cpu, cuda, cuda:N)", field=field) from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {name!r} requested but no CUDA GPU is visible", field=field)
    return name


def check_dtype_name(name: str, *, field: str = "dtype") -> str:
    """The canonical name of a dtype setting (``auto`` stays ``auto``; ``bf16`` -> ``bfloat16``);
    an unknown name is an InputError on ``field``. No torch import: configs validate with it."""
    if name == "auto":
        return name
    canonical = _ALIASES.get(name, name)
    if canonical not in DTYPE_NAMES:
        raise InputError(f"unknown dtype {name!r} (use auto, {', '.join(DTYPE_NAMES)})", field=field)
    return canonical


def _dtype_by_name(name: str, field: str) -> "torch.dtype":
    import torch

    return getattr(torch, check_dtype_name(name, field=field))


def resolve_load_dtype(name: str, device: str | Any, *, field: str = "dtype") -> "torch.dtype | str":
    """The dtype to load weights in: ``auto`` is float32 on CPU (bf16 matmuls are slow there)
    and ``"auto"`` (the checkpoint's own dtype) elsewhere; a name is that dtype."""
    if name == "auto":
        import torch

        return torch.float32 if str(device).startswith("cpu") else "auto"
    return _dtype_by_name(name, field)


def resolve_autocast_dtype(name: str, device: str | Any, *, field: str = "dtype") -> "torch.dtype | None":
    """The autocast dtype for inference: ``auto`` is bf16 on CUDA and none (fp32) elsewhere;
    ``float32`` is none; other names are honoured."""
    if name == "auto":
        import torch

        return torch.bfloat16 if str(device).startswith("cuda") else None
    dtype = _dtype_by_name(name, field)
    import torch

    return None if dtype == torch.float32 else dtype


def direct_load_kwargs(device: str | Any) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments that put the weights straight on ``device``.

    Without them a model is built in host RAM and then moved: a 7B policy and PRM per actor,
    eight actors on a node, need ~15 GB of host RAM each at peak. transformers loads straight to
    the device with ``device_map``, which needs ``accelerate``; without it (and for the CPU,
    where there is nothing to save) this is empty and the caller's ``.to(device)`` moves the
    model as before.
    """
    import importlib.util

    name = str(device)
    if name == "cpu" or importlib.util.find_spec("accelerate") is None:
        return {}
    return {"device_map": name}


def pad_token_id(tokenizer: Any, eos_ids: Iterable[int] | None = None) -> int:
    """The id to pad rows with: the tokenizer's pad token, else the (lowest) end-of-sequence id
    -- ``eos_ids`` where the caller knows the model's, else the tokenizer's -- else 0. Padding is
    masked, so any real id would do; one rule keeps the policy and the PRMs alike."""
    pad = tokenizer.pad_token_id
    if pad is not None:
        return pad
    ids = set(eos_ids) if eos_ids is not None else {tokenizer.eos_token_id} - {None}
    return min(ids, default=0)


def padded_rows(
    rows: Sequence[Sequence[int]], pad_id: int, *, side: str = "right"
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """``(input_ids, attention_mask)`` of ``rows`` padded to the longest (CPU tensors).

    ``right`` for scoring (a causal model's real positions are unaffected), ``left`` for
    generation (new tokens are appended after every row's last real token).
    """
    import torch

    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, tokens in enumerate(rows):
        span = slice(0, len(tokens)) if side == "right" else slice(width - len(tokens), width)
        ids[row, span] = torch.tensor(tokens, dtype=torch.long)
        mask[row, span] = 1
    return ids, mask
