"""The transformers backend: ``model.generate`` with per-request seeds.

For CPU tests, the CPU demo and models vLLM cannot load; the production path is vLLM.

Why one ``generate`` call per request (with ``num_return_sequences = n``) rather than one
padded batch for all requests: a request's samples must not depend on what else is in the batch
(the search runs problems concurrently and must give the same records as a sequential run).
One global torch RNG cannot give each request its own stream inside one batch, and padded
batches change float rounding; so each request gets its own call, seeded with
``torch.manual_seed(request.seed)`` inside ``torch.random.fork_rng`` (the caller's RNG state is
untouched). The ``n`` samples of a request share one batched call.

Token accounting (DESIGN.md §2): a completion's ``num_tokens`` is every token generated for it,
up to and including the token that completed the stop string or the EOS token (pad tokens that
``generate`` appends to rows that finished early are not generated tokens and are not counted).
``logprob`` sums the model's raw log-probabilities (before temperature / top-p, as vLLM's
default ``raw_logprobs``) of those tokens, from ``output_logits``: this keeps ``T x n x vocab``
logits for the call, fine for small models; use vLLM for large ones.
"""

from __future__ import annotations

from typing import Sequence

import torch

from equiv.backbones import resolve_model_name
from equiv.search.policies.base import RawCompletion, StepPolicy

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype | str:
    """``auto`` is float32 on CPU (bf16 matmuls are slow there) and the checkpoint's dtype on GPU."""
    if name == "auto":
        return torch.float32 if device.type == "cpu" else "auto"
    return _DTYPES[name]


class _StopOnString:
    """Stopping criterion that records, per row, where it ended (delimiter or EOS).

    ``generate``'s own ``stop_strings`` does not tell us at which token each row stopped, which
    token accounting needs; this checks the decoded tail of each row after every token.
    """

    WINDOW = 16  # tokens decoded per check; a delimiter spans far fewer

    def __init__(self, tokenizer, prompt_len: int, stop: str | None, eos_ids: set[int]) -> None:
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.stop = stop
        self.eos_ids = eos_ids
        self.ended: dict[int, tuple[str, int]] = {}  # row -> (reason, number of new tokens)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        new_len = input_ids.shape[1] - self.prompt_len
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for row in range(input_ids.shape[0]):
            if row in self.ended:
                done[row] = True
                continue
            last = int(input_ids[row, -1])
            if last in self.eos_ids:
                self.ended[row] = ("eos", new_len)
                done[row] = True
            elif self.stop is not None:
                start = max(self.prompt_len, input_ids.shape[1] - self.WINDOW)
                tail = self.tokenizer.decode(
                    input_ids[row, start:].tolist(), skip_special_tokens=True, clean_up_tokenization_spaces=False
                )
                if self.stop in tail:
                    self.ended[row] = ("stop", new_len)
                    done[row] = True
        return done


class TransformersPolicy(StepPolicy):
    """:class:`equiv.search.types.Policy` on ``AutoModelForCausalLM.generate``."""

    def __init__(self, cfg) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.cfg = cfg
        path = resolve_model_name(cfg.model)
        self.device = resolve_device(cfg.device)
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=cfg.trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(
            path, dtype=resolve_dtype(cfg.dtype, self.device), trust_remote_code=cfg.trust_remote_code
        ).to(self.device)
        self.model.eval()
        self._configure(cfg, self.tokenizer)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids: set[int] = set(eos if isinstance(eos, list) else [eos]) - {None}
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.eos_ids, default=0)

    def _sample(
        self,
        prompts: Sequence[str],
        ns: Sequence[int],
        seeds: Sequence[int],
        stop: str | None,
        temperatures: Sequence[float] | None = None,
    ) -> list[list[RawCompletion]]:
        temps = self._temperatures(temperatures, len(prompts))
        return [self._sample_one(p, n, s, stop, t) for p, n, s, t in zip(prompts, ns, seeds, temps)]

    @torch.no_grad()
    def _sample_one(self, prompt: str, n: int, seed: int, stop: str | None, temperature: float) -> list[RawCompletion]:
        from transformers import GenerationConfig

        enc = self.tokenizer(prompt, return_tensors="pt").to(self.device)
        sample = temperature > 0
        if not sample:
            # Greedy generate refuses num_return_sequences > 1: give it n identical rows instead
            # (n identical completions, each counted, as vLLM does with temperature 0).
            enc = {k: v.repeat(n, 1) for k, v in enc.items()}
        prompt_len = enc["input_ids"].shape[1]
        criterion = _StopOnString(self.tokenizer, prompt_len, stop, self.eos_ids)
        # A fresh GenerationConfig: no checkpoint defaults (top_k=50, repetition penalties)
        # sneak in, so both backends sample from the same distribution.
        gen_cfg = GenerationConfig(
            do_sample=sample,
            temperature=temperature if sample else None,
            top_p=self.top_p if sample else None,
            top_k=0 if sample else None,
            max_new_tokens=self.max_new_tokens,
            num_return_sequences=n if sample else 1,
            eos_token_id=sorted(self.eos_ids) or None,
            pad_token_id=self.pad_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            out = self.model.generate(**enc, generation_config=gen_cfg, stopping_criteria=[criterion])
        new = out.sequences[:, prompt_len:]
        logprobs = torch.stack(
            [torch.log_softmax(step.float(), dim=-1).gather(1, new[:, t : t + 1]).squeeze(1) for t, step in enumerate(out.logits)],
            dim=1,
        )  # (n, T)
        results = []
        for row in range(new.shape[0]):
            reason, length = criterion.ended.get(row, ("length", new.shape[1]))
            ids = new[row, :length].tolist()
            text = self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            stopped = reason == "stop"
            if stopped and stop is not None:
                text = text[: text.find(stop)]
            results.append(
                RawCompletion(
                    text=text,
                    num_tokens=length,
                    logprob=float(logprobs[row, :length].sum()),
                    eos=reason == "eos",
                    stopped=stopped,
                )
            )
        return results
