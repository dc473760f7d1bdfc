"""The expansion step every algorithm shares.

Per expansion, data flows one way (docs/design.md §3):

1. one batched policy call for all ``parents`` (one StepRequest each, ``n = width``);
2. every candidate's completion tokens are counted here, whatever happens to it later; one cut
   by the token limit (``Candidate.truncated``) is dropped, as the reference dropped it. A parent
   whose call returned candidates but none usable is asked again with a fresh seed, up to
   ``SearchConfig.expansion_attempts`` calls in all (the reference's environment retries three
   times); one still left with none is a terminal dead end;
3. exact duplicates (same text after whitespace normalisation) are dropped, keeping the first
   occurrence, and the priors -- a softmax of the mean token log-probability -- are over the
   unique steps, in pruned and unpruned runs alike (the reference keyed children by text before
   normalising);
4. equivalence classes: every family of siblings -> the judge's ``group``
   (:func:`equiv.prune.boundary.group_families`, the one place a merge is decided), which answers
   each family's classes with one representative each (``PrunerConfig.grouping`` and
   ``representative``; default greedy, first in generation order, as the reference's
   ``_merge_leaf_node``) and the verdicts of the pairs it asked -- greedy asks each candidate
   against the representatives before it only, in rounds batched across families and problems --
   with which took a model forward (``judge_calls``);
5. PRM scores in one batched call — for every unique candidate (``after_prm``, paper-faithful)
   or for representatives only (``before_prm``, saves PRM work);
6. merge bookkeeping (the reference's ``merge_node``): a pruned sibling gets ``merged_into`` and
   ``judge_prob``; the representative's prior becomes the sum of its class's priors, and it is
   terminal if any member is. Its value depends on ``SearchConfig.merge_value``: ``"own"`` (the
   default, the reference: its visit-weighted merge is a no-op at merge time, so the kept node
   keeps its own PRM value) or ``"class_max"`` (the class's highest PRM value; an option).

Steps 4 and 5 swap order with ``prune_stage``. Each stage is a small function so it can be
tested on its own; the algorithms only call :func:`expand`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from equiv.prune.boundary import Family, FamilyGrouping
from equiv.prune.cached import pair_key
from equiv.prune.strategies import PrunerConfig
from equiv.rundir.records import WorkCounters
from equiv.search.config import SearchConfig
from equiv.search.pairlog import notable_pairs
from equiv.search.tree import Node, Tree
from equiv.search.types import Candidate, ScoreRequest, StepRequest
from equiv.text.levenshtein import normalise_whitespace

logger = logging.getLogger(__name__)


class EngineHandle(Protocol):
    """What one problem's search awaits: the run's engines, reached through a handle (implemented
    by :class:`equiv.search.dispatch.DispatcherHandle`; the engines themselves are
    :class:`equiv.search.runner.Engines`)."""

    has_judge: bool
    judge_threshold: float

    async def generate(self, requests: Sequence[StepRequest]) -> list[list[Candidate]]: ...

    async def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]: ...

    async def group(self, families: Sequence[Family], *, mode: str = "greedy",
                    representative: str = "first") -> list[FamilyGrouping]:
        """Each family's classes from the judge (:meth:`equiv.prune.boundary.SiblingJudge.group`),
        with the verdict of every pair it asked (``probability``, ``merged``, ``reason``,
        ``model_call``: whether deciding it took a learned model's forward)."""
        ...


class SeedStream:
    """Per-request seeds from (run seed, problem id, the prefix's text, how many times this
    search has already asked for that prefix): common random numbers.

    Why the prefix and not a request counter: two arms of one comparison (pruned and unpruned,
    or two pruners) that reach the same steps then ask with the same seed and, on a backend that
    honours it, get the same candidates, whatever they asked before -- the comparison is paired
    where the trees agree, and a completions cache (``policy.cache``) answers the second arm from
    the first's work. A retry of the same prefix (an expansion with no usable candidate) is the
    prefix's next occurrence, so a fresh sample. Derived by hashing, so a seed never depends on
    request order, node ids, batching, timing or which other problems are in flight. In
    expectation nothing changes: each seed is still a uniform draw, distinct per (prefix,
    occurrence). ``purpose`` keeps streams apart that ask the same prefix for different things
    (lookahead's rollouts beside expansions).
    """

    def __init__(self, run_seed: int, problem_id: str) -> None:
        self.run_seed = run_seed
        self.problem_id = problem_id
        self.asked: dict[str, int] = {}

    @staticmethod
    def prefix_hash(steps: Sequence[str]) -> str:
        """SHA-256 of the steps so far (JSON, so step boundaries count, not only the joined text)."""
        return hashlib.sha256(json.dumps(list(steps), ensure_ascii=False).encode("utf-8")).hexdigest()

    def next(self, steps: Sequence[str], purpose: str = "expand") -> int:
        """The seed of this search's next request for ``steps``."""
        prefix = f"{purpose}\x00{self.prefix_hash(steps)}"
        occurrence = self.asked.get(prefix, 0)
        self.asked[prefix] = occurrence + 1
        text = f"{self.run_seed}\x00{self.problem_id}\x00{prefix}\x00{occurrence}"
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass
class SearchContext:
    """Everything one problem's search needs; algorithms are functions of it.

    Pruning is on when ``engines`` has a judge; ``pruner`` says how its verdicts become classes
    (``grouping``, ``representative``); the threshold is the judge's own; ``settings.merge_value``
    says what value a kept node carries.
    """

    question: str
    engines: EngineHandle
    settings: SearchConfig
    seeds: SeedStream
    pruner: PrunerConfig = field(default_factory=PrunerConfig)
    tree: Tree = None  # type: ignore[assignment]
    stats: WorkCounters = field(default_factory=WorkCounters)
    """The record's work counters, counted where the engines are called (:func:`generate`,
    :func:`score`, :func:`merge_equivalent_siblings`) and where the tree grows."""
    judged: set[tuple[str, str]] = field(default_factory=set)  # pair keys this problem has asked
    pair_log: list[dict[str, Any]] = field(default_factory=list)
    """Merged and near-threshold kept-apart sibling pairs (:mod:`equiv.search.pairlog`)."""
    solutions: list[Node] = field(default_factory=list)
    """Finished solutions in the order found, for algorithms that collect several (SBS,
    lookahead, DFS); the runner aggregates their answers (:mod:`equiv.search.aggregate`)."""
    on_work: Callable[[WorkCounters], None] | None = None
    """Told the counters after every policy call and expansion, so a progress bar can move while
    a long problem runs (:meth:`equiv.search.progress.Progress.working`); None: nobody watches."""

    def __post_init__(self) -> None:
        if self.tree is None:
            self.tree = Tree(self.question)


# -- small pure stages ---------------------------------------------------------------------------
def sibling_priors(candidates: Sequence[Candidate]) -> list[float]:
    """Softmax over siblings of the mean token log-probability (length-normalised likelihood).

    Same ranking as the reference's exp(mean logprob) normalised across siblings, computed
    stably; a candidate with no tokens counts as mean logprob 0.
    """
    if not candidates:
        return []
    means = [c.logprob / c.num_tokens if c.num_tokens > 0 else 0.0 for c in candidates]
    top = max(means)
    weights = [math.exp(m - top) for m in means]
    total = sum(weights)
    return [w / total for w in weights]


def exact_duplicate_of(texts: Sequence[str]) -> list[int | None]:
    """For each text the index of its first whitespace-equal occurrence, None for firsts."""
    first: dict[str, int] = {}
    out: list[int | None] = []
    for i, text in enumerate(texts):
        key = normalise_whitespace(text)
        if key in first:
            out.append(first[key])
        else:
            first[key] = i
            out.append(None)
    return out


def merge_class(
    tree: Tree, rep: Node, members: Sequence[Node], probs: Sequence[float | None], *, class_max: bool = False
) -> None:
    """Fold ``members`` into ``rep`` as the reference's ``merge_node`` does: summed prior, the
    terminal flag ORed (a class with a finished member is finished), merge bookkeeping. The
    value stays the representative's own unless ``class_max`` (then the class's highest)."""
    for member, prob in zip(members, probs):
        member.merged_into = rep.id
        member.judge_prob = prob
        rep.prior += member.prior
        rep.terminal = rep.terminal or member.terminal
        if class_max and member.value is not None and (rep.value is None or member.value > rep.value):
            rep.value = member.value


# -- the step -------------------------------------------------------------------------------------
async def generate(ctx: SearchContext, requests: Sequence[StepRequest]) -> list[list[Candidate]]:
    """One batched policy call, counted: requests, every returned token, and each completion
    as a candidate or, cut by the token limit, as truncated (its tokens kept apart too).
    Every policy call of a search goes through here (expansions, retries, lookahead rollouts)."""
    outputs = await ctx.engines.generate(requests)
    ctx.stats.policy_requests += len(requests)
    for cands in outputs:
        ctx.stats.cache_hits += bool(cands) and all(c.cached for c in cands)
        for cand in cands:
            ctx.stats.generated_tokens += int(cand.num_tokens)
            if not cand.cached:
                ctx.stats.engine_tokens += int(cand.num_tokens)
            if cand.truncated:
                ctx.stats.truncated += 1
                ctx.stats.truncated_tokens += int(cand.num_tokens)
            else:
                ctx.stats.candidates += 1
    if ctx.on_work is not None:
        ctx.on_work(ctx.stats)
    return outputs


async def score(ctx: SearchContext, requests: Sequence[ScoreRequest]) -> list[list[float]]:
    """One batched PRM call, counted (``prm_calls``: sequences sent). Every PRM call of a search
    goes through here."""
    scores = await ctx.engines.score(requests)
    ctx.stats.prm_calls += len(requests)
    return scores


def usable(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates a search may add: those a clean stop ended (the reference dropped the rest)."""
    return [c for c in candidates if not c.truncated]


async def _generate(ctx: SearchContext, parents: Sequence[Node], width: int) -> list[list[Candidate]]:
    """Each parent's usable candidates: one batched call, then repeated calls (fresh seeds) for
    parents that got candidates but none usable, up to ``expansion_attempts`` calls in all, as
    the reference's environment retries. A parent the policy returned nothing for (its context
    is full) is not retried: another call cannot change that."""
    kept: list[list[Candidate]] = [[] for _ in parents]
    pending = list(range(len(parents)))
    for attempt in range(ctx.settings.expansion_attempts):
        if not pending:
            break
        requests = [
            StepRequest(ctx.question, steps, n=width, seed=ctx.seeds.next(steps))
            for steps in (ctx.tree.steps(parents[i]) for i in pending)
        ]
        outputs = await generate(ctx, requests)
        if attempt > 0:
            ctx.stats.retries += len(requests)
        still = []
        for i, cands in zip(pending, outputs):
            kept[i] = usable(cands)
            if cands and not kept[i]:
                still.append(i)
        pending = still
    return kept


def _add_children(ctx: SearchContext, parent: Node, candidates: Sequence[Candidate]) -> list[Node]:
    """Usable candidates -> child nodes; returns the unique ones.

    Whitespace-equal candidates after the first are dropped before priors are normalised, in
    pruned and unpruned runs alike (as the reference, whose children were keyed by text): the
    priors are a softmax over the unique steps. A duplicate stays in the tree as a leaf merged
    into its first copy (``judge_prob`` 1.0, prior 0), so the report shows it and its tokens stay
    on a node. A parent left with no children becomes a terminal dead end. (Folding each copy's
    prior into its first copy, ``duplicate_prior: sum``, was measured and removed: see
    docs/experiments/2026-11-28-qwen-mcts-four-arms.md.)
    """
    dup_of = exact_duplicate_of([c.text for c in candidates]) if ctx.settings.dedupe_exact else [None] * len(candidates)
    priors = iter(sibling_priors([c for c, first in zip(candidates, dup_of) if first is None]))
    nodes: list[Node] = []
    for cand, first in zip(candidates, dup_of):
        depth = parent.depth + 1
        prior = next(priors) if first is None else 0.0
        node = ctx.tree.add_child(
            parent,
            cand.text,
            prior=prior,
            own_prior=prior,
            tokens=int(cand.num_tokens),
            logprob=float(cand.logprob),
            terminal=bool(cand.finished) or depth >= ctx.settings.max_depth,
        )
        if first is not None:
            node.merged_into = nodes[first].id
            node.judge_prob = 1.0
            ctx.stats.duplicates += 1
        nodes.append(node)
    parent.expanded = True
    if not nodes:
        parent.terminal = True  # the policy had nothing to add: a dead end
        ctx.stats.dead_ends += 1
    return [n for n in nodes if n.merged_into is None]


async def score_nodes(ctx: SearchContext, nodes: Sequence[Node]) -> None:
    """One batched PRM call; a node's value is the PRM score of its last step.

    A step the reward model returns no score for is valued 0.0, as the reference values it, so
    one unscorable step does not end the whole problem; unlike the reference it is not silent:
    the node is flagged (``prm_missing``, in the tree file) and counted (the record's
    ``prm_missing``), and a warning is logged.
    """
    if not nodes:
        return
    requests = [ScoreRequest(ctx.question, ctx.tree.steps(n)) for n in nodes]
    scores = await score(ctx, requests)
    for node, per_step in zip(nodes, scores):
        if per_step:
            node.value = float(per_step[-1])
        else:
            node.value = 0.0
            node.prm_missing = True
            ctx.stats.prm_missing += 1
            logger.warning("reward model returned no score for node %d (a %d-char step); valued 0.0",
                           node.id, len(node.text))
        node.own_value = node.value


def count_model_calls(judged: set[tuple[str, str]], pairs: Sequence[tuple[str, str]], model_calls: Sequence[bool]) -> int:
    """Pairs new to ``judged`` (updated here, either order) whose verdict took a model forward."""
    count = 0
    for (a, b), model_call in zip(pairs, model_calls):
        key = pair_key(a, b)
        if key not in judged:
            judged.add(key)
            count += bool(model_call)
    return count


async def merge_equivalent_siblings(ctx: SearchContext, families: Sequence[list[Node]]) -> None:
    """Hand every family of two or more siblings to the judge's ``group`` in one call, then merge
    each class into its representative."""
    if not ctx.engines.has_judge:
        return
    families = [f for f in families if len(f) >= 2]
    if not families:
        return
    asked = []
    for family in families:
        scored = all(n.value is not None for n in family)  # else "score" falls back to the priors
        asked.append(Family.of([n.text for n in family], ctx.question, priors=[n.prior for n in family],
                               scores=[float(n.value) for n in family if n.value is not None] if scored else None))
    groupings = await ctx.engines.group(asked, mode=ctx.pruner.grouping, representative=ctx.pruner.representative)
    for family, found in zip(families, groupings):
        texts = [(family[i].text, family[j].text) for i, j in found.pairs]
        ctx.stats.judge_pairs += len(texts)
        ctx.stats.judge_calls += count_model_calls(ctx.judged, texts, [v.model_call for v in found.verdicts])
        grouping = found.grouping
        ctx.pair_log.extend(notable_pairs(family, found.decided(), grouping.representative_of,
                                          ctx.engines.judge_threshold))
        for i, node in enumerate(family):
            rep_index = grouping.representative_of[i]
            if rep_index != i:
                merge_class(ctx.tree, family[rep_index], [node], [grouping.prob_to_representative[i]],
                            class_max=ctx.settings.merge_value == "class_max")
                ctx.stats.pruned += 1


async def expand(ctx: SearchContext, parents: Sequence[Node], *, n: int | None = None) -> list[list[Node]]:
    """Expand ``parents`` (one batched call per stage); returns each parent's live children."""
    parents = [p for p in parents if not p.terminal]
    if not parents:
        return []
    width = n or ctx.settings.width
    outputs = await _generate(ctx, parents, width)
    ctx.stats.expanded += len(parents)
    if ctx.on_work is not None:
        ctx.on_work(ctx.stats)
    families = [_add_children(ctx, parent, cands) for parent, cands in zip(parents, outputs)]
    if ctx.settings.prune_stage == "before_prm":
        await merge_equivalent_siblings(ctx, families)
        await score_nodes(ctx, [node for f in families for node in f if node.merged_into is None])
    else:
        await score_nodes(ctx, [node for f in families for node in f])
        await merge_equivalent_siblings(ctx, families)
    return [ctx.tree.live_children(p) for p in parents]


def best_by_value(nodes: Sequence[Node]) -> Node:
    """Highest PRM value, ties to the earliest node (deterministic)."""
    return min(nodes, key=lambda n: (-(n.value if n.value is not None else float("-inf")), n.id))

