"""Score sibling sequences with their shared prefix run once (KV-cache reuse in a causal PRM).

In tree search the PRM scores the ``width`` children of a node together: the question and the
path to the node are the same for all of them, only the last step differs. A plain padded batch
runs that prefix once per child; here it runs once per sibling group and its key/value cache is
copied to the children, which then run only their own last tokens. With a GSM8K question of
~100 tokens and steps of ~15, four siblings cost ~160 token positions instead of ~460.

Exactness: the tokens are the ones the plain path would see. The prefix of a group is the longest
common prefix of its members' *token ids* (not text: BPE merges across the boundary would make a
text prefix unsafe), capped so every member keeps at least one token of its own. Prefixes are
right-padded and batched; each child's suffix is placed after its group's padded prefix, with an
attention mask that hides the padding and explicit position ids (prefix length + offset), so
rotary positions equal the unshared ones. In float32 the logits match the plain path to ~1e-5
(tested).

Across calls, the *head* of a group comes from a small LRU of key/value tensors
(:class:`HeadCache`): the question (the same at every depth of a problem's search), or -- when
the caller keeps every scored child's key/values (``keep_kv``; Math-Shepherd's
``cache_children``) -- the parent node's whole sequence, so a depth costs only its children's new
tokens. Keys are token-id tuples, so a hit is exactly the tokens a recomputation would see.

Works with any Hugging Face causal LM whose forward accepts ``past_key_values`` (a
``DynamicCache``), a 2D ``attention_mask`` with holes and ``position_ids``: Llama, Mistral
(Math-Shepherd), Qwen2. Turn it off with the PRM option ``share_prefix: false`` for a model that
does not.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence

import torch

from equiv.devices import padded_rows

Select = Callable[[torch.Tensor], torch.Tensor]  # the model's (batch, length, k) logits -> what is kept


@dataclass(frozen=True)
class SiblingGroup:
    """Sequences that share a prefix of ``prefix_len`` token ids (each has at least one more)."""

    members: tuple[tuple[int, list[int]], ...]  # (request index, full token ids)
    prefix_len: int
    head_len: int = 0  # leading tokens whose key/values may come from a HeadCache (<= prefix_len)
    head_scores: tuple[float, ...] = ()  # the caller's scores of positions inside the head

    def with_head(self, head: Sequence[int], scores: Sequence[float] = ()) -> "SiblingGroup":
        """This group with ``head`` as its cacheable head, when it is a prefix of the shared prefix."""
        n = len(head)
        if 0 < n <= self.prefix_len and list(self.members[0][1][:n]) == list(head):
            return replace(self, head_len=n, head_scores=tuple(scores))
        return replace(self, head_len=0, head_scores=())

    @property
    def prefix(self) -> list[int]:
        return self.members[0][1][: self.prefix_len]

    @property
    def head_key(self) -> tuple[int, ...]:
        """The head's token ids: its key in a :class:`HeadCache`."""
        return tuple(self.members[0][1][: self.head_len])


KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values of shape (1, heads, length, dim)


@dataclass(frozen=True)
class CachedSequence:
    """Key/values of a token sequence, and the caller's scores of positions in it (PRM: P(+) per step)."""

    kv: KV
    scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class MemberLogits:
    """What :func:`shared_prefix_logits` returns per member."""

    offset: int  # logits start at this position (the head's length; 0 without a head)
    logits: torch.Tensor  # (len(ids) - offset, k) after ``select``
    kv: KV | None  # the whole sequence's key/values when asked to keep them, else None


class HeadCache:
    """Least-recently-used key/value tensors of scored sequences and questions, keyed by token ids.

    ``capacity`` bounds memory: the 7B Math-Shepherd PRM keeps ~130 KB per token in bf16, so a
    200-token sequence is ~26 MB and the default 64 entries ~1.7 GB on a GPU. By default it holds
    questions. When the caller also stores every scored child (``keep_kv``), parents are found
    one depth later only if the capacity is about twice the children per depth (problems in
    flight x beam x width); an evicted parent falls back to the question.
    """

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], CachedSequence] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: tuple[int, ...]) -> CachedSequence | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: tuple[int, ...], entry: CachedSequence) -> None:
        if self.capacity == 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


def common_prefix_len(sequences: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix, capped so every sequence keeps one token of its own."""
    shortest = min(len(s) for s in sequences)
    limit = shortest - 1
    first = sequences[0]
    for pos in range(max(limit, 0)):
        token = first[pos]
        if any(s[pos] != token for s in sequences[1:]):
            return pos
    return max(limit, 0)


def make_groups(
    keyed: Sequence[tuple[object, int, list[int]]], max_members: int, min_prefix: int = 1
) -> tuple[list[SiblingGroup], list[tuple[int, list[int]]]]:
    """Split ``(group key, request index, ids)`` into sharing groups and lone sequences.

    Requests with the same key (the PRM uses question + all steps but the last) form a group of
    at most ``max_members`` (a larger set is split in order). A group of one, or one whose members
    share fewer than ``min_prefix`` tokens, gains nothing and is returned as lone sequences for
    the plain padded path.
    """
    by_key: dict[object, list[tuple[int, list[int]]]] = {}
    for key, index, ids in keyed:
        by_key.setdefault(key, []).append((index, ids))
    groups: list[SiblingGroup] = []
    lone: list[tuple[int, list[int]]] = []
    for members in by_key.values():
        for start in range(0, len(members), max(1, max_members)):
            part = members[start : start + max(1, max_members)]
            shared = common_prefix_len([ids for _, ids in part]) if len(part) > 1 else 0
            if len(part) > 1 and shared >= min_prefix:
                groups.append(SiblingGroup(tuple(part), shared))
            else:
                lone.extend(part)
    return groups, lone


def chunk_groups(groups: Sequence[SiblingGroup], max_members: int) -> Iterator[list[SiblingGroup]]:
    """Consecutive groups with at most ``max_members`` sequences per chunk (one set of forward passes each)."""
    chunk: list[SiblingGroup] = []
    size = 0
    for group in sorted(groups, key=lambda g: g.prefix_len):  # similar prefix lengths pad little
        if chunk and size + len(group.members) > max_members:
            yield chunk
            chunk, size = [], 0
        chunk.append(group)
        size += len(group.members)
    if chunk:
        yield chunk


def _head_kv(
    model: torch.nn.Module, groups: Sequence[SiblingGroup], cache: HeadCache, pad_id: int, device: torch.device
) -> dict[tuple[int, ...], KV]:
    """Key/values of every group's head: from ``cache``, the missing ones in one padded forward.

    All lookups happen before the missing heads are stored, so a head the caller saw in the
    cache cannot be evicted in between. A head computed here has no scores: the caller may only
    choose, as a possibly missing head, text whose positions it never reads (the question).
    """
    heads: dict[tuple[int, ...], KV] = {}
    missing: list[tuple[int, ...]] = []
    for group in groups:
        if group.head_len == 0:
            continue
        key = group.head_key
        if key in heads or key in missing:
            continue
        entry = cache.get(key)
        if entry is None:
            missing.append(key)
            cache.misses += 1
        else:
            heads[key] = entry.kv
            cache.hits += 1
    if missing:
        ids, mask = padded_rows(missing, pad_id)
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=True)
        layers = out.past_key_values.layers
        for row, key in enumerate(missing):
            n = len(key)
            kv = [(layer.keys[row : row + 1, :, :n].clone(), layer.values[row : row + 1, :, :n].clone()) for layer in layers]
            heads[key] = kv
            cache.put(key, CachedSequence(kv))
    return heads


def _padded_head_cache(
    model: torch.nn.Module, groups: Sequence[SiblingGroup], heads: dict[tuple[int, ...], KV], device: torch.device
):
    """A batch cache of the groups' heads, right-padded (zeros) to the longest, and its mask."""
    from transformers import DynamicCache

    width = max(g.head_len for g in groups)
    mask = torch.zeros((len(groups), width), dtype=torch.long, device=device)
    sample = next(iter(heads.values()))
    layers = []
    for layer_idx, (k0, v0) in enumerate(sample):
        keys = k0.new_zeros((len(groups), k0.shape[1], width, k0.shape[3]))
        values = v0.new_zeros((len(groups), v0.shape[1], width, v0.shape[3]))
        for row, group in enumerate(groups):
            if group.head_len:
                k, v = heads[group.head_key][layer_idx]
                keys[row, :, : group.head_len] = k[0]
                values[row, :, : group.head_len] = v[0]
        layers.append((keys, values))
    for row, group in enumerate(groups):
        mask[row, : group.head_len] = 1
    return DynamicCache(ddp_cache_data=layers, config=model.config), mask


def _member_kv(cache, row: int, positions: torch.Tensor) -> KV:
    """One member's key/values at ``positions`` (its real tokens) out of the batch cache."""
    return [
        (layer.keys[row : row + 1, :, positions].clone(), layer.values[row : row + 1, :, positions].clone())
        for layer in cache.layers
    ]


@torch.no_grad()
def shared_prefix_logits(
    model: torch.nn.Module,
    groups: Sequence[SiblingGroup],
    *,
    pad_id: int,
    device: torch.device,
    select: Select,
    head_cache: HeadCache | None = None,
    keep_kv: bool = False,
) -> list[list[MemberLogits]]:
    """Per group, per member: the ``select``-ed logits of positions ``offset:`` (and its key/values).

    ``offset`` is the group's ``head_len`` when its head came through ``head_cache`` (a head's
    positions get no logits: the caller keeps their scores in ``head_scores`` or never reads
    them), else 0. Up to three forward passes for all of ``groups``: missing heads, the rest of
    the padded prefixes over the heads' cache, then every member's suffix over its group's cache.
    With ``keep_kv`` each member also gets its whole sequence's key/values, for the caller to
    cache so that the member's own children reuse them. ``select`` is applied to each forward's
    logits once, before any per-member slicing (the PRM's model already returns only its two
    token columns and ``select`` moves them to the host).
    """
    if head_cache is None or not any(g.head_len for g in groups):
        groups = [replace(g, head_len=0) for g in groups]
        cache, head_mask = None, torch.zeros((len(groups), 0), dtype=torch.long, device=device)
    else:
        heads = _head_kv(model, groups, head_cache, pad_id, device)
        cache, head_mask = _padded_head_cache(model, groups, heads, device)

    rests = [g.prefix[g.head_len :] for g in groups]
    prefix_scores = None
    rest_mask = torch.zeros((len(groups), 0), dtype=torch.long, device=device)
    if any(rests):
        rest_ids, rest_mask = padded_rows([r or [pad_id] for r in rests], pad_id)
        for row, rest in enumerate(rests):
            if not rest:
                rest_mask[row] = 0  # nothing left after the head: a masked placeholder token
        rest_ids, rest_mask = rest_ids.to(device), rest_mask.to(device)
        heads_len = torch.tensor([g.head_len for g in groups], dtype=torch.long, device=device)
        first = model(
            input_ids=rest_ids,
            attention_mask=torch.cat([head_mask, rest_mask], dim=1),
            position_ids=heads_len[:, None] + torch.arange(rest_ids.shape[1], device=device)[None, :],
            past_key_values=cache,
            use_cache=True,
        )
        cache = first.past_key_values
        prefix_scores = select(first.logits)
    prefix_mask = torch.cat([head_mask, rest_mask], dim=1)

    owner = [gi for gi, g in enumerate(groups) for _ in g.members]
    suffixes = [ids[g.prefix_len :] for g in groups for _, ids in g.members]
    suffix_ids, suffix_mask = padded_rows(suffixes, pad_id)
    suffix_ids, suffix_mask = suffix_ids.to(device), suffix_mask.to(device)
    index = torch.tensor(owner, dtype=torch.long, device=device)
    cache.batch_select_indices(index)  # each member gets a copy of its group's prefix cache
    prefix_lens = torch.tensor([groups[gi].prefix_len for gi in owner], dtype=torch.long, device=device)
    positions = prefix_lens[:, None] + torch.arange(suffix_ids.shape[1], device=device)[None, :]
    second = model(
        input_ids=suffix_ids,
        attention_mask=torch.cat([prefix_mask[index], suffix_mask], dim=1),
        position_ids=positions,
        past_key_values=cache,
        use_cache=keep_kv,  # the layers append to ``cache`` either way; say what is meant
    )
    suffix_scores = select(second.logits)
    real = torch.cat([prefix_mask[index], suffix_mask], dim=1).bool()  # each row's real positions
    # A sliding-window layer (Mistral) keeps only its window: then the cache is not whole, keep none.
    whole = all(layer.keys.shape[2] == real.shape[1] for layer in cache.layers)

    out: list[list[MemberLogits]] = [[] for _ in groups]
    for row, gi in enumerate(owner):
        group = groups[gi]
        parts = [suffix_scores[row, : len(suffixes[row])]]
        if prefix_scores is not None:
            parts.insert(0, prefix_scores[gi, : group.prefix_len - group.head_len])
        kv = None
        if keep_kv and whole:
            kv = _member_kv(cache, row, real[row].nonzero(as_tuple=True)[0])
        out[gi].append(MemberLogits(group.head_len, torch.cat(parts, dim=0), kv))
    return out
