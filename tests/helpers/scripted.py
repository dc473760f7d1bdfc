"""Deterministic scripted engines for search tests (no model, exact arithmetic).

- :class:`TablePolicy` / :class:`TableReward`: the candidates after each partial solution and the
  score of each step text are written out by the test, so selection, PUCT and merge rules can be
  checked by hand.
- :class:`SeededPolicy` / :class:`KeyedReward`: a small "random" math world whose outputs depend
  only on each request's content and seed (never on what else is batched with it) — the property
  the cross-problem batcher relies on. It proposes restated variants (``"so " + step``) and exact
  duplicates, so pruning has something to do.
- :class:`RestateJudge`: a judge (:class:`equiv.prune.boundary.SiblingJudge`'s ``group`` and ``pair_verdicts``) that calls two steps equivalent when they differ only by the
  ``"so "`` restatement marker.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from equiv.judge.decide import Verdict, decide
from equiv.judge.policy import DecisionPolicy
from equiv.prune.boundary import GroupsSiblings
from equiv.search.types import Candidate, ScoreRequest, StepRequest


def cand(text: str, tokens: int = 5, logprob: float = -5.0, finished: bool = False) -> Candidate:
    return Candidate(text=text, num_tokens=tokens, logprob=logprob, finished=finished)


@dataclass
class TablePolicy:
    """``table[steps]`` lists the candidates offered after the partial solution ``steps``."""

    table: Mapping[tuple[str, ...], Sequence[Candidate]]
    requests: list[StepRequest] = field(default_factory=list)
    calls: int = 0

    def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]:
        self.calls += 1
        self.requests.extend(requests)
        out = []
        for r in requests:
            if r.steps not in self.table:
                raise KeyError(f"no scripted candidates after {r.steps!r}")
            out.append(list(self.table[r.steps])[: r.n])
        return out


@dataclass
class TableReward:
    """Score of a step = ``values[step text]`` (default 0.5); every step of a request is scored."""

    values: Mapping[str, float]
    default: float = 0.5
    requests: list[ScoreRequest] = field(default_factory=list)
    calls: int = 0

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        self.calls += 1
        self.requests.extend(requests)
        return [[float(self.values.get(s, self.default)) for s in r.steps] for r in requests]


def _h(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()[:8], "big")


@dataclass
class SeededPolicy:
    """Candidates drawn from ``random.Random(hash(request content, seed))``.

    Step d proposes ``"add {k}"`` for a few k (so exact duplicates occur); a third of them are
    restated as ``"so add {k}"``. A solution finishes at ``finish_depth`` with
    ``"answer {sum of the k's}"``, so different paths reach different answers. A question
    containing ``fail_marker`` raises (to test per-problem errors); after ``interrupt_after``
    calls a KeyboardInterrupt is raised (to test resume).
    """

    finish_depth: int = 3
    deep_marker: str = "DEEP"  # questions holding it finish two steps later
    fail_marker: str = "FAIL"
    interrupt_after: int | None = None
    calls: int = 0
    batch_sizes: list[int] = field(default_factory=list)

    def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]:
        self.calls += 1
        if self.interrupt_after is not None and self.calls > self.interrupt_after:
            raise KeyboardInterrupt
        self.batch_sizes.append(len(requests))
        out = []
        for r in requests:
            if self.fail_marker in r.question:
                raise RuntimeError("scripted policy failure")
            rng = random.Random(_h(r.question, r.steps, r.n, r.seed, r.temperature))
            depth = len(r.steps) + 1
            finish = self.finish_depth + (2 if self.deep_marker in r.question else 0)
            cands = []
            for _ in range(r.n):
                k = rng.randint(1, 3)
                tokens = rng.randint(2, 9)
                logprob = -rng.random() * tokens
                if depth >= finish:
                    total = sum(int(s.split()[-1]) for s in r.steps if s.split()[-1].isdigit()) + k
                    cands.append(Candidate(f"add {k} answer {total}", tokens, logprob, True))
                else:
                    text = f"so add {k}" if rng.random() < 0.33 else f"add {k}"
                    cands.append(Candidate(text, tokens, logprob, False))
            out.append(cands)
        return out


@dataclass
class KeyedReward:
    """A step's score is a hash of (question, steps up to it), in [0, 1)."""

    calls: int = 0

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        self.calls += 1
        return [
            [(_h(r.question, r.steps[: i + 1]) % 1000) / 1000 for i in range(len(r.steps))] for r in requests
        ]


def threshold_verdicts(judge: Any, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
    """A probabilities-only test judge's verdicts: its ``pair_probabilities`` decided by the one
    evaluator at its ``threshold`` (no shortcut, prefilter or guard), every pair a model call when
    it says it is ``learned``."""
    policy = DecisionPolicy(threshold=float(judge.threshold), prefilter=None, same_step="off")
    learned = bool(getattr(judge, "learned", True))
    return [replace(v, model_call=learned) for v in decide(list(pairs), policy, judge.pair_probabilities(pairs))]


@dataclass
class RestateJudge(GroupsSiblings):
    """Equivalent (1.0) iff the steps are equal once a leading ``"so "`` is dropped."""

    name: str = "restate"
    threshold: float = 0.5
    learned: bool = True  # count its pairs as model calls (judge_calls), as a trained judge's
    pairs_seen: list[tuple[str, str]] = field(default_factory=list)

    def pair_probabilities(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str] | None = None) -> list[float]:
        self.pairs_seen.extend(pairs)
        return [1.0 if a.removeprefix("so ") == b.removeprefix("so ") else 0.0 for a, b in pairs]

    def pair_verdicts(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str] | None = None, *,
                      score_ruled: bool = False) -> list[Verdict]:
        return threshold_verdicts(self, pairs)


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    answer: str
    kind: str = "gsm8k"


def simple_extract(text: str, kind: str) -> str | None:
    """'... answer N' -> 'N' (the scripted world's answer format)."""
    words = text.split()
    if "answer" in words:
        i = len(words) - 1 - words[::-1].index("answer")
        if i + 1 < len(words):
            return words[i + 1]
    return None


def simple_grade(prediction: str | None, answer: str, kind: str) -> bool:
    return prediction is not None and prediction.strip() == answer.strip()


def problems(n: int, *, fail: Sequence[int] = ()) -> list[Problem]:
    return [
        Problem(id=f"p{i}", question=f"question {i}" + (" FAIL" if i in fail else ""), answer=str(3 + i % 5))
        for i in range(n)
    ]


# -- a CLI entry with scripted engines (subprocess tests: kill mid-run, resume) -----------------
class SlowPolicy(SeededPolicy):
    """SeededPolicy that sleeps per call, so a test can kill the process mid-run."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def generate(self, requests):
        import time

        time.sleep(self.delay)
        return super().generate(requests)


def scripted_factory(init):
    """Engines for ``equiv.search.cli.eval_main(..., engine_factory=...)``: scripted, no model."""
    import os

    from equiv.search.runner import Engines

    delay = float(os.environ.get("SCRIPTED_DELAY", "0"))
    policy = SlowPolicy(delay) if delay else SeededPolicy()
    prune = init.pruner.strategy != "none"
    return Engines(policy, KeyedReward(), RestateJudge() if prune else None)


if __name__ == "__main__":
    import sys

    from equiv.search.cli import eval_main

    sys.exit(eval_main(sys.argv[1:], engine_factory=scripted_factory))


# -- a scripted engine behind the real StepPolicy (prompt building, truncation, context limit) --
class CharTokenizer:
    """One token per character: prompt lengths are easy to reason about in tests."""

    def __call__(self, texts):
        return {"input_ids": [list(t) for t in texts]}


class ScriptedEngine:
    """A :class:`equiv.search.policies.base.StepPolicy` whose engine call is a script.

    ``script(prompt)`` returns raw completions for one prompt, repeated in turn to make ``n``. Like vLLM, it raises when a prompt leaves no room in ``max_model_len``.
    """

    def __new__(cls, script, *, max_model_len: int = 4096, max_new_tokens: int = 1024, end_at_answer=None):
        from equiv.search.policies.base import StepPolicy
        from equiv.search.policies.prompts import resolve_format

        class _Engine(StepPolicy):
            def _sample(self, prompts, ns, seeds, stop, temperatures=None):
                self.sampled.extend(prompts)
                out = []
                for prompt, n in zip(prompts, ns):
                    if len(prompt) >= self.max_model_len:
                        raise ValueError(f"prompt of {len(prompt)} tokens exceeds max_model_len {self.max_model_len}")
                    made = list(script(prompt))
                    out.append([made[i % len(made)] for i in range(n)])
                return out

        engine = _Engine()
        engine.tokenizer = CharTokenizer()
        engine.fmt = resolve_format("plain", "scripted", end_at_answer=end_at_answer)
        engine.temperature, engine.top_p = 0.7, 1.0
        engine.max_new_tokens, engine.max_model_len = max_new_tokens, max_model_len
        engine.sampled = []
        return engine


def raw(text: str, *, tokens: int = 5, logprob: float = -5.0, end: str = "stop"):
    """A RawCompletion ending on the delimiter (``stop``), EOS (``eos``) or the token limit (``length``)."""
    from equiv.search.policies.base import RawCompletion

    return RawCompletion(text=text, num_tokens=tokens, logprob=logprob, eos=end == "eos", stopped=end == "stop")
