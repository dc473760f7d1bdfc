"""What every policy backend shares: request -> prompt, candidate, token accounting.

A backend implements one method, :meth:`StepPolicy._sample`: sample ``n`` completions per prompt
with a per-prompt seed and a stop string, in ONE engine call for all prompts, and report for
each completion its text (cut before the stop string), every generated token, the summed
log-probability and why it ended. Everything else -- prompt formats, ``finished``,
``truncated`` -- lives here, so both backends behave the same. One request is one step; a
lookahead rollout asks for one step at a time (``StepRequest.temperature`` makes it greedy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from equiv.search.policies.fewshot import with_exemplars
from equiv.search.policies.prompt_format import PromptFormat
from equiv.search.policies.prompts import resolve_format
from equiv.search.types import Candidate, StepRequest


@dataclass(frozen=True)
class RawCompletion:
    """One completion as an engine returned it."""

    text: str
    """Decoded completion, cut before the stop string if one was hit."""
    num_tokens: int
    """Every token the engine generated for it (including the stop string's and EOS)."""
    logprob: float
    """Sum of the model's log-probabilities of those tokens (raw logits, before temperature)."""
    eos: bool
    """Ended on the end-of-sequence token."""
    stopped: bool
    """Ended on the stop string (the step delimiter)."""


class StepPolicy:
    """Base class of the backends: implements :class:`equiv.search.types.Policy`."""

    fmt: PromptFormat
    tokenizer: Any
    temperature: float
    top_p: float
    max_new_tokens: int
    max_model_len: int | None = None
    cache: Any = None
    """The completions cache (:class:`equiv.search.policies.completion_cache.CompletionCache`,
    from ``policy.cache``) or None: requests it holds never reach :meth:`_sample`."""

    def _configure(self, cfg: Any, tokenizer: Any) -> None:
        """Set what both backends take from a :class:`PolicyConfig`: prompt format and sampling."""
        self.tokenizer = tokenizer
        self.fmt = resolve_format(
            cfg.prompt_format,
            cfg.model,
            tokenizer,
            step_delimiter=cfg.step_delimiter,
            system_prompt=cfg.system_prompt,
            end_at_answer=cfg.end_at_answer,
        )
        self.fmt = with_exemplars(self.fmt, cfg)  # base models: solved exemplars
        self.temperature = cfg.temperature
        self.top_p = cfg.top_p
        self.max_new_tokens = cfg.max_new_tokens
        self.max_model_len = cfg.max_model_len

    def _temperatures(self, temperatures: Sequence[float] | None, count: int) -> list[float]:
        """Per-prompt temperatures, the policy's own where none is given."""
        return list(temperatures) if temperatures is not None else [self.temperature] * count

    def _sample(
        self,
        prompts: Sequence[str],
        ns: Sequence[int],
        seeds: Sequence[int],
        stop: str | None,
        temperatures: Sequence[float] | None = None,
    ) -> list[list[RawCompletion]]:
        """One engine call; ``temperatures`` per prompt (None = the policy's own)."""
        raise NotImplementedError

    def _temperature(self, request: StepRequest) -> float:
        t = request.temperature
        return self.temperature if t is None else t

    # -- the Policy protocol -------------------------------------------------------------
    def prompt(self, request: StepRequest) -> str:
        """The prompt text for the step after ``request.steps``."""
        return self.fmt.build(request.question, request.steps, self.tokenizer)

    def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]:
        """``n`` candidates per request, in one engine call for all requests."""
        for req in requests:
            if req.n < 1:
                raise ValueError(f"StepRequest.n must be >= 1, got {req.n}")
            if req.temperature is not None and req.temperature < 0:
                raise ValueError(f"StepRequest.temperature must be >= 0, got {req.temperature}")
        if not requests:
            return []
        prompts = [self.prompt(r) for r in requests]
        # A prompt with no room left in the context is not sampled (the engine would refuse
        # it): the request gets no candidates, which makes its node a dead end.
        fits = self._fits(prompts)
        live = [i for i, ok in enumerate(fits) if ok]
        sampled, cached = self._answer(
            [prompts[i] for i in live],
            [requests[i].n for i in live],
            [requests[i].seed for i in live],
            self.fmt.step_delimiter,
            [self._temperature(requests[i]) for i in live],
        ) if live else ([], [])
        out: list[list[Candidate]] = [[] for _ in requests]
        for i, raws, hit in zip(live, sampled, cached):
            out[i] = [self._candidate(raw, cached=hit) for raw in raws]
        return out

    def _answer(
        self, prompts: list[str], ns: list[int], seeds: list[int], stop: str | None, temperatures: list[float],
    ) -> tuple[list[list[RawCompletion]], list[bool]]:
        """Each prompt's completions and whether the cache answered it: the cache's answers, and
        ONE engine call (:meth:`_sample`) for the rest, whose answers are stored."""
        found: list[list[RawCompletion] | None] = [None] * len(prompts)
        keys: list[Any] = []
        if self.cache is not None:
            keys = [self.cache.request(p, n, s, t, stop) for p, n, s, t in zip(prompts, ns, seeds, temperatures)]
            found = self.cache.get_many(keys)
        missing = [i for i, hit in enumerate(found) if hit is None]
        hits = [hit is not None for hit in found]
        if missing:
            fresh = self._sample([prompts[i] for i in missing], [ns[i] for i in missing], [seeds[i] for i in missing],
                                 stop, [temperatures[i] for i in missing])
            if len(fresh) != len(missing):
                raise RuntimeError(f"engine answered {len(fresh)} prompts, expected {len(missing)}")
            for i, raws in zip(missing, fresh):
                if len(raws) != ns[i]:
                    raise RuntimeError(f"engine returned {len(raws)} completions, expected {ns[i]}")
                found[i] = list(raws)
            if self.cache is not None:
                self.cache.put_many([(keys[i], found[i]) for i in missing])  # type: ignore[misc]
        return [f for f in found if f is not None], hits

    def _fits(self, prompts: Sequence[str]) -> list[bool]:
        """Does each prompt leave room for at least one generated token in ``max_model_len``?"""
        if self.max_model_len is None or not prompts:
            return [True] * len(prompts)
        lengths = [len(ids) for ids in self.tokenizer(list(prompts))["input_ids"]]
        return [n < self.max_model_len for n in lengths]

    def _candidate(self, raw: RawCompletion, *, cached: bool = False) -> Candidate:
        """One completion as a step: the format's clean text, its tokens and log-probability
        (``cached``: the completions cache answered it, no engine generated it in this run)."""
        step = self.fmt.clean_step(raw.text)
        return Candidate(
            text=step,
            num_tokens=raw.num_tokens,
            logprob=float(raw.logprob),
            # EOS, or (where the format says so) a step stating the final answer.
            finished=raw.eos or (self.fmt.end_at_answer and self.fmt.is_final(step)),
            # Neither EOS nor the delimiter: the token limit cut it. Such a step is incomplete
            # (and may be a runaway), so the search drops it; a final-answer marker does not
            # rescue it.
            truncated=not (raw.eos or raw.stopped),
            cached=cached,
        )
