"""The contracts between search algorithms and the engines they drive.

Algorithms never talk to vLLM, transformers or a PRM directly: they ask for *batches* of work
through these small protocols, so that (a) a scripted policy and PRM can drive them in unit
tests, and (b) a dispatcher can merge the requests of many problems into one engine call.
Every call takes a sequence and returns one result per item, in order. The judge's contract
(sibling families in, their classes out) is the judge's own:
:class:`equiv.prune.boundary.SiblingJudge`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable



@dataclass(frozen=True)
class StepRequest:
    """Ask the policy for ``n`` sampled candidates for the next step after ``steps``.

    ``seed`` makes the sample reproducible per request, independent of what else is batched with
    it (vLLM takes a per-request seed), which is what lets concurrent and sequential runs give
    the same records. A request is one step, cut at the policy's step delimiter (a lookahead
    rollout asks step by step). ``temperature`` overrides the policy's sampling temperature for
    this request (lookahead's greedy rollouts, batched beside sampling requests).
    """

    question: str
    steps: tuple[str, ...]
    n: int
    seed: int
    # None = the policy's configured temperature; lookahead rollouts ask for 0.0 (greedy).
    temperature: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One sampled continuation, as the policy returned it.

    ``num_tokens`` counts every completion token the engine generated for it (docs/design.md §2:
    dropped and pruned candidates count too). ``finished`` means the solution ended (EOS or a
    final answer), not merely the step. ``truncated`` means the generation hit the token limit
    (``max_new_tokens`` or the context) without a clean stop: the search drops such a candidate
    (its tokens still count), as the reference kept only completions with finish reason "stop".
    """

    text: str
    num_tokens: int
    logprob: float  # sum of the completion's token log-probabilities
    finished: bool
    truncated: bool = False
    # Answered by the completions cache (policy.cache): its tokens count in generated_tokens (what
    # the search asked for) but not in engine_tokens (what an engine generated in this run).
    cached: bool = False


@runtime_checkable
class Policy(Protocol):
    """Generates candidate next steps. One call = one batched engine call."""

    def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]: ...


@dataclass(frozen=True)
class ScoreRequest:
    """Ask the PRM for a score per step of ``steps`` (a partial or full solution)."""

    question: str
    steps: tuple[str, ...]


@runtime_checkable
class RewardModel(Protocol):
    """Scores reasoning steps; each implementation owns its step-tag convention."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]: ...
