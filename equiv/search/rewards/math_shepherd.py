"""Math-Shepherd PRM (``peiyi9979/math-shepherd-mistral-7b-prm``): P(``+``) at each step tag.

Input format (the model's training format): ``question + " " + step_1 + " ки\\n" + step_2 +
" ки\\n" ...`` -- every step followed by the step tag ``ки``. One causal-LM forward pass; at each
tag position the logits of the two candidate tokens ``+`` and ``-`` are softmaxed against each
other and P(``+``) is the step's score. Token ids are found as the model card does:
``encode("+ -")`` without special tokens when that gives exactly two tokens (Mistral: 648, 387),
else the last token of ``encode("+")`` / ``encode("-")``; the tag is the last token of
``encode("ки")`` (Mistral: 12902).

Only two output rows are computed (:class:`CandidateHead`): the decoder runs as usual and its
hidden states meet the ``+``/``-`` rows of the LM head alone, not the whole vocabulary (32k rows
for Math-Shepherd's Mistral, 152k for a Qwen2-shaped PRM; the full head also materialised
``rows x length x vocab`` logits per forward). Same arithmetic for those two columns.

Batched: all sequences of a call are sorted by length, cut into ``batch_size`` chunks and
right-padded (positions of real tokens are unaffected by right padding in a causal model); the
tag positions are read from each row's own ``input_ids``, and the original order is restored.
A step that itself contains ``ки`` would add a spurious tag, so ``ки`` inside step text is
removed first; the number of tags found is checked against the number of steps.

Siblings share their prefix (option ``share_prefix``, on by default): requests with the same
question and the same steps but the last -- the children of one node -- run that prefix once and
reuse its KV cache (:mod:`equiv.search.rewards.prefix_sharing`); the rest take the padded path.
Key/values are also kept across calls in an LRU (option ``head_cache_size``, 64 sequences by
default; 0 turns it off): each question's, so a problem's question runs once per search, and with
``cache_children: true`` every scored child's, so that its own children one depth later run only
their new step (worth it for deep searches; needs a capacity of about twice the children per
depth, or evictions cost more than they save).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from equiv.search.rewards.batching import padded_batches
from equiv.search.rewards.prefix_sharing import (
    CachedSequence,
    HeadCache,
    SiblingGroup,
    chunk_groups,
    make_groups,
    shared_prefix_logits,
)
from equiv.devices import pad_token_id
from equiv.errors import InputError
from equiv.search.conventions import MATH_SHEPHERD_STEP_TAG
from equiv.search.rewards.loading import check_options, load_prm
from equiv.search.types import ScoreRequest

STEP_TAG = MATH_SHEPHERD_STEP_TAG
OPTIONS = ("step_tag", "good_token", "bad_token", "share_prefix", "head_cache_size", "cache_children", "candidate_head")
"""``reward.options`` this kind reads (the constructor's keyword arguments)."""


class CandidateHead:
    """A causal LM called like the model, returning logits of the candidate tokens only.

    ``head(input_ids=..., attention_mask=..., ...)`` returns an object with ``logits`` of shape
    ``(rows, length, len(token_ids))`` and ``past_key_values``. The decoder (``get_decoder()``)
    runs as usual; its last hidden states go through the selected rows of the output embedding.
    Models whose head is not a plain linear layer, or that post-process logits (softcapping,
    logit scaling), get the full head and a column selection instead: always the model's own
    numbers.
    """

    def __init__(self, model: torch.nn.Module, token_ids: Sequence[int], two_rows: bool = True) -> None:
        self.model = model
        self.token_ids = list(token_ids)
        self._index = torch.tensor(self.token_ids, dtype=torch.long)
        self._head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        config = getattr(model, "config", None)
        post_processed = any(
            getattr(config, name, None) not in (None, 1.0)
            for name in ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")
        )
        exact = isinstance(self._head, torch.nn.Linear) and not post_processed and hasattr(model, "get_decoder")
        self.decoder = model.get_decoder() if two_rows and exact else None

    @property
    def config(self):
        return self.model.config

    def __call__(self, **inputs: Any):
        from types import SimpleNamespace

        if self.decoder is None:
            out = self.model(**inputs)
            return SimpleNamespace(logits=out.logits[..., self.token_ids], past_key_values=out.past_key_values)
        out = self.decoder(**inputs)
        # Selected per call (two rows: nothing to cache), so a later .to(device/dtype) is followed.
        weight = self._head.weight
        index = self._index.to(weight.device)
        bias = None if self._head.bias is None else self._head.bias.index_select(0, index)
        logits = torch.nn.functional.linear(out.last_hidden_state, weight.index_select(0, index), bias)
        return SimpleNamespace(logits=logits, past_key_values=out.past_key_values)


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
        cache_children: bool = False,
        candidate_head: bool = True,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.share_prefix = bool(share_prefix)
        if int(head_cache_size) < 0:
            raise InputError(f"must be >= 0, got {head_cache_size}", field="reward.options.head_cache_size")
        self.head_cache = HeadCache(int(head_cache_size)) if self.share_prefix and int(head_cache_size) > 0 else None
        self.cache_children = bool(cache_children) and self.head_cache is not None
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
        pad = pad_token_id(tokenizer)
        self.pad_id = pad
        self.calls = 0  # forward passes run (PRM work, reported separately from policy tokens)
        # candidate_head false: the full LM head, then a column selection (the benchmarks' baseline).
        is_module = isinstance(model, torch.nn.Module)
        self.head = CandidateHead(model, self.candidate_ids, two_rows=bool(candidate_head)) if is_module else None
        if self.head is not None:
            (self.head.decoder or model).register_forward_pre_hook(self._count_forward)

    @classmethod
    def from_config(cls, cfg) -> "MathShepherdPRM":
        from transformers import AutoModelForCausalLM

        check_options(cfg.options, OPTIONS, "math_shepherd")
        model, tokenizer = load_prm(cfg, AutoModelForCausalLM)
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
        else:
            groups, lone = [], [(i, ids) for _, i, ids in keyed]
        select = self._candidate_logits
        question_ids: dict[str, list[int]] = {}  # each question tokenized once per call
        for chunk in chunk_groups(groups, self.batch_size):
            if self.head_cache is not None:  # heads chosen per chunk, right before use: none evicted between
                chunk = [self._with_cached_head(group, requests[group.members[0][0]], question_ids) for group in chunk]
            per_group = shared_prefix_logits(self._scorer, chunk, pad_id=self.pad_id, device=self.device,
                                             select=select, head_cache=self.head_cache, keep_kv=self.cache_children)
            for group, members in zip(chunk, per_group):
                for (i, ids), out in zip(group.members, members):
                    results[i] = list(group.head_scores) + self._tag_scores(
                        requests[i], ids, out.logits, out.offset, expected=len(requests[i].steps) - len(group.head_scores)
                    )
                    if out.kv is not None:
                        self.head_cache.put(tuple(ids), CachedSequence(out.kv, tuple(results[i])))
        for chunk, input_ids, mask in padded_batches(lone, self.batch_size, self.pad_id, self.device):
            logits = select(self._scorer(input_ids=input_ids, attention_mask=mask).logits)
            for row, (i, ids) in enumerate(chunk):
                results[i] = self._tag_scores(requests[i], ids, logits[row, : len(ids)])
        return results

    def _with_cached_head(
        self, group: SiblingGroup, request: ScoreRequest, question_ids: dict[str, list[int]]
    ) -> SiblingGroup:
        """The group with its head: the parent's whole sequence when cached, else the question.

        The parent was scored as a child one depth earlier: its key/values and its step scores
        were kept together, so its scores are reused, not recomputed. Only children are kept
        (``cache_children``), so without it the parent is not looked up. The question holds no tag.
        """
        if self.cache_children and len(request.steps) > 1:
            parent = self.tokenizer.encode(self.format(ScoreRequest(request.question, request.steps[:-1])))
            entry = self.head_cache.get(tuple(parent))
            if entry is not None and len(entry.scores) == len(request.steps) - 1:
                chosen = group.with_head(parent, entry.scores)
                if chosen.head_len:
                    return chosen
        question = self._question(request)
        if question not in question_ids:
            question_ids[question] = self.tokenizer.encode(question)
        return group.with_head(question_ids[question])

    def _count_forward(self, _module: torch.nn.Module, _args: tuple) -> None:
        self.calls += 1

    @property
    def _scorer(self) -> Any:
        """What runs a forward pass: the two-row head, or the model (a stand-in without modules)."""
        return self.head if self.head is not None else self.model

    def _candidate_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The ``+``/``-`` columns as float32 on the CPU.

        One small copy per forward pass; the per-sequence tag lookups that follow then read host
        memory instead of each waiting for the GPU.
        """
        if self.head is None:
            logits = logits[..., self.candidate_ids]
        return logits.float().cpu()

    def _tag_scores(
        self, request: ScoreRequest, ids: list[int], logits: torch.Tensor, offset: int = 0, expected: int | None = None
    ) -> list[float]:
        """P(+) at each tag at or after ``offset``, from the (length - offset, 2) logits of positions offset:.

        ``expected`` is the number of tags there (all steps when nothing came from a cached head).
        """
        tags = [pos - offset for pos, token in enumerate(ids) if token == self.step_tag_id and pos >= offset]
        expected = len(request.steps) if expected is None else expected
        if len(tags) != expected:
            raise RuntimeError(
                f"found {len(tags)} step tags for {expected} steps: the tokenizer does not keep "
                f"{self.step_tag!r} as a separate token after a space (set reward.options.step_tag)"
            )
        probs = torch.softmax(logits[tags], dim=-1)[:, 0]
        return [float(p) for p in probs.tolist()]
