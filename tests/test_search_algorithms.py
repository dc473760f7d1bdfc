"""Algorithm unit tests with scripted policy / PRM / judge: exact selection, PUCT arithmetic, merge
rules, beam diversity after pruning, DFS skipping and token accounting."""

from __future__ import annotations

import asyncio
import math

import pytest

from equiv.prune import CachedJudge, PrunerConfig
from equiv.search.config import SearchConfig
from equiv.search.dfs import dfs
from equiv.search.dispatch import Dispatcher, run_workers
from equiv.search.expansion import SearchContext, SeedStream, expand, sibling_priors
from equiv.search.lookahead import lookahead
from equiv.errors import InputError
from equiv.search.mcts import exploration_weight, mcts, puct_score, select_child, simulate
from equiv.search.types import Candidate
from equiv.search.sbs import sbs
from equiv.search.tree import Tree
from tests.helpers.scripted import RestateJudge, SeededPolicy, KeyedReward, TablePolicy, TableReward, cand
from tests.helpers.search import Q, run_search

def by_text(ctx, text, depth=None):
    nodes = [n for n in ctx.tree if n.text == text and (depth is None or n.depth == depth)]
    assert len(nodes) == 1, (text, nodes)
    return nodes[0]


# -- tree and expansion ---------------------------------------------------------------------------
def test_tree_json_schema_and_paths():
    tree = Tree("question")
    a = tree.add_child(tree.root, "a", prior=0.5, tokens=3)
    b = tree.add_child(a, "b", terminal=True)
    tree.mark_path(b)
    assert tree.steps(b) == ("a", "b")
    nodes = tree.to_json()
    assert set(nodes[0]) == {
        "id", "parent", "depth", "text", "prior", "value", "visits", "tokens", "terminal",
        "on_path", "merged_into", "judge_prob", "prm_missing",
    }
    assert [n["on_path"] for n in nodes] == [True, True, True]
    assert nodes[2]["parent"] == 1 and nodes[2]["depth"] == 2


def test_sibling_priors_are_softmax_of_mean_token_logprob():
    priors = sibling_priors([cand("a", 2, -2.0), cand("b", 4, -2.0), cand("c", 0, 0.0)])
    # means: -1, -0.5, 0
    w = [math.exp(-1), math.exp(-0.5), math.exp(0)]
    assert priors == pytest.approx([x / sum(w) for x in w])


def _root_table():
    return {
        (): [
            cand("A", tokens=4, logprob=-4.0),
            cand("so A", tokens=6, logprob=-3.0),
            cand("A", tokens=5, logprob=-5.0),  # exact duplicate
            cand("B", tokens=7, logprob=-7.0),
        ]
    }


def _expand_root(table, values, judge, **settings):
    dispatcher = Dispatcher(TablePolicy(table), TableReward(values), judge)
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(**settings), SeedStream(0, "p"))
    result = {}

    async def work(_):
        result["kids"] = await expand(ctx, [ctx.tree.root])

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    return ctx, result["kids"][0]


@pytest.mark.parametrize("stage", ["after_prm", "before_prm"])
def test_expansion_merge_rules_and_accounting(stage):
    """Reference rules (changed from the old class-max / folded-duplicate rules): the exact
    duplicate is dropped before priors are normalised, the judged-equivalent sibling's prior is
    folded into the first of its class, and the kept node keeps its own PRM value."""
    reward = TableReward({"A": 0.3, "so A": 0.8, "B": 0.5})
    dispatcher = Dispatcher(TablePolicy(_root_table()), reward, RestateJudge())
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(width=4, prune_stage=stage), SeedStream(0, "p"))
    result = {}

    async def work(_):
        result["kids"] = await expand(ctx, [ctx.tree.root])

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    kids = result["kids"][0]
    assert [k.text for k in kids] == ["A", "B"]
    a, so_a, dup, b = (ctx.tree[i] for i in (1, 2, 3, 4))
    table = _root_table()[()]
    unique = sibling_priors([table[0], table[1], table[3]])  # the duplicate takes no share
    assert dup.merged_into == a.id and dup.judge_prob == 1.0 and dup.prior == 0.0
    assert so_a.merged_into == a.id and so_a.judge_prob == 1.0
    assert a.prior == pytest.approx(unique[0] + unique[1])
    assert b.prior == pytest.approx(unique[2])
    # every returned token counts, pruned and duplicate included
    assert ctx.stats.generated_tokens == 4 + 6 + 5 + 7
    assert ctx.stats.candidates == 4 and ctx.stats.duplicates == 1 and ctx.stats.pruned == 1
    # unique siblings A, so A, B: greedy asks "so A" and B against the representative A only,
    # never (so A, B), a pair of two members it would not read (issue 67)
    assert ctx.stats.judge_pairs == 2
    assert ctx.stats.judge_calls == 2  # no prefilter configured
    if stage == "after_prm":
        assert ctx.stats.prm_calls == 3  # A, so A, B (the exact duplicate is never scored)
        assert a.value == pytest.approx(0.3)  # its own, not the class's 0.8
        assert a.own_value == pytest.approx(0.3) and so_a.value == pytest.approx(0.8)
    else:
        assert ctx.stats.prm_calls == 2  # representatives only
        assert so_a.value is None
        assert a.value == pytest.approx(0.3)
    assert [r.steps for r in reward.requests] == ([("A",), ("so A",), ("B",)] if stage == "after_prm" else [("A",), ("B",)])


def test_merge_value_class_max_is_an_option():
    ctx, kids = _expand_root(_root_table(), {"A": 0.3, "so A": 0.8, "B": 0.5}, RestateJudge(), width=4,
                             merge_value="class_max")
    a = kids[0]
    assert a.text == "A" and a.value == pytest.approx(0.8) and a.own_value == pytest.approx(0.3)


@pytest.mark.parametrize("prune", [True, False])
def test_exact_duplicates_are_dropped_before_priors_are_normalised(prune):
    """A, A, B with equal likelihoods: 0.5 / 0.5 in pruned runs too (was 0.667 / 0.333)."""
    table = {(): [cand("A"), cand("A"), cand("B")]}
    ctx, kids = _expand_root(table, {}, RestateJudge() if prune else None, width=3)
    assert [k.text for k in kids] == ["A", "B"]
    assert [k.prior for k in kids] == pytest.approx([0.5, 0.5])
    assert ctx.stats.duplicates == 1


def test_a_merged_terminal_sibling_makes_the_kept_node_terminal():
    table = {(): [cand("A"), cand("so A", finished=True), cand("B")]}
    ctx, kids = _expand_root(table, {}, RestateJudge(), width=3)
    assert [k.text for k in kids] == ["A", "B"]
    assert kids[0].terminal and not kids[1].terminal


def test_no_pruning_keeps_judged_equivalents_but_drops_exact_duplicates():
    policy = TablePolicy(_root_table())
    reward = TableReward({"A": 0.3, "so A": 0.8, "B": 0.5})
    dispatcher = Dispatcher(policy, reward, None)
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(width=4), SeedStream(0, "p"))
    result = {}

    async def work(_):
        result["kids"] = await expand(ctx, [ctx.tree.root])

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    assert [k.text for k in result["kids"][0]] == ["A", "so A", "B"]
    assert ctx.stats.pruned == 0 and ctx.stats.judge_calls == 0 and ctx.stats.duplicates == 1


# -- SBS ------------------------------------------------------------------------------------------
def _sbs_table():
    fin = lambda t, v=0: cand(t, tokens=3, finished=True)  # noqa: E731
    return {
        (): [cand("A"), cand("so A"), cand("B"), cand("C")],
        ("A",): [fin("A1 answer 1")],
        ("so A",): [fin("sA1 answer 1")],
        ("B",): [fin("B1 answer 2")],
        ("C",): [fin("C1 answer 3")],
    }


def test_sbs_prunes_before_top_k_so_the_beam_holds_distinct_steps():
    values = {"A": 0.9, "so A": 0.85, "B": 0.5, "C": 0.4, "A1 answer 1": 0.6, "B1 answer 2": 0.7,
              "C1 answer 3": 0.65, "sA1 answer 1": 0.9}
    pruned_policy = TablePolicy(_sbs_table())
    final, ctx = run_search(sbs, pruned_policy, TableReward(values), RestateJudge(), width=4, beam_size=3)
    expanded_second_round = [r.steps for r in pruned_policy.requests[1:]]
    assert expanded_second_round == [("A",), ("B",), ("C",)]
    assert ctx.tree.steps(final) == ("B", "B1 answer 2")  # best finished solution by PRM value
    assert pruned_policy.calls == 2  # all three beams in one batched call

    plain_policy = TablePolicy(_sbs_table())
    final, ctx = run_search(sbs, plain_policy, TableReward(values), RestateJudge(), prune=False, width=4, beam_size=3)
    assert [r.steps for r in plain_policy.requests[1:]] == [("A",), ("so A",), ("B",)]
    assert ctx.tree.steps(final) == ("so A", "sA1 answer 1")


# -- MCTS -----------------------------------------------------------------------------------------
def test_puct_arithmetic():
    tree = Tree(Q)
    parent = tree.root
    parent.visits = 4
    a = tree.add_child(parent, "a", prior=0.7, value=0.2)
    b = tree.add_child(parent, "b", prior=0.3, value=0.9)
    a.visits, a.value_sum = 3, 1.5  # Q = 0.5
    assert puct_score(a, 4, 1.25) == pytest.approx(0.5 + 1.25 * 0.7 * 2 / 4)
    assert puct_score(b, 4, 1.25) == pytest.approx(0.9 + 1.25 * 0.3 * 2 / 1)  # unvisited: Q = PRM value
    assert select_child(tree, parent, 1.25) is b
    assert select_child(tree, parent, 0.0) is b
    b.merged_into = a.id  # merged siblings are never selected
    assert select_child(tree, parent, 1.25) is a


def test_mcts_simulation_sequence_by_hand():
    table = {
        (): [cand("a", tokens=2, logprob=-2.0), cand("b", tokens=2, logprob=-2.0)],
        ("a",): [cand("a1", finished=True), cand("a2", finished=True)],
        ("b",): [cand("b1", finished=True)],
    }
    values = {"a": 0.9, "b": 0.2, "a1": 0.4, "a2": 0.7, "b1": 1.0}
    dispatcher = Dispatcher(TablePolicy(table), TableReward(values), None)
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(num_simulations=3), SeedStream(0, "p"))

    async def work(_):
        await expand(ctx, [ctx.tree.root])
        await simulate(ctx, ctx.tree.root)  # N(root)=0: pure Q -> a (0.9), a new leaf:
        a, b = (by_text(ctx, t) for t in ("a", "b"))  # expanded in this simulation, its 0.9 backed up
        assert (a.visits, a.value_sum, ctx.tree.root.visits) == (1, 0.9, 1)
        assert a.expanded and not b.expanded
        # second: a = 0.9 + 1.25*0.5*1/2 = 1.2125 ; b = 0.2 + 1.25*0.5*1/1 = 0.825 -> a;
        # its children (N(a)=1): a1 = 0.4 + 1.25*0.5*1 = 1.025 ; a2 = 0.7 + 0.625 = 1.325 -> a2 (terminal)
        await simulate(ctx, ctx.tree.root)
        a1, a2 = by_text(ctx, "a1"), by_text(ctx, "a2")
        assert a2.visits == 1 and a.visits == 2
        assert a.value_sum == pytest.approx(0.9 + 0.7) and ctx.tree.root.visits == 2
        # third: a = 0.8 + 1.25*0.5*sqrt(2)/3 = 1.0946 ; b = 0.2 + 1.25*0.5*sqrt(2) = 1.0839 -> a;
        # a1 = 0.4 + 0.625*sqrt(2) = 1.2839 ; a2 = 0.7 + 0.625*sqrt(2)/2 = 1.1419 -> a1
        await simulate(ctx, ctx.tree.root)
        assert a1.visits == 1 and a.value_sum == pytest.approx(0.9 + 0.7 + 0.4)
        assert a.visits == 3 and b.visits == 0

    asyncio.run(run_workers(dispatcher, [0], work, 1))


@pytest.mark.parametrize("merge_value", ["own", "class_max"])
def test_mcts_merge_sums_priors_values_and_commits_most_visited(merge_value):
    table = {
        (): [cand("A", tokens=2, logprob=-2.0), cand("so A", tokens=2, logprob=-2.0), cand("B", tokens=2, logprob=-1.0)],
        ("A",): [cand("A done answer 1", finished=True)],
        ("B",): [cand("B done answer 2", finished=True)],
    }
    values = {"A": 0.2, "so A": 0.95, "B": 0.6, "A done answer 1": 0.9, "B done answer 2": 0.1}
    final, ctx = run_search(mcts, TablePolicy(table), TableReward(values), RestateJudge(), width=3, num_simulations=6,
                            merge_value=merge_value)
    a, so_a, b = (by_text(ctx, t, 1) for t in ("A", "so A", "B"))
    priors = sibling_priors(table[()])
    assert so_a.merged_into == a.id and so_a.children == [] and so_a.visits == 0
    assert a.prior == pytest.approx(priors[0] + priors[1])
    # the reference keeps the kept node's own 0.2; class_max gives it the merged 0.95
    assert a.value == pytest.approx(0.2 if merge_value == "own" else 0.95)
    assert a.visits > b.visits
    assert ctx.tree.steps(final) == ("A", "A done answer 1")
    assert final.terminal


def test_mcts_without_merge_value_rule_would_pick_other_branch():
    """The merge rule matters: unpruned, "so A" is its own child and B competes differently."""
    table = {
        (): [cand("A", tokens=2, logprob=-2.0), cand("so A", tokens=2, logprob=-2.0), cand("B", tokens=2, logprob=-1.0)],
        ("A",): [cand("A done answer 1", finished=True)],
        ("so A",): [cand("sA done answer 1", finished=True)],
        ("B",): [cand("B done answer 2", finished=True)],
    }
    values = {"A": 0.2, "so A": 0.95, "B": 0.6}
    final, ctx = run_search(mcts, TablePolicy(table), TableReward(values), RestateJudge(), prune=False, width=3,
                            num_simulations=6)
    assert all(n.merged_into is None for n in ctx.tree)
    assert ctx.tree.steps(final)[0] == "so A"


# -- DFS ------------------------------------------------------------------------------------------
def test_dfs_never_explores_a_pruned_class_and_collects_num_sequence():
    table = {
        (): [cand("A"), cand("so A"), cand("B")],
        ("A",): [cand("A x answer 1", finished=True), cand("A y answer 5", finished=True)],
        ("so A",): [cand("sA z answer 1", finished=True)],
        ("B",): [cand("B x answer 2", finished=True)],
    }
    values = {"A": 0.9, "so A": 0.99, "B": 0.5, "A x answer 1": 0.3, "A y answer 5": 0.4, "B x answer 2": 0.8}
    policy = TablePolicy(table)
    final, ctx = run_search(dfs, policy, TableReward(values), RestateJudge(), width=3, num_sequence=3)
    # the class {A, so A} is kept by its first member (the reference's rule) and explored once
    assert [r.steps for r in policy.requests] == [(), ("A",), ("B",)]
    assert ctx.tree.steps(final) == ("B", "B x answer 2")
    # pruner.representative "score" keeps the higher-scoring member instead
    policy = TablePolicy(table)
    run_search(dfs, policy, TableReward(values), RestateJudge(), pruner=PrunerConfig(representative="score"),
               width=3, num_sequence=3)
    assert [r.steps for r in policy.requests] == [(), ("so A",), ("B",)]
    # unpruned, the equivalent sibling (valued highest) is explored first
    policy = TablePolicy(table)
    final, ctx = run_search(dfs, policy, TableReward(values), RestateJudge(), prune=False, width=3, num_sequence=2)
    assert [r.steps for r in policy.requests] == [(), ("so A",), ("A",)]


def test_dfs_counts_a_finished_representatives_merged_twins_toward_num_sequence():
    """Merging finished siblings must not make DFS search on for distinct solutions: the twins are
    complete solutions already generated, and the unpruned search counts them."""
    table = {
        (): [cand("A"), cand("B")],
        ("A",): [cand("A done answer 1", finished=True), cand("so A done answer 1", finished=True),
                 cand("A other answer 2", finished=True)],
        ("B",): [cand("B done answer 3", finished=True)],
    }
    values = {"A": 0.9, "B": 0.5, "A done answer 1": 0.8, "so A done answer 1": 0.7, "A other answer 2": 0.6}
    for prune in (False, True):
        policy = TablePolicy(table)
        final, ctx = run_search(dfs, policy, TableReward(values), RestateJudge(), prune=prune, width=3,
                                num_sequence=3)
        assert [r.steps for r in policy.requests] == [(), ("A",)], prune  # B is never expanded
        assert ctx.tree.steps(final) == ("A", "A done answer 1")
    # only representatives are the search's solutions (the twin's answer is its representative's)
    assert [ctx.tree[n.id].text for n in ctx.solutions] == ["A done answer 1", "A other answer 2"]
    assert sum(n.merged_into is not None for n in ctx.tree) == 1
    # four distinct solutions wanted: the pruned search goes on to B as the unpruned one does
    policy = TablePolicy(table)
    run_search(dfs, policy, TableReward(values), RestateJudge(), width=3, num_sequence=4)
    assert [r.steps for r in policy.requests] == [(), ("A",), ("B",)]


def test_dfs_respects_expansion_budget_and_min_value():
    table = {(): [cand("A"), cand("B")], ("A",): [cand("A2")], ("A", "A2"): [cand("A3")], ("B",): [cand("B2")]}
    values = {"A": 0.9, "B": 0.1}
    policy = TablePolicy(table)
    run_search(dfs, policy, TableReward(values), None, prune=False, width=2, dfs_max_expansions=2)
    assert len(policy.requests) == 2
    policy = TablePolicy(table)
    run_search(dfs, policy, TableReward(values), None, prune=False, width=2, dfs_min_value=0.5, max_depth=3)
    assert ("B",) not in [r.steps for r in policy.requests]


# -- lookahead --------------------------------------------------------------------------------------
def test_lookahead_rolls_out_representatives_only_and_counts_rollout_tokens():
    table = {
        (): [cand("A", tokens=1), cand("so A", tokens=1), cand("B", tokens=1)],
        ("A",): [cand("A r1", tokens=10)],
        ("A", "A r1"): [cand("A r2 answer 1", tokens=10, finished=True)],
        ("B",): [cand("B r1", tokens=10)],
        ("B", "B r1"): [cand("B r2 answer 2", tokens=10, finished=True)],
    }
    values = {"A": 0.9, "B": 0.1, "A r2 answer 1": 0.2, "B r2 answer 2": 0.8}
    policy = TablePolicy(table)
    final, ctx = run_search(lookahead, policy, TableReward(values), RestateJudge(), width=3, beam_size=1,
                            lookahead_steps=2, max_depth=3)
    rollouts = [r for r in policy.requests if r.temperature == 0.0]
    assert {r.steps[0] for r in rollouts} == {"A", "B"}  # "so A" was pruned before the rollouts
    assert all(r.n == 1 for r in rollouts)
    # B wins on its rollout value (0.8 > 0.2) although its own PRM value is lower
    assert ctx.tree.steps(final)[0] == "B"
    expected = sum(c.num_tokens for r in policy.requests for c in table[r.steps][: r.n])
    assert ctx.stats.generated_tokens == expected


# -- token accounting across all algorithms ------------------------------------------------------
class CountingPolicy(SeededPolicy):
    def __init__(self):
        super().__init__(finish_depth=3)
        self.returned_tokens = 0

    def generate(self, requests):
        out = super().generate(requests)
        self.returned_tokens += sum(c.num_tokens for cs in out for c in cs)
        return out


@pytest.mark.parametrize("search", [mcts, sbs, dfs, lookahead])
@pytest.mark.parametrize("stage", ["after_prm", "before_prm"])
def test_every_returned_token_is_counted(search, stage):
    policy = CountingPolicy()
    final, ctx = run_search(search, policy, KeyedReward(), RestateJudge(), width=4, num_simulations=4,
                            prune_stage=stage)
    assert ctx.stats.generated_tokens == policy.returned_tokens > 0
    assert final.terminal
    assert ctx.stats.pruned + ctx.stats.duplicates > 0
    assert sum(n.tokens for n in ctx.tree) <= ctx.stats.generated_tokens
    if search is not lookahead:
        assert sum(n.tokens for n in ctx.tree) == ctx.stats.generated_tokens
    # merged nodes are leaves
    assert all(not n.children for n in ctx.tree if n.merged_into is not None)


# -- which sibling SBS / DFS / lookahead keep, and which value they rank on ----------------------
def _class_table():
    return {
        (): [cand("A"), cand("so A"), cand("B")],
        ("A",): [cand("A x answer 1", finished=True)],
        ("so A",): [cand("sA x answer 1", finished=True)],
        ("B",): [cand("B x answer 2", finished=True)],
    }


_CLASS_VALUES = {"A": 0.3, "so A": 0.9, "B": 0.6, "A x answer 1": 0.7, "sA x answer 1": 0.7, "B x answer 2": 0.7}


@pytest.mark.parametrize("search", [sbs, dfs, lookahead])
def test_kept_sibling_is_the_first_with_its_own_value(search):
    """As the reference: the class {A, so A} is kept by A (first generated) valued 0.3, so B
    (0.6) wins; before, the class was kept by its best-scoring member and ranked at 0.9."""
    final, ctx = run_search(search, TablePolicy(_class_table()), TableReward(_CLASS_VALUES), RestateJudge(), width=3,
                            beam_size=1, num_sequence=1, lookahead_steps=0)
    path = ctx.tree.ancestry(final)
    assert [n.text for n in path] == ["B", "B x answer 2"]
    a = by_text(ctx, "A", 1)
    assert by_text(ctx, "so A", 1).merged_into == a.id and a.value == pytest.approx(0.3)


@pytest.mark.parametrize("search", [sbs, dfs, lookahead])
def test_representative_score_keeps_the_best_scoring_member_with_its_own_score(search):
    """The option that was the default: the value ranked on is the PRM score of the kept text."""
    final, ctx = run_search(search, TablePolicy(_class_table()), TableReward(_CLASS_VALUES), RestateJudge(), width=3,
                            beam_size=1, num_sequence=1, lookahead_steps=0,
                            pruner=PrunerConfig(representative="score"))
    path = ctx.tree.ancestry(final)
    assert [n.text for n in path] == ["so A", "sA x answer 1"]
    assert [n.value for n in path] == [_CLASS_VALUES[n.text] for n in path]
    assert by_text(ctx, "A", 1).merged_into == by_text(ctx, "so A", 1).id


# -- what the judge counters count --------------------------------------------------------------
@pytest.mark.parametrize("learned, calls", [(True, 2), (False, 0)])
def test_judge_calls_count_distinct_pairs_a_learned_judge_ran_on(learned, calls):
    table = {
        (): [cand("A"), cand("B")],
        ("A",): [cand("x y", finished=True), cand("x z", finished=True)],
        ("B",): [cand("x y", finished=True), cand("x z", finished=True)],  # the same pair again
    }
    dispatcher = Dispatcher(TablePolicy(table), TableReward({}), RestateJudge(learned=learned))
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(width=2, beam_size=2), SeedStream(0, "p"))

    async def work(_):
        await sbs(ctx)

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    assert ctx.stats.judge_pairs == 3  # every sibling pair sent, the repeat included
    assert ctx.stats.judge_calls == calls  # (A, B) and (x y, x z) once; none for a rule


class _PrefilteringJudge(CachedJudge):
    """A learned judge (as the model strategy) whose prefilter lets only pairs sharing a first
    letter reach its "model"; equivalent when the texts end alike."""

    name = "prefiltering"
    learned = True

    def needs_model(self, a: str, b: str) -> bool:
        return a[:1] == b[:1]

    def _judge_new(self, pairs):
        return [(1.0, 1.0) if self.needs_model(a, b) and a[-1] == b[-1] else (0.0, 0.0) for a, b in pairs]


def test_judge_calls_are_what_the_judge_reports_per_problem_not_its_cache():
    """Two problems share one judge: the second finds the pairs cached, but its record must
    count them as the first did (records do not depend on what else was in flight)."""
    table = {(): [cand("x1"), cand("x 1"), cand("y1"), cand("x2")]}
    judge = _PrefilteringJudge()
    dispatcher = Dispatcher(TablePolicy(table), TableReward({}), judge)
    ctxs = [SearchContext(Q, dispatcher.handle(k), SearchConfig(width=4), SeedStream(0, str(k))) for k in (0, 1)]

    async def work(k):
        await expand(ctxs[k], [ctxs[k].tree.root])

    asyncio.run(run_workers(dispatcher, [0, 1], work, 1))
    for ctx in ctxs:
        # greedy asks each sibling against the representatives before it: (x1, x 1) merges, then
        # (x1, y1), then (x1, x2) and (y1, x2); never a pair with the member "x 1"
        assert ctx.stats.judge_pairs == 4
        # model calls: (x1, x 1), (x1, x2); (y1, *) is prefiltered
        assert ctx.stats.judge_calls == 2
        assert ctx.tree[2].merged_into == ctx.tree[1].id  # "x 1" ends like "x1": merged
    assert judge.stats.cache_hits == 4  # the second problem's pairs were all cached


@pytest.mark.parametrize("prune", [False, True])
def test_exact_duplicates_dropped_and_renormalised_pruned_or_not(prune):
    table = {(): [cand("A", logprob=-1.0), cand("B", logprob=-2.0), cand("A", logprob=-1.0)]}
    dispatcher = Dispatcher(TablePolicy(table), TableReward({}), RestateJudge() if prune else None)
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(width=3), SeedStream(0, "p"))

    async def work(_):
        await expand(ctx, [ctx.tree.root])

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    a, b = ctx.tree.live_children(ctx.tree.root)
    assert ctx.tree[3].merged_into == a.id and ctx.stats.duplicates == 1
    # the reference, in both modes: a softmax over the distinct steps (pruned runs used to fold
    # the duplicate's prior into its first copy)
    assert (a.prior, b.prior) == pytest.approx(tuple(sibling_priors(table[()][:2])))


# -- PUCT weight, retries, missing PRM scores ------------------------------------------------------
def test_puct_weight_is_the_references_log_schedule():
    """pb_c = log((N + 19652 + 1) / 19652) + 1.25 with N the parent's visits; null base = flat."""
    assert exploration_weight(0, 1.25, 19652.0) == pytest.approx(math.log(19653 / 19652) + 1.25)
    assert exploration_weight(19652, 1.25, 19652.0) == pytest.approx(math.log((19652 + 19653) / 19652) + 1.25)
    assert exploration_weight(100, 1.25, None) == 1.25
    tree = Tree(Q)
    tree.root.visits = 19652
    child = tree.add_child(tree.root, "a", prior=0.5, value=0.1)
    weight = math.log((19652 + 19653) / 19652) + 1.25
    assert puct_score(child, 19652, 1.25, 19652.0) == pytest.approx(0.1 + weight * 0.5 * math.sqrt(19652))
    assert SearchConfig().c_puct_base == 19652.0  # the default is the reference's


def test_mcts_uses_the_configured_puct_base():
    """With a tiny base the weight grows fast and the prior-heavy sibling wins more visits."""
    table = {
        (): [cand("A", tokens=1, logprob=0.0), cand("B", tokens=1, logprob=-3.0)],
        ("A",): [cand("A1 answer 1", finished=True)],
        ("B",): [cand("B1 answer 2", finished=True)],
    }
    values = {"A": 0.1, "B": 0.6, "A1 answer 1": 0.1, "B1 answer 2": 0.6}
    visits = {}
    for base in (None, 0.01):
        _, ctx = run_search(mcts, TablePolicy(table), TableReward(values), None, prune=False, width=2,
                            num_simulations=8, c_puct_base=base)
        visits[base] = by_text(ctx, "A", 1).visits
    assert visits[0.01] > visits[None]


class FlakyPolicy:
    """Candidates cut by the token limit for the first ``bad`` calls, then a usable one."""

    def __init__(self, bad: int) -> None:
        self.bad, self.calls, self.seeds = bad, 0, []

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls += 1
            self.seeds.append(r.seed)
            if r.steps:
                out.append([cand("done answer 1", tokens=2, finished=True)])
            elif self.calls <= self.bad:
                out.append([Candidate("runaway", 7, -7.0, False, truncated=True)] * r.n)
            else:
                out.append([cand("A", tokens=3)])
        return out


@pytest.mark.parametrize("bad, dead", [(2, False), (3, True)])
def test_an_empty_expansion_is_retried_up_to_three_calls(bad, dead):
    policy = FlakyPolicy(bad)
    _, ctx = run_search(sbs, policy, TableReward({}), None, prune=False, width=2, beam_size=1)
    root = ctx.tree.root
    assert len(set(policy.seeds)) == len(policy.seeds)  # every retry is a fresh sample
    assert ctx.stats.truncated == 2 * min(bad, 3)
    assert ctx.stats.generated_tokens == 7 * 2 * min(bad, 3) + (0 if dead else 3 + 2)
    if dead:
        assert root.terminal and ctx.stats.dead_ends == 1 and ctx.stats.retries == 2 and policy.calls == 3
    else:
        assert not root.terminal and ctx.stats.dead_ends == 0 and ctx.stats.retries == 2
        assert [n.text for n in ctx.tree.live_children(root)] == ["A"]


def test_expansion_attempts_one_makes_it_a_dead_end_at_once():
    policy = FlakyPolicy(1)
    _, ctx = run_search(sbs, policy, TableReward({}), None, prune=False, width=2, beam_size=1, expansion_attempts=1)
    assert ctx.tree.root.terminal and policy.calls == 1 and ctx.stats.retries == 0


class GappyReward(TableReward):
    """Returns no score for a step named in ``missing``."""

    def score(self, requests):
        out = super().score(requests)
        return [[] if r.steps[-1] == "B" else s for r, s in zip(requests, out)]


def test_a_missing_prm_score_is_valued_zero_and_flagged_on_its_node():
    ctx, kids = _expand_root({(): [cand("A"), cand("B")]}, {"A": 0.4}, None, width=2)
    a, b = kids
    assert (a.value, a.prm_missing) == (0.4, False)
    dispatcher = Dispatcher(TablePolicy({(): [cand("A"), cand("B")]}), GappyReward({"A": 0.4}), None)
    ctx = SearchContext(Q, dispatcher.handle(0), SearchConfig(width=2), SeedStream(0, "p"))

    async def work(_):
        await expand(ctx, [ctx.tree.root])

    asyncio.run(run_workers(dispatcher, [0], work, 1))
    b = by_text(ctx, "B", 1)
    assert b.value == 0.0 and b.prm_missing and ctx.stats.prm_missing == 1
    assert [n["prm_missing"] for n in ctx.tree.to_json()] == [False, False, True]


@pytest.mark.parametrize("field, value", [("merge_value", "max"), ("c_puct_base", 0.0), ("expansion_attempts", 0)])
def test_new_search_settings_are_validated(field, value):
    with pytest.raises(InputError) as info:
        SearchConfig(**{field: value}).validate()
    assert f"search.{field}" in str(info.value)
