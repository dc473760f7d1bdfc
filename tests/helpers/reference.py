"""An independent transcription of the EquivPruner reference's search rules, for replay tests.

Written from the reference (Lolo1222/EquivPruner, on OpenR) -- ``reason/guided_search/tree.py``
(``_expand_leaf_node``, ``_merge_leaf_node``, ``LanguageNode.merge_node``, ``_ucb_score``,
``_simulate_4simple_mcts``, ``simple_mcts``, ``beam_search``), ``envs/base_env.py``
(``update_legal_actions`` and its three tries) and ``reason/reranking/vote_utils.py`` -- in its
own small tree, sharing no code with ``equiv.search``. Driven by the same scripted engines and
per-request seed stream, equiv's searches must reproduce it exactly.

What is transcribed:

- **Legal actions** (``update_legal_actions``): ``n = width`` samples; a sample is kept only if it
  stopped cleanly (not cut by the token limit) and its text is new among the kept ones; priors
  are exp(mean token log-probability) normalised over the kept ones. No kept sample: the call is
  repeated (a fresh seed) up to three calls in all, then the node is finished (a dead end).
- **Children** (``_expand_leaf_node``): one per legal action in order, valued by the PRM's
  last-step score (0.0 when it returns none), terminal if the sample finished or the depth limit
  is reached. Children are keyed by text (a dict keeps insertion order).
- **Merge** (``_merge_leaf_node`` + ``merge_node``): for each kept key i in order, every later
  kept key j the judge calls equivalent to i is merged into i: priors summed, ``terminated``
  ORed, value untouched (its visit-weighted update is a no-op with 0 visits), j deleted.
- **PUCT** (``_ucb_score``): ``Q + (log((N + base + 1) / base) + c) * P * sqrt(N) / (1 + n)``,
  Q the mean backed-up value (the PRM value while unvisited), N the parent's visits.
- **MCTS** (``simple_mcts`` / ``_simulate_4simple_mcts``): descend by PUCT (first child on ties)
  while the node has children and is not finished; a newly reached leaf is expanded (and merged)
  in the same simulation; the reached node's value is backed up to the root. After the
  simulations, commit the most-visited child (first on ties); a finished one ends the search, a
  leaf one is expanded and merged.
- **Beam search** (``beam_search``): each round, a selected node that is finished becomes an end
  node and k (the beam size at first) shrinks by one; every other selected node offers its best k
  children by value, the best k of all offered are selected (first on ties) and the unfinished
  ones expanded -- here also merged, which is where the paper prunes SBS: before the top-k. A
  selected node whose expansion fails is finished, so it becomes an end node next round.
- **Answer aggregation** (``vote_utils``): majority vote; PRM min-max (the solution whose lowest
  step score is highest); PRM min-vote (answers weighted by the sum of their solutions' lowest
  step scores); ties to the first seen.

Token count: every completion token the policy returned (docs/design.md §2), retries, dropped and
merged samples included -- the reference's own tree count leaves those out, a deliberate
difference, so the transcription counts what equiv promises to count.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Callable, Sequence

from equiv.search.types import ScoreRequest, StepRequest


class RefNode:
    def __init__(self, steps: tuple[str, ...], prior: float, value: float, terminal: bool) -> None:
        self.steps, self.prior, self.initial, self.terminal = steps, prior, value, terminal
        self.children: dict[str, RefNode] = {}
        self.visits, self.value_sum = 0, 0.0
        self.parent: RefNode | None = None

    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else self.initial

    def backup(self, value: float) -> None:
        node: RefNode | None = self
        while node is not None:
            node.visits += 1
            node.value_sum += value
            node = node.parent


class RefSearch:
    """The reference's expansion, merge, MCTS and beam search on scripted engines."""

    def __init__(self, policy: Any, reward: Any, equivalent: Callable[[str, str], bool] | None, *, question: str,
                 seeds: Any, width: int, max_depth: int = 50, sims: int = 20, c_init: float = 1.25,
                 c_base: float = 19652.0, tries: int = 3) -> None:
        self.policy, self.reward, self.equivalent = policy, reward, equivalent
        self.question, self.seeds = question, seeds
        self.width, self.max_depth, self.sims = width, max_depth, sims
        self.c_init, self.c_base, self.tries = c_init, c_base, tries
        self.expanded: list[tuple[str, ...]] = []  # nodes expanded (or found dead), in order
        self.tokens = 0

    # -- expansion -----------------------------------------------------------------------------
    def legal_actions(self, parents: Sequence[tuple[str, ...]]) -> list[list[tuple[Any, float]]]:
        """Each parent's legal actions with priors ([] = none after three tries). The reference
        asks for one parent at a time and has no seeds; equiv batches a round's parents, so the
        first tries of all parents draw their seeds first, then the second tries of those that
        need one, and so on -- the order a batched environment would use."""
        actions: list[list[tuple[Any, float]]] = [[] for _ in parents]
        pending = list(range(len(parents)))
        for _ in range(self.tries):
            still = []
            for i in pending:
                request = StepRequest(self.question, parents[i], n=self.width, seed=self.seeds.next(parents[i]))
                (cands,) = self.policy.generate([request])
                self.tokens += sum(int(c.num_tokens) for c in cands)
                kept: list[Any] = []
                for c in cands:
                    if not c.truncated and c.text not in [k.text for k in kept]:
                        kept.append(c)
                if kept:
                    weights = [math.exp(c.logprob / c.num_tokens if c.num_tokens else 0.0) for c in kept]
                    actions[i] = [(c, w / sum(weights)) for c, w in zip(kept, weights)]
                elif cands:
                    still.append(i)  # nothing sampled at all (a full context): a retry cannot help
            pending = still
        return actions

    def expand(self, nodes: Sequence[RefNode]) -> None:
        """Children of each node (or mark it finished when no legal action came), then merge."""
        self.expanded.extend(n.steps for n in nodes)
        for node, actions in zip(nodes, self.legal_actions([n.steps for n in nodes])):
            if not actions:
                node.terminal = True
                continue
            scores = self.reward.score([ScoreRequest(self.question, node.steps + (c.text,)) for c, _ in actions])
            depth = len(node.steps) + 1
            for (cand, prior), rs in zip(actions, scores):
                child = RefNode(node.steps + (cand.text,), prior, rs[-1] if rs else 0.0,
                                bool(cand.finished) or depth >= self.max_depth)
                child.parent = node
                node.children[cand.text] = child
            if self.equivalent is not None:
                self.merge(node)

    def merge(self, node: RefNode) -> None:
        keys = list(node.children)
        merged: set[str] = set()
        for i, ki in enumerate(keys):
            if ki in merged:
                continue
            for kj in keys[i + 1:]:
                if kj in merged:
                    continue
                if self.equivalent(ki, kj):
                    keep, gone = node.children[ki], node.children[kj]
                    keep.prior += gone.prior
                    keep.terminal = keep.terminal or gone.terminal
                    merged.add(kj)
        for key in merged:
            del node.children[key]

    # -- MCTS ----------------------------------------------------------------------------------
    def ucb(self, parent: RefNode, child: RefNode) -> float:
        pb_c = math.log((parent.visits + self.c_base + 1) / self.c_base) + self.c_init
        return child.value() + pb_c * child.prior * math.sqrt(parent.visits) / (child.visits + 1)

    def simulate(self, node: RefNode) -> None:
        while node.children and not node.terminal:
            best, best_score = None, -9999999.0
            for child in node.children.values():
                score = self.ucb(node, child)
                if score > best_score:
                    best, best_score = child, score
            node = best
            if not node.terminal and not node.children:
                self.expand([node])
                break
        node.backup(node.value())

    def mcts(self) -> tuple[RefNode, RefNode]:
        """(root, the committed final node)."""
        root = RefNode((), 1.0, 0.0, False)
        self.expand([root])
        node = root
        while node.children and not node.terminal:
            for _ in range(self.sims):
                self.simulate(node)
            best = None
            for child in node.children.values():
                if best is None or child.visits > best.visits:
                    best = child
            node = best
            if not node.terminal and not node.children:
                self.expand([node])
        return root, node

    # -- beam search -----------------------------------------------------------------------------
    def beam_search(self, beam_size: int) -> tuple[RefNode, list[RefNode]]:
        """(root, the finished solutions in the order they were found), in ``beam_search``'s
        shape: each round, a selected node that is finished becomes an end node (k shrinks);
        the others offer their best k children; the best k of those are selected, and the
        unfinished ones among them expanded (and merged)."""
        root = RefNode((), 1.0, 0.0, False)
        self.expand([root])
        if root.terminal:
            return root, []
        end_nodes: list[RefNode] = []
        top, k = [root], beam_size
        while top:
            offered: list[RefNode] = []
            for node in top:
                if node.terminal:
                    end_nodes.append(node)
                    k -= 1
                elif k > 0:
                    offered.extend(sorted(node.children.values(), key=lambda c: -c.initial)[:k])  # stable
            if len(end_nodes) == beam_size:
                break
            top = sorted(offered, key=lambda c: -c.initial)[:k]  # heapq.nsmallest on -value, stable
            self.expand([n for n in top if not n.terminal])
        return root, end_nodes


def walk(root: RefNode) -> list[RefNode]:
    """Every node that was kept (merged ones were deleted), depth-first in child order."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(list(node.children.values())))
    return out


# -- vote_utils ----------------------------------------------------------------------------------
def majority_vote(answers: Sequence[str], _scores: Sequence[Sequence[float]]) -> str:
    counts = Counter(answers)
    return max(counts, key=counts.get)


def prm_min_max(answers: Sequence[str], scores: Sequence[Sequence[float]]) -> str:
    mins = [min(s) if s else -1.0 for s in scores]
    return answers[mins.index(max(mins))]


def prm_min_vote(answers: Sequence[str], scores: Sequence[Sequence[float]]) -> str:
    weight: dict[str, float] = defaultdict(float)
    for answer, s in zip(answers, scores):
        weight[answer] += min(s) if s else -1.0
    return max(weight, key=weight.get)
