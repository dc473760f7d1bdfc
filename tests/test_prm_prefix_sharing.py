"""Sibling prefix sharing in the Math-Shepherd PRM: same scores as the plain padded path, less work."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from equiv.search.rewards import RewardConfig, build_reward_model
from equiv.errors import InputError
from equiv.search.rewards.prefix_sharing import HeadCache, common_prefix_len, make_groups
from equiv.search.types import ScoreRequest

QUESTION = "Janet's ducks lay 16 eggs per day. She eats three for breakfast. How many are left?"
PATH = ("She eats 3 eggs.", "16 - 3 = 13 eggs are left.")
CHILDREN = ["So the answer is 13.", "The answer is: 13", "13", "Then she sells 13 * 2 = $26 every day at the market."]


def sibling_requests() -> list[ScoreRequest]:
    """Two nodes' children (different depths), a lone first step, and one of another question."""
    reqs = [ScoreRequest(QUESTION, PATH + (c,)) for c in CHILDREN]
    reqs += [ScoreRequest(QUESTION, PATH[:1] + (c,)) for c in CHILDREN[:3]]
    reqs += [ScoreRequest(QUESTION, ("Eggs: 16.",)), ScoreRequest("What is 2 + 3?", ("2 + 3 = 5.",))]
    reqs += [ScoreRequest(QUESTION, ())]
    return reqs


@pytest.fixture(scope="module")
def prm_dir(tmp_path_factory):
    from equiv.search.tiny import build_tiny_prm

    return build_tiny_prm(tmp_path_factory.mktemp("tiny") / "prm")


@contextmanager
def positions_run(model):
    """Collect the number of token positions (padding included) of every forward pass of ``model``."""
    seen: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(int(kwargs["input_ids"].numel())), with_kwargs=True
    )
    try:
        yield seen
    finally:
        hook.remove()


def build(prm_dir, attn_implementation=None, **options):
    return build_reward_model(
        RewardConfig(kind="math_shepherd", model=prm_dir, batch_size=8, device="cpu", dtype="float32",
                     attn_implementation=attn_implementation, options=options)
    )


def test_common_prefix_len_leaves_every_sequence_a_token():
    assert common_prefix_len([[1, 2, 3, 4], [1, 2, 5]]) == 2
    assert common_prefix_len([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shorter one keeps its last token
    assert common_prefix_len([[1, 2], [1, 2]]) == 1
    assert common_prefix_len([[7], [7, 8]]) == 0
    assert common_prefix_len([[1, 2], [3, 4]]) == 0


def test_padded_rows_pads_on_either_side():
    from equiv.devices import padded_rows

    ids, mask = padded_rows([[1, 2, 3], [4]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = padded_rows([[1, 2, 3], [4]], pad_id=0, side="left")
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    with pytest.raises(ValueError, match="side"):
        padded_rows([[1]], pad_id=0, side="middle")


def test_make_groups_splits_by_key_and_size_and_sends_singletons_to_the_plain_path():
    keyed = [("a", 0, [1, 2, 3]), ("a", 1, [1, 2, 4]), ("b", 2, [1, 2, 3]), ("a", 3, [1, 2, 5]), ("c", 4, [9, 1]),
             ("c", 5, [8, 1])]
    groups, lone = make_groups(keyed, max_members=2)
    assert [[i for i, _ in g.members] for g in groups] == [[0, 1]]
    assert [g.prefix_len for g in groups] == [2]
    # "a" split into [0, 1] and [3] (size cap), [3] and "b" are alone, "c" shares nothing
    assert sorted(i for i, _ in lone) == [2, 3, 4, 5]


def test_shared_scores_equal_the_plain_padded_path(prm_dir):
    shared, plain = build(prm_dir), build(prm_dir, share_prefix=False)
    reqs = sibling_requests()
    a, b = shared.score(reqs), plain.score(reqs)
    assert [len(x) for x in a] == [len(r.steps) for r in reqs]
    for got, want in zip(a, b):
        assert got == pytest.approx(want, abs=1e-5)
    # the sibling sets really took the shared path: the question is cached by now, so 2 forwards
    # (rest of the prefix, the children's suffixes) for the four children
    shared.calls = 0
    shared.score(reqs[:4])
    assert shared.calls == 2


def test_eager_attention_honours_the_shared_path_masks_and_positions(prm_dir):
    """``attn_implementation="eager"`` (faster than cuDNN sdpa on the H100, docs/results.md)
    reads the same 4D masks and explicit positions: scores equal the default kernel's plain path."""
    eager, plain = build(prm_dir, "eager"), build(prm_dir, share_prefix=False)
    assert eager.model.config._attn_implementation == "eager"
    reqs = sibling_requests()
    for got, want in zip(eager.score(reqs), plain.score(reqs)):
        assert got == pytest.approx(want, abs=1e-5)


def test_shared_path_runs_fewer_token_positions(prm_dir):
    """The point of sharing: the question and path run once per node, not once per child."""
    prm = build(prm_dir)
    with positions_run(prm.head.decoder) as seen:
        prm.score(sibling_requests()[:4])
    shared_positions = sum(seen)
    prm.share_prefix = False
    with positions_run(prm.head.decoder) as seen:
        prm.score(sibling_requests()[:4])
    plain_positions = sum(seen)
    assert shared_positions < 0.6 * plain_positions


def test_bfloat16_shared_path_stays_close(prm_dir):
    """The GPU recipes run the PRM in bf16: sharing must not move scores beyond bf16 noise."""
    shared = build_reward_model(RewardConfig(kind="math_shepherd", model=prm_dir, device="cpu", dtype="bfloat16"))
    plain = build_reward_model(
        RewardConfig(kind="math_shepherd", model=prm_dir, device="cpu", dtype="bfloat16", options={"share_prefix": False})
    )
    assert next(shared.model.parameters()).dtype == torch.bfloat16
    reqs = sibling_requests()
    for got, want in zip(shared.score(reqs), plain.score(reqs)):
        assert got == pytest.approx(want, abs=0.03)


def test_question_head_is_reused_across_calls_with_the_same_scores(prm_dir):
    prm, plain = build(prm_dir), build(prm_dir, share_prefix=False)
    reqs = sibling_requests()
    first = prm.score(reqs)
    assert prm.head_cache.misses == 1 and len(prm.head_cache) == 1  # one question computed and kept
    again = prm.score(reqs)
    assert (prm.head_cache.hits, prm.head_cache.misses) == (1, 1)  # looked up once per call for both its groups
    assert again == first  # a cached head gives bit-identical scores
    for got, want in zip(again, plain.score(reqs)):
        assert got == pytest.approx(want, abs=1e-5)
    prm.clear_cache()
    assert len(prm.head_cache) == 0


def test_head_cache_is_lru_bounded_and_can_be_off(prm_dir):
    cache = HeadCache(2)
    for key in [(1,), (2,), (1,), (3,)]:
        cache.put(key, [])
    assert cache.get((2,)) is None and cache.get((1,)) == [] and len(cache) == 2
    assert build(prm_dir, head_cache_size=0).head_cache is None
    assert build(prm_dir, share_prefix=False).head_cache is None
    with pytest.raises(InputError, match="head_cache_size"):
        build(prm_dir, head_cache_size=-1)


def test_second_depth_runs_fewer_positions_with_the_question_cached(prm_dir):
    """A deeper node of the same problem re-runs only its path, not the question."""
    prm = build(prm_dir)
    prm.score(sibling_requests()[4:7])  # depth 2 children: the question is computed and cached
    with positions_run(prm.head.decoder) as seen:
        prm.score(sibling_requests()[:4])  # depth 3 children of the same question
    warm = sum(seen)
    prm.clear_cache()
    with positions_run(prm.head.decoder) as seen:
        prm.score(sibling_requests()[:4])  # the same, with the question computed again
    cold = sum(seen)
    question_tokens = len(prm.tokenizer.encode(QUESTION))
    assert warm <= cold - question_tokens + 2  # the cold call's extra head pass pads at most a token


def test_children_reuse_their_parents_cached_sequence_and_scores(prm_dir):
    """cache_children: one depth later the parent's whole sequence is the head, only new steps run."""
    prm, plain = build(prm_dir, cache_children=True), build(prm_dir, share_prefix=False)
    depth2 = [ScoreRequest(QUESTION, PATH[:1] + (c,)) for c in (PATH[1], *CHILDREN[:2])]
    parent_scores = prm.score(depth2)[0]  # PATH is one of these children: its sequence is kept
    depth3 = [ScoreRequest(QUESTION, PATH + (c,)) for c in CHILDREN]
    with positions_run(prm.head.decoder) as seen:
        got = prm.score(depth3)
    for row, want in zip(got, plain.score(depth3)):
        assert row[:2] == parent_scores  # the parent's step scores are reused as they were
        assert row == pytest.approx(want, abs=1e-5)
    longest_child = max(len(prm.tokenizer.encode(c + " ки\n", add_special_tokens=False)) for c in CHILDREN)
    assert len(seen) == 1  # one pass: no question, no path, only the children's own steps (padded)
    assert seen[0] <= len(CHILDREN) * (longest_child + 2)


def test_eviction_falls_back_to_the_question_with_the_same_scores(prm_dir):
    prm, plain = build(prm_dir, head_cache_size=1, cache_children=True), build(prm_dir, share_prefix=False)
    depth2 = [ScoreRequest(QUESTION, PATH[:1] + (c,)) for c in (PATH[1], *CHILDREN[:2])]
    prm.score(depth2)  # the last child stored evicts the others, the parent among them
    depth3 = [ScoreRequest(QUESTION, PATH + (c,)) for c in CHILDREN]
    for row, want in zip(prm.score(depth3), plain.score(depth3)):
        assert row == pytest.approx(want, abs=1e-5)


def test_children_are_kept_only_when_asked(prm_dir):
    prm = build(prm_dir)
    prm.score(sibling_requests()[:4])
    assert len(prm.head_cache) == 1  # the question only
    assert build(prm_dir, cache_children=True, head_cache_size=0).cache_children is False  # nowhere to keep them


def test_mistral_architecture_with_sliding_window_layers_and_gqa(prm_dir):
    """The paper's PRM is a Mistral: sliding-window cache layers and grouped KV heads work too."""
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    from equiv.search.rewards.math_shepherd import MathShepherdPRM

    tok = AutoTokenizer.from_pretrained(prm_dir)
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=64, sliding_window=4096,
                           pad_token_id=tok.pad_token_id, initializer_range=0.2)
    model = MistralForCausalLM(config).eval()
    shared = MathShepherdPRM(model, tok, cache_children=True)
    plain = MathShepherdPRM(model, tok, share_prefix=False)
    depth3 = [ScoreRequest(QUESTION, PATH + (c,)) for c in CHILDREN]
    depth4 = [ScoreRequest(QUESTION, PATH + (CHILDREN[0], c)) for c in CHILDREN[1:]]
    got = shared.score(depth3)
    parent = tuple(tok.encode(shared.format(ScoreRequest(QUESTION, PATH + (CHILDREN[0],)))))
    assert parent in shared.head_cache  # kept whole despite the sliding-window layers
    got += shared.score(depth4)  # depth 4 takes it as its head
    assert shared.head_cache.hits == 1
    for row, want in zip(got, plain.score(depth3) + plain.score(depth4)):
        assert row == pytest.approx(want, abs=1e-5)
