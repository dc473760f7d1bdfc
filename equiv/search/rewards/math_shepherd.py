"""Math-Shepherd PRM (``peiyi9979/math-shepherd-mistral-7b-prm``): P(``+``) at each step tag.

Input format (the model's training format): ``question + " " + step_1 + " ки\\n" + step_2 +
" ки\\n" ...`` -- every step followed by the step tag ``ки``. One causal-LM forward pass; at each
tag position the logits of the two candidate tokens ``+`` and ``-`` are softmaxed against each
other and P(``+``) is the step's score. Token ids are found as the model card does:
``encode("+ -")`` without special tokens when that gives exactly two tokens (Mistral: 648, 387),
else the last token of ``encode("+")`` / ``encode("-")``; the tag is the last token of
``encode("ки")`` (Mistral: 12902).

Batched: all sequences of a call are sorted by length, cut into ``batch_size`` chunks and
right-padded (positions of real tokens are unaffected by right padding in a causal model); the
tag positions are read from each row's own ``input_ids``, and the original order is restored.
A step that itself contains ``ки`` would add a spurious tag, so ``ки`` inside step text is
removed first; the number of tags found is checked against the number of steps.

Siblings share their prefix (option ``share_prefix``, on by default): requests with the same
question and the same steps but the last -- the children of one node -- run that prefix once and
reuse its KV cache (:mod:`equiv.search.rewards.prefix_sharing`); the rest take the padded path.
The question's key/values are also kept across calls (option ``head_cache_size``, 64 questions by
default; 0 turns it off), so each problem's question runs once per search, not once per node.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from equiv.backbones import resolve_model_name
from equiv.search.rewards.batching import padded_batches
from equiv.search.rewards.prefix_sharing import HeadCache, chunk_groups, make_groups, shared_prefix_logits
from equiv.search.types import ScoreRequest

STEP_TAG = "ки"


class MathShepherdPRM:
    """:class:`equiv.search.types.RewardModel` for Math-Shepherd-style PRMs."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 8,
        step_tag: str = STEP_TAG,
        good_token: str = "+",
        bad_token: str = "-",
        share_prefix: bool = True,
        head_cache_size: int = 64,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.share_prefix = bool(share_prefix)
        if int(head_cache_size) < 0:
            from equiv.errors import InputError

            raise InputError(f"must be >= 0, got {head_cache_size}", field="reward.options.head_cache_size")
        self.head_cache = HeadCache(int(head_cache_size)) if self.share_prefix and int(head_cache_size) > 0 else None
        self.step_tag = step_tag
        self.step_tag_id = tokenizer.encode(step_tag, add_special_tokens=False)[-1]
        pair = tokenizer.encode(f"{good_token} {bad_token}", add_special_tokens=False)
        if len(pair) == 2:
            self.candidate_ids = list(pair)
        else:
            self.candidate_ids = [
                tokenizer.encode(good_token, add_special_tokens=False)[-1],
                tokenizer.encode(bad_token, add_special_tokens=False)[-1],
            ]
        if self.candidate_ids[0] == self.candidate_ids[1]:
            raise ValueError(f"the PRM tokenizer maps {good_token!r} and {bad_token!r} to the same token")
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        self.pad_id = pad
        self.calls = 0  # forward passes run (PRM work, reported separately from policy tokens)
        if isinstance(model, torch.nn.Module):
            model.register_forward_pre_hook(self._count_forward)

    @classmethod
    def from_config(cls, cfg) -> "MathShepherdPRM":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from equiv.search.policies.transformers_policy import resolve_device, resolve_dtype

        path = resolve_model_name(cfg.model)
        device = resolve_device(cfg.device)
        dtype = resolve_dtype(cfg.dtype, device)
        if dtype == "auto":
            dtype = torch.bfloat16  # the 7B PRM in bf16 fits beside a policy; fp32 does not help
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=cfg.trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=cfg.trust_remote_code)
        model.to(device).eval()
        known = {"step_tag", "good_token", "bad_token", "share_prefix", "head_cache_size"}
        unknown = set(cfg.options) - known
        if unknown:
            from equiv.errors import InputError

            raise InputError(
                f"unknown option(s) {', '.join(sorted(unknown))} for math_shepherd; known: {', '.join(sorted(known))}",
                field="reward.options",
            )
        return cls(model, tokenizer, batch_size=cfg.batch_size, **cfg.options)

    def format(self, request: ScoreRequest) -> str:
        """The PRM input text: question, then each step followed by `` ки\\n``."""
        steps = [s.replace(self.step_tag, "").strip() for s in request.steps]
        return f"{self._question(request)} " + "".join(f"{s} {self.step_tag}\n" for s in steps)

    def _question(self, request: ScoreRequest) -> str:
        return request.question.replace(self.step_tag, "").strip()

    def clear_cache(self) -> None:
        """Forget the questions' cached key/values (benchmarks call this between timed runs)."""
        if self.head_cache is not None:
            self.head_cache.clear()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        """P(+) per step for each request (an empty list for a request with no steps)."""
        results: list[list[float]] = [[] for _ in requests]
        keyed = [
            ((req.question, req.steps[:-1]), i, self.tokenizer.encode(self.format(req)))
            for i, req in enumerate(requests)
            if req.steps
        ]
        if self.share_prefix:
            groups, lone = make_groups(keyed, self.batch_size)
            if self.head_cache is not None:  # the question (no tags in it) is the cacheable head
                heads: dict[str, list[int]] = {}
                for gi, group in enumerate(groups):
                    question = self._question(requests[group.members[0][0]])
                    if question not in heads:
                        heads[question] = self.tokenizer.encode(question)
                    groups[gi] = group.with_head(heads[question])
        else:
            groups, lone = [], [(i, ids) for _, i, ids in keyed]
        select = self._candidate_logits
        for chunk in chunk_groups(groups, self.batch_size):
            per_group = shared_prefix_logits(self.model, chunk, pad_id=self.pad_id, device=self.device,
                                             select=select, head_cache=self.head_cache)
            for group, member_logits in zip(chunk, per_group):
                for (i, ids), (offset, logits) in zip(group.members, member_logits):
                    results[i] = self._tag_scores(requests[i], ids, logits, offset)
        for chunk, input_ids, mask in padded_batches(lone, self.batch_size, self.pad_id, self.device):
            logits = select(self.model(input_ids=input_ids, attention_mask=mask).logits)
            for row, (i, ids) in enumerate(chunk):
                results[i] = self._tag_scores(requests[i], ids, logits[row, : len(ids)])
        return results

    def _count_forward(self, _module: torch.nn.Module, _args: tuple) -> None:
        self.calls += 1

    def _candidate_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Keep the ``+``/``-`` columns only (the rest of the vocabulary is never needed)."""
        return logits[..., self.candidate_ids].float()

    def _tag_scores(self, request: ScoreRequest, ids: list[int], logits: torch.Tensor, offset: int = 0) -> list[float]:
        """P(+) at each tag of one sequence, from the (length - offset, 2) logits of positions offset:."""
        tags = [pos - offset for pos, token in enumerate(ids) if token == self.step_tag_id]
        if any(pos < 0 for pos in tags):
            raise RuntimeError("a step tag fell inside the cached question head (report this: it is a bug)")
        if len(tags) != len(request.steps):
            raise RuntimeError(
                f"found {len(tags)} step tags for {len(request.steps)} steps: the tokenizer does not keep "
                f"{self.step_tag!r} as a separate token after a space (set reward.options.step_tag)"
            )
        probs = torch.softmax(logits[tags], dim=-1)[:, 0]
        return [float(p) for p in probs.tolist()]
