"""The transformers policy backend end to end with the tiny random-init Llama (CPU, seconds)."""

from __future__ import annotations

import pytest

from equiv.errors import InputError
from equiv.search.policies import PolicyConfig, build_policy
from equiv.search.policies.prompts import FORMATS, resolve_format
from equiv.search.types import Policy, StepRequest

MAX_NEW = 20


@pytest.fixture(scope="module")
def tiny_policy_dir(tmp_path_factory):
    from equiv.search.tiny import build_tiny_policy

    return build_tiny_policy(tmp_path_factory.mktemp("tiny") / "policy")


def make(model: str, **kw):
    cfg = dict(backend="transformers", model=model, max_new_tokens=MAX_NEW, device="cpu")
    cfg.update(kw)
    return build_policy(PolicyConfig(**cfg))


@pytest.fixture(scope="module")
def policy(tiny_policy_dir):
    return make(tiny_policy_dir)


def test_tiny_policy_is_cached_and_loads_with_chat_format(tiny_policy_dir, policy):
    from equiv.search.tiny import build_tiny_policy

    assert build_tiny_policy(tiny_policy_dir) == tiny_policy_dir  # cache hit, no rebuild
    assert isinstance(policy, Policy)
    assert policy.fmt.name == "qwen25_math_chat"  # auto: the tokenizer has a chat template
    prompt = policy.prompt(StepRequest("What is 2 + 3?", ("Add them.",), 1, 0))
    assert "Please reason step by step" in prompt and "What is 2 + 3?" in prompt
    assert prompt.endswith("<|assistant|>\nAdd them.\n\n")


def test_n_candidates_with_token_counts(policy):
    reqs = [StepRequest("What is 2 + 3?", (), 4, 1), StepRequest("Janet has 16 eggs.", ("She eats 3.",), 2, 2)]
    out = policy.generate(reqs)
    assert [len(row) for row in out] == [4, 2]
    for row in out:
        for cand in row:
            assert 1 <= cand.num_tokens <= MAX_NEW
            assert cand.logprob < 0
            assert "\n\n" not in cand.text  # cut at the step delimiter
    assert len({c.text for c in out[0]}) > 1  # sampled, not copies


def test_same_seed_same_output_and_batching_does_not_matter(policy):
    reqs = [StepRequest("What is 2 + 3?", (), 3, 7), StepRequest("How many eggs?", ("Start.",), 2, 8)]
    batched = policy.generate(reqs)
    alone = [policy.generate([r])[0] for r in reversed(reqs)][::-1]
    assert batched == alone
    other_seed = policy.generate([StepRequest("What is 2 + 3?", (), 3, 9)])[0]
    assert other_seed != batched[0]


def test_stop_string_cuts_at_first_occurrence_and_counts_tokens_exactly(tiny_policy_dir):
    # A delimiter the model never emits: the completion runs to the token limit.
    free = make(tiny_policy_dir, step_delimiter="\x07")
    req = StepRequest("What is 2 + 3?", (), 1, 5)
    full = free._sample([free.prompt(req)], [1], [req.seed], None)[0][0]
    assert full.num_tokens == MAX_NEW and not full.stopped
    text = full.text
    # Pick a two-character piece from the middle as the delimiter and sample again, same seed.
    mid = len(text) // 2
    delim = text[mid : mid + 2]
    assert delim.strip(), f"unlucky sample {text!r}"
    stopped = make(tiny_policy_dir, step_delimiter=delim)
    raw = stopped._sample([stopped.prompt(req)], [1], [req.seed], delim)[0][0]
    assert raw.stopped and not raw.eos
    assert raw.text == text[: text.find(delim)]
    k = raw.num_tokens
    assert 1 <= k <= MAX_NEW
    # k is exactly the token that completed the delimiter: k - 1 tokens do not contain it.
    shorter = make(tiny_policy_dir, step_delimiter="\x07", max_new_tokens=k)
    upto = shorter._sample([shorter.prompt(req)], [1], [req.seed], None)[0][0]
    assert delim in upto.text
    if k > 1:
        fewer = make(tiny_policy_dir, step_delimiter="\x07", max_new_tokens=k - 1)
        assert delim not in fewer._sample([fewer.prompt(req)], [1], [req.seed], None)[0][0].text
    # logprob sums the same tokens' log-probabilities.
    assert raw.logprob == pytest.approx(upto.logprob, rel=1e-4)
    # Through the Policy interface the step is the stripped text before the delimiter.
    cand = stopped.generate([req])[0][0]
    assert cand.text == text[: text.find(delim)].strip()
    assert cand.num_tokens == k


def test_a_greedy_request_ignores_its_seed(policy):
    assert policy.temperature == 0.7
    a = policy.generate([StepRequest("What is 2 + 3?", (), 2, 1, temperature=0.0)])[0]
    b = policy.generate([StepRequest("What is 2 + 3?", (), 1, 99, temperature=0.0)])[0]
    assert a[0].text == a[1].text == b[0].text
    assert a[0].num_tokens == a[1].num_tokens == b[0].num_tokens
    assert a[0].logprob == pytest.approx(b[0].logprob, rel=1e-5)
    # The same through a per-request temperature, batched beside a sampling request.
    mixed = policy.generate(
        [StepRequest("What is 2 + 3?", (), 2, 5, temperature=0.0), StepRequest("What is 2 + 3?", (), 2, 5)]
    )
    assert [c.text for c in mixed[0]] == [a[0].text] * 2
    assert mixed[1] == policy.generate([StepRequest("What is 2 + 3?", (), 2, 5)])[0]


def test_batched_requests_follow_their_own_seeds(tiny_policy_dir, policy):
    """batch_requests packs prompts of different lengths into left-padded batches; each request
    still samples the same tokens as alone (its own generator; float32 padding rounding is far
    below a sampling boundary here), with the same token counts and near-equal logprobs."""
    reqs = [
        StepRequest("What is 2 + 3?", (), 3, 7),
        StepRequest("Janet's ducks lay 16 eggs per day. How many does she sell?", ("She eats 3.",), 2, 8),
        StepRequest("What is 2 + 3?", (), 2, 5, temperature=0.0),
        StepRequest("A robe takes 2 bolts.", (), 1, 11),
    ]
    alone = [policy.generate([r])[0] for r in reqs]
    for rows in (256, 3):  # one batch; chunks of at most 3 rows (the 3-sample request alone)
        batched = make(tiny_policy_dir, batch_requests=True, max_batch_rows=rows)
        assert batched._chunks([r.n for r in reqs]) == ([[0, 1, 2, 3]] if rows == 256 else [[0], [1], [2, 3]])
        out = batched.generate(reqs)
        for got, want in zip(out, alone):
            assert [(c.text, c.num_tokens, c.finished) for c in got] == [(c.text, c.num_tokens, c.finished) for c in want]
            assert [c.logprob for c in got] == pytest.approx([c.logprob for c in want], rel=1e-4)
    assert len({c.text for c in alone[0]}) > 1 and len({c.text for c in alone[2]}) == 1


def test_attention_kernel_is_configurable(tiny_policy_dir, policy):
    eager = make(tiny_policy_dir, attn_implementation="eager")
    assert eager.model.config._attn_implementation == "eager"
    assert policy.model.config._attn_implementation != "eager"  # transformers' default otherwise
    req = StepRequest("What is 2 + 3?", (), 3, 7)
    assert [c.text for c in eager.generate([req])[0]] == [c.text for c in policy.generate([req])[0]]


def test_real_shaped_build_keeps_steps_short_and_the_extra_vocabulary_silent(tmp_path, monkeypatch):
    """A deeper, wider random-init model (a small stand-in for ``qwen2.5-0.5b``, same code path):
    the measured bias-channel gain still ends steps early, and rows past the tokenizer are never
    sampled (their ids would decode to nothing)."""
    import json

    from equiv.search import tiny

    monkeypatch.setitem(tiny.SHAPES, "mid", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=8,
                                                 num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                                 vocab_size=4096))
    path = tiny.build_tiny_policy(tmp_path / "mid", shape="mid")
    assert tiny.build_tiny_policy(tmp_path / "mid", shape="mid") == path  # cached under its own stamp
    config = json.loads((tmp_path / "mid" / "config.json").read_text())
    assert config["vocab_size"] == 4096 and config["dtype"] == "bfloat16"
    mid = make(path, max_new_tokens=48, dtype="float32")
    vocab = len(mid.tokenizer)
    assert vocab < 4096
    seen: list[int] = []
    hook = mid.model.register_forward_hook(lambda _m, _a, out: seen.extend(out.logits[:, -1].argmax(-1).tolist()))
    rows = mid.generate([StepRequest("Janet's ducks lay 16 eggs per day.", (), 4, s) for s in range(2)])
    hook.remove()
    tokens = [c.num_tokens for row in rows for c in row]
    assert sum(tokens) / len(tokens) < 30, tokens  # steps end on the separator, not the token limit
    assert all(t < vocab for t in seen)  # the most likely token is always a real one
    with pytest.raises(ValueError, match="unknown shape"):
        tiny.build_tiny_policy(tmp_path / "x", shape="qwen-9000")


def test_tiny_top_p_is_greedy(tiny_policy_dir, policy):
    nucleus = make(tiny_policy_dir, top_p=1e-6)
    sampled = nucleus.generate([StepRequest("What is 2 + 3?", (), 3, 1)])[0]
    greedy = policy.generate([StepRequest("What is 2 + 3?", (), 1, 2, temperature=0.0)])[0][0]
    assert all(c.text == greedy.text and c.num_tokens == greedy.num_tokens for c in sampled)


def test_formats_and_config_errors(tiny_policy_dir):
    mistral = FORMATS["mistral_sft"]
    prompt = mistral.build("Q?", ["Step 1: a", "Step 2: b"])
    assert prompt == "Q? Step 1: a ки\nStep 2: b ки\n"
    assert mistral.clean_step("Step 3: c ки\nStep 4") == "Step 3: c"
    assert mistral.is_final("Step 3: The answer is: 5")
    assert resolve_format("auto", "peiyi9979/mistral-7b-sft").name == "mistral_sft"
    assert resolve_format("auto", "some/base-model", None).name == "plain"
    with pytest.raises(InputError, match="prompt format"):
        resolve_format("chatml", "x")
    with pytest.raises(InputError, match="chat template"):
        FORMATS["qwen25_math_chat"].build("Q", [], None)
    with pytest.raises(InputError, match="policy.backend"):
        build_policy(PolicyConfig(backend="tgi", model=tiny_policy_dir))
    with pytest.raises(InputError, match="policy.model"):
        build_policy(PolicyConfig(backend="transformers"))
    with pytest.raises(InputError, match="top_p"):
        build_policy(PolicyConfig(backend="transformers", model=tiny_policy_dir, top_p=0))
    with pytest.raises(InputError, match="max_batch_rows"):
        build_policy(PolicyConfig(backend="transformers", model=tiny_policy_dir, max_batch_rows=0))


def test_a_checkpoints_generation_config_does_not_reshape_sampling(tiny_policy_dir, policy, tmp_path):
    """transformers fills what a generate() call leaves None from the checkpoint's
    generation_config; a repetition penalty there would change the candidates and their
    log-probabilities (the priors). Only the project's sampler may run."""
    import json
    import shutil

    from transformers.generation.utils import GenerationMixin

    shaped = tmp_path / "shaped"
    shutil.copytree(tiny_policy_dir, shaped)
    gen = json.loads((shaped / "generation_config.json").read_text()) if (shaped / "generation_config.json").exists() else {}
    gen.update(repetition_penalty=1.8, no_repeat_ngram_size=2, top_k=3, temperature=0.3, do_sample=True,
               suppress_tokens=list(range(10, 200)))  # fmt: skip
    (shaped / "generation_config.json").write_text(json.dumps(gen))
    seen: list[list[str]] = []
    original = GenerationMixin._get_logits_processor

    def spy(self, *args, **kwargs):
        processors = original(self, *args, **kwargs)
        seen.append([type(p).__name__ for p in processors])
        return processors

    reqs = [StepRequest("What is 2 + 3?", (), 4, 1), StepRequest("Janet has 16 eggs.", ("She eats 3.",), 2, 2)]
    shaped_policy = make(str(shaped))
    GenerationMixin._get_logits_processor = spy
    try:
        out = shaped_policy.generate(reqs)
    finally:
        GenerationMixin._get_logits_processor = original
    assert seen and all(names == ["_SeededSampler"] for names in seen), seen
    assert out == policy.generate(reqs)  # the same candidates and priors as without those settings
