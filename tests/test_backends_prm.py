"""Math-Shepherd PRM on the tiny random-init PRM: shapes, range, batching, tag positions."""

from __future__ import annotations


import pytest
import torch

from equiv.errors import InputError
from equiv.search.rewards import REWARDS, RewardConfig, build_reward_model, register_reward_model, registered_reward_models
from equiv.search.types import RewardModel, ScoreRequest

REQS = [
    ScoreRequest("What is 2 + 3?", ("First add 2 and 3.", "2 + 3 = 5.", "The answer is: 5")),
    ScoreRequest("Janet's ducks lay 16 eggs per day.", ()),
    ScoreRequest("How many eggs are left?", ("16 - 3 - 4 = 9 eggs are left.",)),
    ScoreRequest("A robe takes 2 bolts of blue fiber.", ("It takes 1 bolt of white fiber.", "So 3 bolts in total.")),
]


@pytest.fixture(scope="module")
def prm(tmp_path_factory):
    from equiv.search.tiny import build_tiny_prm

    path = build_tiny_prm(tmp_path_factory.mktemp("tiny") / "prm")
    return build_reward_model(RewardConfig(kind="math_shepherd", model=path, batch_size=2, device="cpu"))


def test_one_score_per_step_in_range(prm):
    assert isinstance(prm, RewardModel)
    scores = prm.score(REQS)
    assert [len(s) for s in scores] == [3, 0, 1, 2]
    flat = [x for s in scores for x in s]
    assert all(0.0 < x < 1.0 for x in flat)
    assert len({round(x, 4) for x in flat}) > 1  # depends on the context, not a constant
    assert prm.score([]) == []


def test_batched_and_sorted_equals_one_at_a_time(prm):
    batched = prm.score(REQS)
    alone = [prm.score([r])[0] for r in REQS]
    for b, a in zip(batched, alone):
        assert b == pytest.approx(a, abs=1e-4)


def test_scores_are_p_plus_at_each_tag_computed_from_prefixes(prm):
    """Independent check: feed the text up to each tag alone, read P(+) at its last position."""
    req = REQS[0]
    text = prm.format(req)
    assert text.count("ки") == len(req.steps)
    ids = prm.tokenizer.encode(text)
    tag_positions = [i for i, t in enumerate(ids) if t == prm.step_tag_id]
    expected = []
    with torch.no_grad():
        for pos in tag_positions:
            logits = prm.model(input_ids=torch.tensor([ids[: pos + 1]])).logits[0, -1]
            pair = logits[prm.candidate_ids].float()
            expected.append(float(torch.softmax(pair, -1)[0]))
    assert prm.score([req])[0] == pytest.approx(expected, abs=1e-4)
    # A step tag inside a step's text does not add a spurious score.
    tricky = ScoreRequest("Q ки", ("a ки b", "c"))
    assert len(prm.score([tricky])[0]) == 2


def test_candidate_head_computes_the_two_columns_of_the_full_head(prm):
    """The PRM runs only the +/- rows of the LM head; they equal the full head's columns, and a
    model that post-processes its logits keeps the full head (its own numbers)."""
    from equiv.search.rewards.math_shepherd import CandidateHead

    assert prm.head.decoder is not None
    ids = torch.tensor([prm.tokenizer.encode(prm.format(REQS[0]))])
    with torch.no_grad():
        full = prm.model(input_ids=ids).logits[..., prm.candidate_ids]
        two = prm.head(input_ids=ids).logits
    assert two.shape == full.shape
    assert torch.allclose(two, full, atol=1e-5)
    prm.model.config.final_logit_softcapping = 30.0
    try:
        capped = CandidateHead(prm.model, prm.candidate_ids)
        assert capped.decoder is None
        with torch.no_grad():
            assert torch.equal(capped(input_ids=ids).logits, full)
    finally:
        del prm.model.config.final_logit_softcapping
    assert CandidateHead(prm.model, prm.candidate_ids, two_rows=False).decoder is None  # option candidate_head


def test_registry(tmp_path):
    assert "math_shepherd" in registered_reward_models()
    with pytest.raises(InputError, match="reward.kind"):
        build_reward_model(RewardConfig(kind="nope", model="x"))
    with pytest.raises(InputError, match="batch_size"):
        build_reward_model(RewardConfig(model="x", batch_size=0))

    class Constant:
        def __init__(self, cfg):
            self.cfg = cfg

        def score(self, requests):
            return [[0.5] * len(r.steps) for r in requests]

    register_reward_model("constant_for_test")(Constant)
    rm = build_reward_model(RewardConfig(kind="constant_for_test", model="unused"))
    assert rm.score(REQS[:1]) == [[0.5, 0.5, 0.5]]
    with pytest.raises(ValueError, match="already registered"):
        register_reward_model("constant_for_test")(lambda cfg: None)
    REWARDS.remove("constant_for_test")


def test_qwen25_math_prm_format_and_scores(tmp_path):
    from equiv.search.tiny import build_tiny_token_prm

    path = build_tiny_token_prm(tmp_path / "token_prm")
    cfg = RewardConfig(kind="qwen25_math_prm", model=path, batch_size=2, device="cpu",
                       options={"model_class": "token_classification"})
    prm = build_reward_model(cfg)
    text = prm.format(REQS[0])
    assert text.count("<extra_0>") == 3 and "Please reason step by step" in text
    scores = prm.score(REQS)
    assert [len(s) for s in scores] == [3, 0, 1, 2]
    assert all(0.0 < x < 1.0 for s in scores for x in s)
    alone = [prm.score([r])[0] for r in REQS]
    for b, a in zip(scores, alone):
        assert b == pytest.approx(a, abs=1e-4)
    with pytest.raises(InputError, match="reward.options"):
        build_reward_model(RewardConfig(kind="qwen25_math_prm", model=path, options={"model_class": "x"}))


def test_qwen25_math_prm_is_called_without_a_kv_cache(tmp_path):
    """The released checkpoint's remote code calls cache methods transformers 5.x removed; a
    score needs no cache, so the model is called with use_cache=False (the real 7B run is left
    to a GPU user with hub access: docs/search.md)."""
    from equiv.search.tiny import build_tiny_token_prm

    cfg = RewardConfig(kind="qwen25_math_prm", model=build_tiny_token_prm(tmp_path / "token_prm"), batch_size=2,
                       device="cpu", options={"model_class": "token_classification"})  # fmt: skip
    prm = build_reward_model(cfg)
    calls: list[dict] = []
    prm.model.register_forward_pre_hook(lambda module, args, kwargs: calls.append(dict(kwargs)), with_kwargs=True)
    prm.score(REQS)
    assert calls and all(kw.get("use_cache") is False for kw in calls)


@pytest.mark.parametrize(
    "device, accelerate, expected",
    [("cuda:0", True, {"device_map": "cuda:0"}), ("cuda:0", False, {}), ("cpu", True, {})],
)
def test_models_load_straight_to_the_device_where_transformers_can(monkeypatch, device, accelerate, expected):
    """device_map (which needs accelerate) saves the host-RAM copy of each 7B model; checked on
    the arguments built, since no GPU is at hand here."""
    import importlib.util

    from equiv.devices import direct_load_kwargs

    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        if name == "accelerate":
            return object() if accelerate else None
        return real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert direct_load_kwargs(device) == expected


def test_the_prm_loader_asks_for_a_direct_load(monkeypatch, tmp_path):
    import equiv.devices
    from equiv.search.tiny import build_tiny_prm

    asked: list[str] = []
    monkeypatch.setattr(equiv.devices, "direct_load_kwargs", lambda device: asked.append(str(device)) or {})
    build_reward_model(RewardConfig(kind="math_shepherd", model=build_tiny_prm(tmp_path / "prm"), device="cpu"))
    assert asked == ["cpu"]
