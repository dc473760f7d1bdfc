"""Pruned MCTS and SBS against an independent transcription of the EquivPruner reference.

:mod:`tests.helpers.reference` re-states the reference's expansion (three tries, duplicates
dropped before priors are normalised), ``_merge_leaf_node`` / ``merge_node`` (first sibling kept,
priors summed, terminal flag ORed, own value kept), ``_ucb_score`` (the log schedule),
``_simulate_4simple_mcts`` / ``simple_mcts`` and ``beam_search``, in its own tree. Both are driven
by the same scripted policy (which also returns cut-off samples, whole expansions of them, and
finished samples among unfinished ones), PRM (which sometimes returns no score) and judge (a
fixed set of pairs declared equivalent, not transitive), with the same per-request seed stream.
Expansion order, the kept nodes, their priors, values, terminal flags, visits and the token
count must match exactly, for several seeds and widths.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from equiv.prune.boundary import GroupsSiblings
from equiv.search.expansion import SeedStream
from equiv.search.mcts import mcts
from equiv.search.sbs import sbs
from equiv.search.runner import Grader, aggregate_solutions
from equiv.search.types import ScoreRequest
from tests.helpers.reference import RefSearch, majority_vote, prm_min_max, prm_min_vote, walk
from tests.helpers.scripted import KeyedReward, Problem, SeededPolicy, simple_extract, simple_grade, threshold_verdicts
from tests.helpers.search import Q, run_search

VOTE_UTILS = {"majority_vote": majority_vote, "prm_min_max": prm_min_max, "prm_min_vote": prm_min_vote}
EQUIVALENT = {frozenset(p) for p in [("add 1", "so add 1"), ("so add 1", "add 2"), ("add 3", "so add 3"),
                                     ("so add 2", "add 3")]}


def equivalent(a: str, b: str) -> bool:
    return frozenset((a, b)) in EQUIVALENT


class PairSetJudge(GroupsSiblings):
    """Equivalent (1.0) iff the pair is in :data:`EQUIVALENT`."""

    name, threshold, learned = "pairs", 0.5, True

    def pair_probabilities(self, pairs, questions=None):
        return [1.0 if equivalent(a, b) else 0.0 for a, b in pairs]

    def pair_verdicts(self, pairs, questions=None, *, score_ruled=False):
        return threshold_verdicts(self, pairs)


class RoughPolicy:
    """:class:`SeededPolicy`, roughened per request (seeded by its content): now and then every
    sample is cut by the token limit (the expansion must be retried), single samples are cut, and
    a restated step (``so add k``) is marked finished -- so merges can OR the terminal flag."""

    def __init__(self, finish_depth: int) -> None:
        self.inner = SeededPolicy(finish_depth=finish_depth)

    def generate(self, requests):
        out = []
        for r, cands in zip(requests, self.inner.generate(requests)):
            rng = random.Random(f"{r.seed}|{r.steps}")
            if rng.random() < 0.3:
                out.append([dataclasses.replace(c, truncated=True) for c in cands])
                continue
            rough = []
            for c in cands:
                if rng.random() < 0.1:
                    c = dataclasses.replace(c, truncated=True)
                elif c.text.startswith("so ") and rng.random() < 0.1:
                    c = dataclasses.replace(c, finished=True)
                rough.append(c)
            out.append(rough)
        return out


class GappyReward(KeyedReward):
    """KeyedReward that returns no score for about one step in twelve."""

    def score(self, requests):
        return [[] if hash_gap(r.steps) else s for r, s in zip(requests, super().score(requests))]


def hash_gap(steps) -> bool:
    return random.Random("|".join(steps)).random() < 1 / 12


def _ours_by_steps(ctx):
    return {ctx.tree.steps(n): n for n in ctx.tree if n.merged_into is None}


def _compare_trees(ref_root, ctx, *, visits_for):
    ours = _ours_by_steps(ctx)
    ref_nodes = walk(ref_root)
    assert {n.steps for n in ref_nodes} == set(ours)  # the same kept nodes
    for ref in ref_nodes:
        node = ours[ref.steps]
        assert [ctx.tree.steps(c) for c in ctx.tree.live_children(node)] == [c.steps for c in ref.children.values()]
        if ref.steps:
            assert node.prior == pytest.approx(ref.prior, abs=1e-12)
            assert node.value == pytest.approx(ref.initial, abs=1e-12)
            assert node.terminal == ref.terminal, ref.steps
        if visits_for(ref):
            assert (node.visits, node.q()) == (ref.visits, pytest.approx(ref.value(), abs=1e-12))


class LoggedPolicy(RoughPolicy):
    def __init__(self, finish_depth: int) -> None:
        super().__init__(finish_depth)
        self.log: list[tuple[str, ...]] = []

    def generate(self, requests):
        self.log.extend(r.steps for r in requests)
        return super().generate(requests)


@pytest.mark.parametrize("c_base", [19652.0, 4.0])
@pytest.mark.parametrize("width", [3, 5, 10])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pruned_mcts_replays_the_reference(seed, width, c_base):
    """``c_base`` 19652 is the reference's; with so few visits its log term is ~1e-4, so a small
    base is replayed too, where the schedule visibly moves the selection."""
    sims, finish = 8, 5
    ref_policy = LoggedPolicy(finish)
    ref = RefSearch(ref_policy, GappyReward(), equivalent, question=Q, seeds=SeedStream(seed, "p"), width=width,
                    sims=sims, c_base=c_base)
    ref_root, ref_final = ref.mcts()

    policy = LoggedPolicy(finish)
    final, ctx = run_search(mcts, policy, GappyReward(), PairSetJudge(), seed=seed, width=width, num_simulations=sims,
                            c_puct_base=c_base)
    assert policy.log == ref_policy.log  # every policy call, retries included, in the same order
    assert ctx.tree.steps(final) == ref_final.steps
    assert ctx.stats.generated_tokens == ref.tokens
    # Visits and backed-up values match everywhere except on the committed path above the final
    # node: the reference backs a simulation up to the tree's root, equiv to the node it
    # simulates from (those ancestors are never selected from again).
    committed = {ref_final.steps[:i] for i in range(len(ref_final.steps))}
    _compare_trees(ref_root, ctx, visits_for=lambda n: n.steps not in committed)


def test_the_replay_exercises_every_rule():
    """Across the replayed configurations, retries, dead ends, missing scores, terminal merges
    and non-transitive classes all occur (so the replay can fail on each rule)."""
    seen = {"pruned": 0, "retries": 0, "dead_ends": 0, "prm_missing": 0, "terminal_merge": 0}
    for seed in (0, 1, 2):
        for width in (3, 5, 10):
            _, ctx = run_search(mcts, RoughPolicy(5), GappyReward(), PairSetJudge(), seed=seed, width=width,
                                num_simulations=8)
            seen["pruned"] += ctx.stats.pruned
            seen["retries"] += ctx.stats.retries
            seen["dead_ends"] += ctx.stats.dead_ends
            seen["prm_missing"] += ctx.stats.prm_missing
            seen["terminal_merge"] += sum(
                1 for n in ctx.tree if n.merged_into is not None and n.terminal and not ctx.tree[n.merged_into].children
                and ctx.tree[n.merged_into].terminal and n.judge_prob == 1.0 and n.text != ctx.tree[n.merged_into].text
            )
    assert all(v > 0 for v in seen.values()), seen


@pytest.mark.parametrize("width", [3, 5, 10])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beam", [2, 3])
def test_pruned_sbs_replays_the_reference_beam_and_solutions(seed, width, beam):
    finish = 4
    ref_policy = LoggedPolicy(finish)
    ref = RefSearch(ref_policy, GappyReward(), equivalent, question=Q, seeds=SeedStream(seed, "p"), width=width)
    ref_root, ref_solutions = ref.beam_search(beam)

    policy = LoggedPolicy(finish)
    _, ctx = run_search(sbs, policy, GappyReward(), PairSetJudge(), seed=seed, width=width, beam_size=beam)
    # the reference expands one beam per call; equiv batches a round's beams into one call with
    # the same requests in the same order (seeds drawn in that order too)
    assert policy.log == ref_policy.log
    assert [ctx.tree.steps(n) for n in ctx.solutions] == [n.steps for n in ref_solutions]
    assert ctx.stats.generated_tokens == ref.tokens
    _compare_trees(ref_root, ctx, visits_for=lambda n: False)


@pytest.mark.parametrize("width", [3, 5, 10])
@pytest.mark.parametrize("seed", range(6))
def test_pruned_sbs_answer_choice_matches_the_reference_evaluator(seed, width):
    """The reference's evaluator re-scores each finished solution with the PRM and aggregates
    (vote_utils); equiv reuses the search's step scores. With a causal PRM those are the same
    numbers, so every aggregation must pick the same answer."""
    beam, finish = 3, 4
    ref = RefSearch(RoughPolicy(finish), KeyedReward(), equivalent, question=Q, seeds=SeedStream(seed, "p"),
                    width=width)
    _, ref_solutions = ref.beam_search(beam)
    answers = [simple_extract("\n".join(n.steps), "gsm8k") for n in ref_solutions]
    rescored = KeyedReward().score([ScoreRequest(Q, n.steps) for n in ref_solutions])
    valid = [(a, s) for a, s in zip(answers, rescored) if a is not None]

    _, ctx = run_search(sbs, RoughPolicy(finish), KeyedReward(), PairSetJudge(), seed=seed, width=width, beam_size=beam)
    problem = Problem("p", Q, "7")
    results, chosen = aggregate_solutions(ctx, problem, Grader(simple_extract, simple_grade))
    for method, rule in VOTE_UTILS.items():
        expected = rule([a for a, _ in valid], [s for _, s in valid]) if valid else None
        assert results[method]["prediction"] == expected, method
    if chosen is not None:
        assert simple_extract("\n".join(ctx.tree.steps(chosen)), "gsm8k") == results["majority_vote"]["prediction"]
