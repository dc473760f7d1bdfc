"""What every policy backend shares: request -> prompt, multi-step rollouts, token accounting.

A backend implements one method, :meth:`StepPolicy._sample`: sample ``n`` completions per prompt
with a per-prompt seed and a stop string, in ONE engine call for all prompts, and report for
each completion its text (cut before the stop string), every generated token, the summed
log-probability and why it ended. Everything else -- prompt formats, ``finished``,
``max_steps > 1`` rollouts -- lives here, so both backends behave the same.

Multi-step rollouts (``StepRequest.max_steps = k > 1``, lookahead search): we sample with the
step delimiter as the stop string, then continue every candidate that stopped on a delimiter
(not EOS, not the length limit, no final answer yet) for up to ``k`` rounds. Each round is one
batched engine call over all still-running candidates of all requests, with ``n = 1`` and a seed
derived from (request seed, candidate index, round), so results do not depend on batching.
This generates no tokens past the k-th step (cutting an uncapped generation would waste them);
every token of every round is counted in the candidate's ``num_tokens``. The rollout's text is
the steps joined with the format's separator (``PromptFormat.join_steps``;
``PromptFormat.split_steps`` recovers them).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

from equiv.search.policies.prompt_format import PromptFormat
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


def derive_seed(seed: int, *parts: int) -> int:
    """A 31-bit seed from a request seed and indices, stable across runs and platforms."""
    data = ",".join(str(x) for x in (seed, *parts)).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & 0x7FFFFFFF


class StepPolicy:
    """Base class of the backends: implements :class:`equiv.search.types.Policy`."""

    fmt: PromptFormat
    tokenizer: Any
    temperature: float
    top_p: float
    max_new_tokens: int
    max_model_len: int | None = None

    def _configure(self, cfg: Any, tokenizer: Any) -> None:
        """Set what both backends take from a :class:`PolicyConfig`: prompt format and sampling."""
        from equiv.search.policies.prompts import resolve_format

        self.tokenizer = tokenizer
        self.fmt = resolve_format(
            cfg.prompt_format,
            cfg.model,
            tokenizer,
            step_delimiter=cfg.step_delimiter,
            system_prompt=cfg.system_prompt,
            end_at_answer=cfg.end_at_answer,
        )
        from equiv.search.policies.fewshot import with_exemplars  # base models: solved exemplars

        self.fmt = with_exemplars(self.fmt, cfg)
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

    def with_sampling(self, *, temperature: float | None = None, top_p: float | None = None) -> "StepPolicy":
        """A view of this policy with other sampling settings, sharing the loaded engine.

        For lookahead rollouts (greedy, ``temperature=0``) beside the sampling policy, without
        loading the model twice.
        """
        view = copy.copy(self)
        if temperature is not None:
            if temperature < 0:
                raise ValueError(f"temperature must be >= 0, got {temperature}")
            view.temperature = temperature
        if top_p is not None:
            view.top_p = top_p
        return view

    # -- the Policy protocol -------------------------------------------------------------
    def prompt(self, request: StepRequest, extra_steps: Sequence[str] = ()) -> str:
        """The prompt text for the step after ``request.steps`` (+ ``extra_steps``)."""
        return self.fmt.build(request.question, (*request.steps, *extra_steps), self.tokenizer)

    def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]:
        """``n`` candidates per request; one engine call per rollout round (one round if
        every request has ``max_steps == 1``)."""
        for req in requests:
            if req.n < 1:
                raise ValueError(f"StepRequest.n must be >= 1, got {req.n}")
            if req.max_steps < 1:
                raise ValueError(f"StepRequest.max_steps must be >= 1, got {req.max_steps}")
            if req.temperature is not None and req.temperature < 0:
                raise ValueError(f"StepRequest.temperature must be >= 0, got {req.temperature}")
        if not requests:
            return []
        prompts = [self.prompt(r) for r in requests]
        # A prompt with no room left in the context is not sampled (the engine would refuse
        # it): the request gets no candidates, which makes its node a dead end.
        fits = self._fits(prompts)
        live = [i for i, ok in enumerate(fits) if ok]
        sampled = self._sample(
            [prompts[i] for i in live],
            [requests[i].n for i in live],
            [requests[i].seed for i in live],
            self.fmt.step_delimiter,
            [self._temperature(requests[i]) for i in live],
        ) if live else []
        first: list[list[RawCompletion] | None] = [None] * len(requests)
        for i, raws in zip(live, sampled):
            first[i] = raws
        # Per candidate: steps, tokens, logprob, finished, truncated, still running.
        states: list[list[dict]] = []
        for req, raws in zip(requests, first):
            if raws is None:
                states.append([])
                continue
            if len(raws) != req.n:
                raise RuntimeError(f"engine returned {len(raws)} completions, expected {req.n}")
            states.append([self._start(raw) for raw in raws])
        max_rounds = max(r.max_steps for r in requests)
        for rnd in range(1, max_rounds):
            todo = [
                (i, j)
                for i, req in enumerate(requests)
                if req.max_steps > rnd
                for j, st in enumerate(states[i])
                if st["running"]
            ]
            if todo:
                prompts = [self.prompt(requests[i], states[i][j]["steps"]) for i, j in todo]
                for (i, j), ok in zip(todo, self._fits(prompts)):
                    states[i][j]["running"] = ok  # a rollout with no room left ends here
                todo = [(i, j) for i, j in todo if states[i][j]["running"]]
            if not todo:
                break
            raws = self._sample(
                [self.prompt(requests[i], states[i][j]["steps"]) for i, j in todo],
                [1] * len(todo),
                [derive_seed(requests[i].seed, j, rnd) for i, j in todo],
                self.fmt.step_delimiter,
                [self._temperature(requests[i]) for i, _ in todo],
            )
            for (i, j), (raw,) in zip(todo, raws):
                self._extend(states[i][j], raw)
        return [
            [
                Candidate(
                    text=self.fmt.join_steps(st["steps"]),
                    num_tokens=st["tokens"],
                    logprob=st["logprob"],
                    finished=st["finished"],
                    truncated=st["truncated"],
                )
                for st in row
            ]
            for row in states
        ]

    def _fits(self, prompts: Sequence[str]) -> list[bool]:
        """Does each prompt leave room for at least one generated token in ``max_model_len``?"""
        if self.max_model_len is None or not prompts:
            return [True] * len(prompts)
        lengths = [len(ids) for ids in self.tokenizer(list(prompts))["input_ids"]]
        return [n < self.max_model_len for n in lengths]

    def _start(self, raw: RawCompletion) -> dict:
        st = {"steps": [], "tokens": 0, "logprob": 0.0, "finished": False, "running": True, "truncated": False}
        self._extend(st, raw)
        return st

    def _extend(self, st: dict, raw: RawCompletion) -> None:
        step = self.fmt.clean_step(raw.text)
        st["steps"].append(step)
        st["tokens"] += raw.num_tokens
        st["logprob"] += raw.logprob
        # Neither EOS nor the delimiter: the token limit cut it. Such a step is incomplete (and
        # may be a runaway), so the search drops it; a final-answer marker does not rescue it.
        st["truncated"] = not (raw.eos or raw.stopped)
        st["finished"] = raw.eos or (self.fmt.end_at_answer and self.fmt.is_final(step))
        # Continue a rollout only from a complete, non-final step.
        st["running"] = raw.stopped and not st["finished"]
