"""Loading a PRM checkpoint: what every reward model with weights does the same way.

Hub id or directory (``bundled:`` names resolved), the device and dtype settings (``auto`` is
bfloat16 for a PRM: a 7B PRM in bf16 fits beside a policy, fp32 does not help), the tokenizer,
``trust_remote_code`` and the attention kernel, weights loaded straight to the device where
transformers can (:func:`equiv.devices.direct_load_kwargs`), eval mode.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from equiv import devices
from equiv.backbones import check_local_model, resolve_model_name, unreadable_model, unreadable_model_errors
from equiv.errors import InputError


def load_prm(cfg: Any, loader: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``cfg`` (a :class:`~equiv.search.rewards.RewardConfig`);
    ``loader`` is the transformers auto class the kind needs (``AutoModelForCausalLM``...)."""
    from transformers import AutoTokenizer

    path = resolve_model_name(cfg.model)
    device = torch.device(devices.resolve_device(cfg.device, field="reward.device"))
    dtype = devices.resolve_load_dtype(cfg.dtype, device, field="reward.dtype")
    if dtype == "auto":
        dtype = torch.bfloat16
    check_local_model(cfg.model, field="reward.model")
    attn = {"attn_implementation": cfg.attn_implementation} if cfg.attn_implementation else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=cfg.trust_remote_code)
        model = loader.from_pretrained(
            path, dtype=dtype, trust_remote_code=cfg.trust_remote_code, **attn, **devices.direct_load_kwargs(device)
        )
    except unreadable_model_errors() as err:  # missing or damaged: one line, not a page of traceback
        raise unreadable_model(err, cfg.model, field="reward.model", what="reward model") from None
    model.to(device).eval()
    return model, tokenizer


def check_options(options: Iterable[str], known: Iterable[str], kind: str) -> None:
    """Refuse ``reward.options`` the kind does not read (a typo would otherwise do nothing)."""
    unknown = set(options) - set(known)
    if unknown:
        raise InputError(
            f"unknown option(s) {', '.join(sorted(unknown))} for {kind}; known: {', '.join(sorted(known))}",
            field="reward.options",
        )
