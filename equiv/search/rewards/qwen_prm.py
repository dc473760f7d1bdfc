"""Qwen2.5-Math-PRM (``Qwen/Qwen2.5-Math-PRM-7B``): a two-class head read at ``<extra_0>``.

Its own step format, per the model card: the chat template renders
``[system, user: question, assistant: step_1 <extra_0> step_2 <extra_0> ...]`` (each step followed
by the separator ``<extra_0>``, no generation prompt); one forward pass gives per-token logits over
two classes, and a step's score is softmax(logits)[1] (P(correct)) at its separator.

The released checkpoint ships its own model class (``Qwen2ForProcessRewardModel``, loaded with
``AutoModel`` and ``trust_remote_code=True``). ``options.model_class = "token_classification"``
loads any ``AutoModelForTokenClassification`` with two labels instead -- the same computation
with a library class, which is how the tiny CPU test runs it. The real checkpoint has not been
run here (no hub access); the code path is the model card's.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from equiv.devices import pad_token_id
from equiv.errors import InputError
from equiv.search.policies.prompts import QWEN_MATH_SYSTEM
from equiv.search.rewards.batching import padded_batches
from equiv.search.rewards.loading import load_prm
from equiv.search.types import ScoreRequest

STEP_SEP = "<extra_0>"


class Qwen25MathPRM:
    """:class:`equiv.search.types.RewardModel` for Qwen2.5-Math-PRM-style models."""

    def __init__(
        self, model: Any, tokenizer: Any, *, batch_size: int = 8, step_sep: str = STEP_SEP, system: str = QWEN_MATH_SYSTEM
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.step_sep = step_sep
        self.system = system
        ids = tokenizer.encode(step_sep, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"the PRM tokenizer splits the step separator {step_sep!r} into {len(ids)} tokens")
        self.sep_id = ids[0]
        self.pad_id = pad_token_id(tokenizer)
        self.calls = 0

    @classmethod
    def from_config(cls, cfg) -> "Qwen25MathPRM":
        from transformers import AutoModel, AutoModelForTokenClassification

        options = dict(cfg.options)
        model_class = options.pop("model_class", "auto")
        unknown = set(options) - {"step_sep", "system"}
        if unknown or model_class not in ("auto", "token_classification"):
            raise InputError(
                f"bad options {cfg.options} for qwen25_math_prm; known: model_class (auto | token_classification), "
                "step_sep, system",
                field="reward.options",
            )
        model, tokenizer = load_prm(cfg, AutoModel if model_class == "auto" else AutoModelForTokenClassification)
        return cls(model, tokenizer, batch_size=cfg.batch_size, **options)

    def format(self, request: ScoreRequest) -> str:
        steps = [s.replace(self.step_sep, "").strip() for s in request.steps]
        messages = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": request.question.replace(self.step_sep, "")},
            {"role": "assistant", "content": "".join(s + self.step_sep for s in steps)},
        ]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        results: list[list[float]] = [[] for _ in requests]
        encoded = [(i, self.tokenizer.encode(self.format(r), add_special_tokens=False)) for i, r in enumerate(requests) if r.steps]
        for chunk, input_ids, mask in padded_batches(encoded, self.batch_size, self.pad_id, self.device):
            # use_cache=False: a score needs no KV cache, and the released checkpoint's remote
            # code calls cache methods transformers 5.x removed (it fails with the cache on).
            out = self.model(input_ids=input_ids, attention_mask=mask, use_cache=False)
            logits = out.logits if hasattr(out, "logits") else out[0]
            if logits.shape[-1] != 2:
                raise RuntimeError(f"expected two-class per-token logits, got shape {tuple(logits.shape)}")
            self.calls += 1
            probs = torch.softmax(logits.float(), dim=-1)[:, :, 1]
            for row, (i, ids) in enumerate(chunk):
                tags = (input_ids[row, : len(ids)] == self.sep_id).nonzero(as_tuple=True)[0]
                if len(tags) != len(requests[i].steps):
                    raise RuntimeError(f"found {len(tags)} step separators for {len(requests[i].steps)} steps")
                results[i] = [float(p) for p in probs[row, tags].tolist()]
        return results
