"""Runaway steps and a full context: the search drops the one and ends the path at the other,
instead of keeping a cut-off step or turning the problem into an engine error."""

from __future__ import annotations

from equiv.search.mcts import mcts
from equiv.search.sbs import sbs
from equiv.search.types import StepRequest
from tests.helpers.scripted import ScriptedEngine, TableReward, raw
from tests.helpers.search import run_search

RUNAWAY = "let x be " + "x + " * 400


def _script(prompt: str):
    steps = prompt.count("\n\n")
    if steps == 1:  # after the question
        return [raw(RUNAWAY, tokens=1024, logprob=-10.0, end="length"), raw("add 2", tokens=4)]
    return [raw("The answer is 3", tokens=6, end="eos")]


def test_truncated_candidate_is_dropped_but_its_tokens_count():
    engine = ScriptedEngine(_script)
    (cands,) = engine.generate([StepRequest("q", (), n=2, seed=1)])
    assert [c.truncated for c in cands] == [True, False]
    values = {RUNAWAY.strip(): 0.99, "add 2": 0.4, "The answer is 3": 0.8}
    for search in (mcts, sbs):
        final, ctx = run_search(search, ScriptedEngine(_script), TableReward(values), prune=False, width=2,
                                num_simulations=4, beam_size=1)
        assert all(n.text != RUNAWAY.strip() for n in ctx.tree)
        assert ctx.tree.steps(final) == ("add 2", "The answer is 3")
        assert ctx.stats.truncated == 1
        assert ctx.stats.generated_tokens == 1024 + 4 + 2 * 6  # the runaway's 1024 count
        assert ctx.tree[1].prior == 1.0  # priors are over the kept candidates only


def _long_steps(prompt: str):
    return [raw("s" * 30, tokens=30)]


def test_node_whose_prompt_would_not_fit_becomes_a_dead_end():
    # question "q" + "\n\n" + (30 chars + "\n\n") per step: 35 tokens after one step, 67 after two
    engine = ScriptedEngine(_long_steps, max_model_len=60)
    final, ctx = run_search(mcts, engine, TableReward({}), prune=False, width=1, num_simulations=3)
    assert ctx.tree.steps(final) == ("s" * 30, "s" * 30)
    assert final.terminal and final.children == []
    assert ctx.stats.dead_ends == 1
    assert all(len(p) < 60 for p in engine.sampled)


def _boxed_then_more(prompt: str):
    if prompt.count("\n\n") == 1:
        return [raw("so x = \\boxed{3}", tokens=8)]  # stopped on the delimiter, not EOS
    return [raw("Check: 3 is right.", tokens=6, end="eos")]


def test_a_step_with_the_answer_ends_the_solution_only_where_the_format_says_so():
    from equiv.search.policies.prompts import FORMATS

    assert FORMATS["qwen25_math_chat"].end_at_answer is False  # the reference: EOS only
    request = [StepRequest("q", (), n=1, seed=1)]
    (eos_only,) = ScriptedEngine(_boxed_then_more, end_at_answer=False).generate(request)
    (at_answer,) = ScriptedEngine(_boxed_then_more, end_at_answer=True).generate(request)
    assert [c.finished for c in eos_only] == [False] and [c.finished for c in at_answer] == [True]
    final, ctx = run_search(sbs, ScriptedEngine(_boxed_then_more, end_at_answer=False), TableReward({}),
                            prune=False, width=1, beam_size=1)
    assert ctx.tree.steps(final) == ("so x = \\boxed{3}", "Check: 3 is right.")


def test_mistral_sft_ends_a_solution_only_at_eos_as_the_reference():
    """The reference's environments have no stop string (STOP_STR = None): "The answer is" does
    not end a Math-Shepherd solution; the policy's EOS does. (It used to end it.)"""
    from equiv.search.policies.prompts import FORMATS, resolve_format

    fmt = FORMATS["mistral_sft"]
    assert fmt.end_at_answer is False and fmt.is_final("Step 3: The answer is: 18")
    assert resolve_format("auto", "peiyi9979/mistral-7b-sft").end_at_answer is False
    assert resolve_format("mistral_sft", "x", end_at_answer=True).end_at_answer is True  # the override stays


def _rollout_runs_away(prompt: str):
    steps = prompt.count("\n\n")
    if steps == 1:  # after the question: two first steps
        return [raw("add 2", tokens=4), raw("add 3", tokens=5)]
    return [raw(RUNAWAY, tokens=1024, logprob=-10.0, end="length")]  # every continuation runs away


def test_lookahead_counts_a_runaway_rollout_as_truncated_like_an_expansion_does():
    from equiv.search.lookahead import lookahead

    values = {"add 2": 0.4, "add 3": 0.6}
    _, ctx = run_search(lookahead, ScriptedEngine(_rollout_runs_away), TableReward(values), prune=False, width=2,
                        beam_size=1, lookahead_steps=1, max_depth=2)
    s = ctx.stats
    # The search's policy calls all go through one counting function (expansion.generate): a
    # rollout step cut by the token limit is truncated, not a candidate, as in an expansion.
    assert s.truncated >= 2 and s.truncated_tokens == 1024 * s.truncated
    assert s.generated_tokens == s.truncated_tokens + sum(n.tokens for n in ctx.tree)
    assert s.candidates == sum(1 for n in ctx.tree if n.parent is not None)  # was: + the rollouts
