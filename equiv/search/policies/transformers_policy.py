"""The transformers backend: ``model.generate`` with a per-request seeded sampler.

For CPU tests, the CPU demo, GPUs without vLLM and models vLLM cannot load; the production
path is vLLM.

Sampling (:class:`_SeededSampler`): ``generate``'s own sampling draws every row from one global
RNG, so a row's sample would depend on which other requests share its batch. Instead each
request owns a ``torch.Generator`` seeded with the request's seed and draws for its own rows
only; the chosen token is handed back as the only finite score, so ``generate`` (run greedy)
takes it. A request's random stream is therefore the same alone or inside any batch.

Batching (``PolicyConfig.batch_requests``):

- off (default): one ``generate`` call per request, its ``n`` samples as ``n`` rows. Exactly
  batching-independent: the search gives the same records at any concurrency, bit for bit.
- on: all requests of a call in left-padded batches of up to ``max_batch_rows`` rows -- many
  times fewer forward passes when the search runs problems concurrently (what a GPU needs to
  stay busy without vLLM). Each request still follows its own seed, but padded batched matmuls
  round differently from unpadded ones, so a record may differ from a sequential run in the
  last digits of a log-probability or, rarely, in a sampled token: the same trade vLLM makes
  on a GPU (its batches change with load too).

Token accounting (docs/design.md §2): a completion's ``num_tokens`` is every token generated for it,
up to and including the token that completed the stop string or the EOS token (pad tokens that
``generate`` appends to rows that finished early are not generated tokens and are not counted).
``logprob`` sums the model's raw log-probabilities (before temperature / top-p, as vLLM's
default ``raw_logprobs``) of those tokens; the sampler records only the chosen token's, so no
``T x rows x vocab`` logits are kept.
"""

from __future__ import annotations

from typing import Sequence

import torch

from equiv.backbones import resolve_model_name
from equiv.devices import direct_load_kwargs, pad_token_id, padded_rows, resolve_device, resolve_load_dtype
from equiv.search.policies.base import RawCompletion, StepPolicy


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
        # One device-to-host copy of every row's tail per step: per-row reads of a GPU tensor
        # would each wait for the GPU (two syncs per row per token starved it: ~9% busy).
        start = max(self.prompt_len, input_ids.shape[1] - self.WINDOW)
        tails = input_ids[:, start:].tolist()
        done = [False] * len(tails)
        for row, tail in enumerate(tails):
            if row in self.ended:
                done[row] = True
                continue
            if tail and tail[-1] in self.eos_ids:
                self.ended[row] = ("eos", new_len)
                done[row] = True
            elif self.stop is not None:
                text = self.tokenizer.decode(tail, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                if self.stop in text:
                    self.ended[row] = ("stop", new_len)
                    done[row] = True
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class _SeededSampler:
    """A logits processor that samples each request's rows with that request's own generator.

    ``spans[i] = (first_row, end_row)`` of request ``i``. Called by ``generate`` once per token
    with the raw float32 logits of every row; returns ``-inf`` everywhere except the chosen
    token, which ``generate``'s greedy selection then takes. Records the raw log-probability of
    each chosen token in ``logprobs`` (one ``(rows,)`` tensor per generated position).
    """

    def __init__(
        self,
        spans: Sequence[tuple[int, int]],
        seeds: Sequence[int],
        temperatures: Sequence[float],
        top_p: float,
        device: torch.device,
    ) -> None:
        self.spans = list(spans)
        self.temperatures = list(temperatures)
        self.top_p = top_p
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        rows = self.spans[-1][1] if self.spans else 0
        row_temps = torch.ones(rows, dtype=torch.float32)
        for (a, b), t in zip(self.spans, self.temperatures):
            row_temps[a:b] = t if t > 0 else 1.0
        self.row_temps = row_temps.to(device).unsqueeze(1)
        self.logprobs: list[torch.Tensor] = []

    def _nucleus(self, probs: torch.Tensor) -> torch.Tensor:
        """Zero the tail outside the top-``p`` mass (the most likely token always stays)."""
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass strictly above each token
        sorted_probs = sorted_probs.masked_fill(before > self.top_p, 0.0)
        return torch.zeros_like(probs).scatter_(-1, order, sorted_probs)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores.float()
        probs = torch.softmax(scores / self.row_temps, dim=-1)
        if self.top_p < 1.0:
            probs = self._nucleus(probs)
        chosen = torch.empty(scores.shape[0], dtype=torch.long, device=scores.device)
        for (a, b), g, t in zip(self.spans, self.generators, self.temperatures):
            if t > 0:
                chosen[a:b] = torch.multinomial(probs[a:b], 1, generator=g).squeeze(1)
            else:
                chosen[a:b] = scores[a:b].argmax(dim=-1)
        self.logprobs.append(torch.log_softmax(scores, dim=-1).gather(1, chosen.unsqueeze(1)).squeeze(1))
        forced = torch.full_like(scores, float("-inf"))
        return forced.scatter_(1, chosen.unsqueeze(1), 0.0)


class TransformersPolicy(StepPolicy):
    """:class:`equiv.search.types.Policy` on ``AutoModelForCausalLM.generate``."""

    def __init__(self, cfg) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.cfg = cfg
        path = resolve_model_name(cfg.model)
        self.device = torch.device(resolve_device(cfg.device, field="policy.device"))
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=cfg.trust_remote_code)
        attn = {"attn_implementation": cfg.attn_implementation} if cfg.attn_implementation else {}
        dtype = resolve_load_dtype(cfg.dtype, self.device, field="policy.dtype")
        self.model = AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, trust_remote_code=cfg.trust_remote_code, **attn, **direct_load_kwargs(self.device)
        ).to(self.device)
        self.model.eval()
        self._configure(cfg, self.tokenizer)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids: set[int] = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.pad_id = pad_token_id(self.tokenizer, self.eos_ids)
        # generate() fills every field the call leaves None from model.generation_config, so a
        # checkpoint's repetition_penalty / no_repeat_ngram_size / top_k would reshape the
        # distribution and the recorded log-probabilities (priors). Only its stop tokens are
        # kept (read above); sampling is the project's own _SeededSampler.
        from transformers import GenerationConfig

        self.model.generation_config = GenerationConfig(eos_token_id=sorted(self.eos_ids) or None, pad_token_id=self.pad_id)
        self.batch_requests = cfg.batch_requests
        self.max_batch_rows = cfg.max_batch_rows

    def _sample(
        self,
        prompts: Sequence[str],
        ns: Sequence[int],
        seeds: Sequence[int],
        stop: str | None,
        temperatures: Sequence[float] | None = None,
    ) -> list[list[RawCompletion]]:
        temps = self._temperatures(temperatures, len(prompts))
        out: list[list[RawCompletion]] = []
        for chunk in self._chunks(list(ns)):
            out.extend(
                self._sample_batch(
                    [prompts[i] for i in chunk], [ns[i] for i in chunk], [seeds[i] for i in chunk], stop,
                    [temps[i] for i in chunk],
                )
            )
        return out

    def _chunks(self, ns: list[int]) -> list[list[int]]:
        """Request indices per ``generate`` call: one each, or packed up to ``max_batch_rows`` rows."""
        if not self.batch_requests:
            return [[i] for i in range(len(ns))]
        chunks: list[list[int]] = []
        rows = 0
        for i, n in enumerate(ns):
            if chunks and rows + n <= self.max_batch_rows:
                chunks[-1].append(i)
                rows += n
            else:
                chunks.append([i])
                rows = n
        return chunks

    def _left_padded(self, prompts: Sequence[str], ns: Sequence[int]) -> dict[str, torch.Tensor]:
        """Each prompt repeated ``n`` times, left-padded to one length (generation appends on the right)."""
        encoded = self.tokenizer(list(prompts))["input_ids"]
        rows = [ids for ids, n in zip(encoded, ns) for _ in range(n)]
        input_ids, mask = padded_rows(rows, self.pad_id, side="left")
        return {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}

    @torch.no_grad()
    def _sample_batch(
        self, prompts: Sequence[str], ns: Sequence[int], seeds: Sequence[int], stop: str | None,
        temperatures: Sequence[float],
    ) -> list[list[RawCompletion]]:
        """One ``generate`` call for these requests; ``n`` rows each."""
        from transformers import GenerationConfig, LogitsProcessorList

        enc = self._left_padded(prompts, ns)
        bounds = [0]
        for n in ns:
            bounds.append(bounds[-1] + n)
        spans = list(zip(bounds[:-1], bounds[1:]))
        sampler = _SeededSampler(spans, seeds, temperatures, self.top_p, self.device)
        prompt_len = enc["input_ids"].shape[1]
        criterion = _StopOnString(self.tokenizer, prompt_len, stop, self.eos_ids)
        # A fresh GenerationConfig over the clean model one (__init__): no checkpoint defaults
        # (top_k=50, repetition penalties) sneak in. Greedy: the sampler has made each choice.
        gen_cfg = GenerationConfig(
            do_sample=False,
            max_new_tokens=self.max_new_tokens,
            eos_token_id=sorted(self.eos_ids) or None,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
        )
        out = self.model.generate(
            **enc,
            generation_config=gen_cfg,
            logits_processor=LogitsProcessorList([sampler]),
            stopping_criteria=[criterion],
        )
        new = out.sequences[:, prompt_len:]
        logprobs = torch.stack(sampler.logprobs, dim=1).cpu()  # (rows, T)
        new_rows = new.cpu().tolist()
        results: list[list[RawCompletion]] = []
        for a, b in spans:
            request = []
            for row in range(a, b):
                reason, length = criterion.ended.get(row, ("length", len(new_rows[row])))
                ids = new_rows[row][:length]
                text = self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                stopped = reason == "stop"
                if stopped and stop is not None:
                    text = text[: text.find(stop)]
                request.append(
                    RawCompletion(
                        text=text,
                        num_tokens=length,
                        logprob=float(logprobs[row, :length].sum()),
                        eos=reason == "eos",
                        stopped=stopped,
                    )
                )
            results.append(request)
        return results
