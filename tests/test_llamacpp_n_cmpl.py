"""The ``n`` samples of one prompt are one llama.cpp request (``n_cmpl``), seeded so that a server
ignoring ``n_cmpl`` gives the same samples one request each (equiv.search.policies.llamacpp_policy).

Against small servers on loopback that record what they are asked: one that speaks ``n_cmpl`` (a
list of results, in any order, each with its ``index``), one that ignores it (one object, the
request's own sample), and ones that answer a wrong list. The GGUF file is tokenizer-only; the
real llama.cpp server's side is checked in tests/test_backends_llamacpp.py (``-m gguf``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from equiv.search.policies.llamacpp_policy import LlamaCppServerError, completions, sample_seed
from equiv.search.types import StepRequest
from tests.helpers.gguf_files import write_gguf
from tests.helpers.hostile_http import send_json, serving

QUESTION = "Tom has 3 apples and buys 4 more. How many apples does he have?"


def result(seed: int, index: int | None = None) -> dict[str, Any]:
    """A well-formed llama.cpp result whose text names the seed it was sampled with."""
    out = {"content": f"sample of seed {seed}", "tokens_predicted": 4, "stop_type": "eos",
           "completion_probabilities": [{"logprob": -0.5}] * 3}
    return out if index is None else {**out, "index": index}


def speaks_n_cmpl(bodies: list[dict[str, Any]]):
    """llama.cpp since n_cmpl: child i of a request seeded s is seeded s + i + 1; the results come
    back as a list (here in reverse order: the client must sort by ``index``)."""
    def answer(handler, raw: bytes) -> None:
        body = json.loads(raw)
        bodies.append(body)
        n = body.get("n_cmpl", 1)
        payload = [result(body["seed"] + k, k) for k in range(n)][::-1] if "n_cmpl" in body else result(body["seed"])
        send_json(handler, payload)
    return answer


def ignores_n_cmpl(bodies: list[dict[str, Any]]):
    """An older llama-server: ``n_cmpl`` is an unknown field, one result for the request's seed."""
    def answer(handler, raw: bytes) -> None:
        body = json.loads(raw)
        bodies.append(body)
        send_json(handler, result(body["seed"]))
    return answer


@pytest.fixture()
def policy_at(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "cache"))  # the converted tokenizer
    gguf = write_gguf(tmp_path / "tok.gguf", tokenizer=True)
    made = []

    def make(url: str, **settings: Any):
        from equiv.search.policies import PolicyConfig, build_policy

        policy = build_policy(PolicyConfig(backend="llamacpp", model=str(gguf), url=url, max_new_tokens=8,
                                           prompt_format="plain", step_delimiter="\n", **settings))
        made.append(policy)
        return policy

    yield make
    for policy in made:
        policy.close()


def texts(candidates) -> list[str]:
    return [c.text for c in candidates]


def test_the_samples_of_a_prompt_are_one_request_in_index_order(policy_at):
    bodies: list[dict[str, Any]] = []
    with serving(speaks_n_cmpl(bodies)) as (url, _):
        (got,) = policy_at(url).generate([StepRequest(QUESTION, (), n=4, seed=11)])
    (body,) = bodies
    assert body["n_cmpl"] == 4 and body["seed"] == sample_seed(11, 0)
    assert texts(got) == [f"sample of seed {sample_seed(11, k)}" for k in range(4)]


def test_a_server_that_ignores_n_cmpl_gets_one_request_per_sample_and_gives_the_same_samples(policy_at):
    with serving(speaks_n_cmpl(new := [])) as (url, _):
        (expected,) = policy_at(url).generate([StepRequest(QUESTION, (), n=3, seed=5)])
    old: list[dict[str, Any]] = []
    with serving(ignores_n_cmpl(old)) as (url, _):
        policy = policy_at(url)
        (first,) = policy.generate([StepRequest(QUESTION, (), n=3, seed=5)])
        (later,) = policy.generate([StepRequest(QUESTION, ("Step one.",), n=2, seed=6)])
    assert len(new) == 1 and texts(first) == texts(expected)  # the same samples either way
    assert policy.one_request_per_sample  # the policy noticed, and keeps to it
    # the first request asked for all three; the server's one answer is sample 0, the rest one by one
    assert (old[0].get("n_cmpl"), old[0]["seed"]) == (3, sample_seed(5, 0))
    assert sorted((b.get("n_cmpl"), b["seed"]) for b in old[1:3]) == [(None, sample_seed(5, 1)), (None, sample_seed(5, 2))]
    # from then on every sample is its own request
    assert sorted(b["seed"] for b in old[3:]) == [sample_seed(6, 0), sample_seed(6, 1)]
    assert all("n_cmpl" not in b for b in old[3:])
    assert texts(later) == [f"sample of seed {sample_seed(6, k)}" for k in range(2)]


def test_one_request_per_sample_is_a_setting_that_keeps_the_samples(policy_at):
    """What the benchmark times: set by hand on a server that speaks n_cmpl, every sample is its own
    request, with the seeds the one request would have given its children."""
    bodies: list[dict[str, Any]] = []
    with serving(speaks_n_cmpl(bodies)) as (url, _):
        policy = policy_at(url)
        assert policy.one_request_per_sample is False
        policy.one_request_per_sample = True
        (got,) = policy.generate([StepRequest(QUESTION, (), n=3, seed=9)])
    assert sorted((b.get("n_cmpl"), b["seed"]) for b in bodies) == [(None, sample_seed(9, k)) for k in range(3)]
    assert texts(got) == [f"sample of seed {sample_seed(9, k)}" for k in range(3)]


def test_greedy_and_single_sample_requests_ask_for_one(policy_at):
    bodies: list[dict[str, Any]] = []
    with serving(speaks_n_cmpl(bodies)) as (url, _):
        greedy, single = policy_at(url).generate([StepRequest(QUESTION, (), n=3, seed=1, temperature=0.0),
                                                  StepRequest(QUESTION, (), n=1, seed=2)])
    assert all("n_cmpl" not in b for b in bodies) and len(bodies) == 2
    assert len(greedy) == 3 and len(set(texts(greedy))) == 1 and len(single) == 1


@pytest.mark.parametrize("answer", [
    [result(1, 0), result(2, 0)],  # an index twice
    [result(1, 0)],  # too few
    [result(1, 0), result(2, 1), result(3, 2)],  # too many
    [result(1, 0), result(2)],  # no index
    [result(1, 0), {"index": 1}],  # a result outside the schema
    "two samples",
])
def test_a_wrong_list_is_an_error_naming_the_server(answer):
    with pytest.raises(LlamaCppServerError, match=r"llama.cpp server at http://server:1 answered"):
        completions(answer, "http://server:1", 8, 2)


def test_sample_seeds_follow_llama_cpp_children_and_never_ask_for_a_random_seed():
    for seed in (0, 1, 12345, 2**40 + 7):
        base = sample_seed(seed, 0)
        assert [sample_seed(seed, k) for k in range(10)] == [base + k for k in range(10)]
        assert 0 <= base < 2**31 - 1 and sample_seed(seed, 9) != 0xFFFFFFFF


def test_more_samples_than_slots_go_as_several_requests_with_the_same_seeds(policy_at):
    """llama.cpp refuses n_cmpl above its slots (HTTP 400 "Value must be between 1 <= value <= 2"):
    5 samples on 2 slots are requests of 2, 2 and 1, seeded where the one request would have."""
    bodies: list[dict[str, Any]] = []
    with serving(speaks_n_cmpl(bodies)) as (url, _):
        (got,) = policy_at(url, parallel=2).generate([StepRequest(QUESTION, (), n=5, seed=3)])
    assert sorted((b["seed"], b.get("n_cmpl")) for b in bodies) == [
        (sample_seed(3, 0), 2), (sample_seed(3, 2), 2), (sample_seed(3, 4), None)]
    assert texts(got) == [f"sample of seed {sample_seed(3, k)}" for k in range(5)]


def test_a_server_that_ignores_n_cmpl_keeps_the_samples_in_order_past_the_slots(policy_at):
    bodies: list[dict[str, Any]] = []
    with serving(ignores_n_cmpl(bodies)) as (url, _):
        (got,) = policy_at(url, parallel=2).generate([StepRequest(QUESTION, (), n=5, seed=3)])
    assert sorted(b["seed"] for b in bodies) == [sample_seed(3, k) for k in range(5)]
    assert texts(got) == [f"sample of seed {sample_seed(3, k)}" for k in range(5)]
