"""The ``likelihood`` reward: the policy's own mean token log-probability, read from what
the policy generated (no extra forward pass), a teacher-forced fallback, and a real-CLI MCTS run
with a tiny real-architecture policy, the few-shot format and merged / kept-apart pair files."""

from __future__ import annotations

import json
import math

import pytest
import torch

from equiv.errors import InputError
from equiv.judge.decide import Verdict
from equiv.search.pairlog import NEAR_MARGIN, PAIRS_FILE, notable_pairs
from equiv.search.policies import PolicyConfig, build_policy
from equiv.search.rewards import RewardConfig, bind_policy_reward, build_reward_model
from equiv.search.rewards.likelihood import LikelihoodReward, LogprobLedger, teacher_forced_logprob
from equiv.search.types import ScoreRequest, StepRequest


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    from equiv.search.tiny import build_tiny_policy

    path = build_tiny_policy(tmp_path_factory.mktemp("tiny") / "policy")
    return build_policy(PolicyConfig(backend="transformers", model=path, device="cpu", prompt_format="plain",
                                     max_new_tokens=12, temperature=0.7))


def test_path_and_step_means_from_the_ledger():
    ledger = LogprobLedger()
    ledger.record("q", ("a",), -2.0, 4)
    ledger.record("q", ("a", "b"), -6.0, 2)
    ledger.record("q", ("a", "b"), -99.0, 9)  # an exact duplicate keeps the first sample's numbers
    path = LikelihoodReward(ledger).score([ScoreRequest("q", ("a", "b")), ScoreRequest("q", ())])
    assert path[0] == pytest.approx([math.exp(-0.5), math.exp(-8.0 / 6)]) and path[1] == []
    step = LikelihoodReward(ledger, scope="step", transform="logprob").score([ScoreRequest("q", ("a", "b"))])
    assert step == [pytest.approx([-0.5, -3.0])]


def test_bad_options_name_the_field():
    with pytest.raises(InputError, match="reward.options.scope"):
        LikelihoodReward(LogprobLedger(), scope="tree")
    with pytest.raises(InputError, match="reward.options"):
        bind_policy_reward(object(), RewardConfig(kind="likelihood", options={"temperature": 1}))
    with pytest.raises(InputError, match="reward.kind"):
        build_reward_model(RewardConfig(kind="likelihood", model=""))


def test_generated_steps_are_scored_without_a_forward_pass(tiny_policy):
    policy, reward = bind_policy_reward(tiny_policy, RewardConfig(kind="likelihood", model=""))
    request = StepRequest("What is 2 + 3?", ("First add.",), n=3, seed=7)
    candidates = policy.generate([request])[0]
    requests = [ScoreRequest(request.question, (*request.steps, c.text)) for c in candidates]
    # The parent step was not generated here: the fallback scores it once, then it is cached.
    scores = reward.score(requests)
    assert reward.forward_passes == 1
    for cand, per_step in zip(candidates, scores):
        first_lp, first_n = reward.ledger.get(request.question, request.steps)
        mean = (first_lp + cand.logprob) / (first_n + cand.num_tokens)
        assert per_step[-1] == pytest.approx(math.exp(mean), rel=1e-6)
        assert 0.0 < per_step[-1] <= 1.0
    reward.score(requests)
    assert reward.forward_passes == 1  # everything now comes from the ledger


def test_teacher_forced_logprob_matches_token_by_token(tiny_policy):
    question, steps = "Janet has 3 ducks.", ("She buys 2 more.", "3 + 2 = 5 ducks.")
    total, count = teacher_forced_logprob(tiny_policy, question, steps)
    prompt = tiny_policy.prompt(StepRequest(question, steps[:-1], n=1, seed=0))
    tok, model = tiny_policy.tokenizer, tiny_policy.model
    prompt_ids = tok(prompt)["input_ids"]
    ids = tok(prompt + steps[-1] + tiny_policy.fmt.step_delimiter)["input_ids"]
    expected = 0.0
    with torch.no_grad():
        for pos in range(len(prompt_ids), len(ids)):  # one next-token distribution at a time
            logits = model(input_ids=torch.tensor([ids[:pos]])).logits[0, -1]
            expected += float(torch.log_softmax(logits.float(), -1)[ids[pos]])
    assert count == len(ids) - len(prompt_ids) > 0
    assert total == pytest.approx(expected, abs=1e-3)


def test_notable_pairs_keeps_merges_and_close_calls():
    from types import SimpleNamespace

    family = [SimpleNamespace(id=10 + i, depth=2, text=f"s{i}") for i in range(4)]
    def verdict(prob, reason):
        return Verdict(prob, reason == "threshold", reason)

    verdicts = {(0, 1): verdict(0.9, "threshold"), (0, 2): verdict(0.45, "below_threshold"),
                (0, 3): verdict(0.1, "below_threshold"), (1, 2): verdict(0.2, "below_threshold"),
                (1, 3): verdict(0.95, "guard:different_numbers"), (2, 3): verdict(0.5 - NEAR_MARGIN, "below_threshold")}
    pairs = notable_pairs(family, verdicts, [0, 0, 2, 3], 0.5)
    kinds = {(p["a"], p["b"]): p["kind"] for p in pairs}
    # merges, close calls, and a merge the guard refused (whatever the probability)
    assert kinds == {("s0", "s1"): "merged", ("s0", "s2"): "kept_apart", ("s2", "s3"): "kept_apart",
                     ("s1", "s3"): "kept_apart"}
    reasons = {(p["a"], p["b"]): p["reason"] for p in pairs}
    assert reasons[("s1", "s3")] == "guard:different_numbers" and reasons[("s0", "s1")] == "threshold"
    assert all(p["threshold"] == 0.5 and p["depth"] == 2 for p in pairs)


def test_mcts_with_likelihood_fewshot_and_pair_files_through_the_cli(tmp_path):
    from equiv.search.cli import build_engines, eval_main

    rows = [{"question": f"Tom has {i} apples and buys 2 more. How many now?",
             "answer": f"He has {i} + 2 = <<{i}+2={i + 2}>>{i + 2} apples.\n#### {i + 2}"} for i in range(8)]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    test = tmp_path / "test.jsonl"
    test.write_text("".join(json.dumps(r) + "\n" for r in rows[6:]))
    built = []

    def factory(init):
        engines = build_engines(init)
        built.append(engines)
        return engines

    out = tmp_path / "run"
    rc = eval_main([
        "--algo", "mcts", "--out", str(out), "--data.dataset", "gsm8k", "--data.path", str(test),
        "--policy.backend", "transformers", "--policy.model", "tiny:" + str(tmp_path / "tiny"), "--policy.device", "cpu",
        "--policy.prompt_format", "fewshot", "--policy.fewshot_path", str(train), "--policy.fewshot_count", "2",
        "--policy.max_new_tokens", "24", "--reward.kind", "likelihood", "--reward.model", "",
        "--pruner.strategy", "embedding", "--pruner.threshold", "0.25", "--pruner.device", "cpu",
        "--search.width", "4", "--search.max_depth", "3", "--search.num_simulations", "2",
        "--run.progress", "false", "--run.save_trees", "true",
    ], engine_factory=factory)
    assert rc == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 and not any(r["error"] for r in records)
    assert all(r["prm_calls"] > 0 and r["generated_tokens"] > 0 for r in records)
    assert built[0].reward.forward_passes == 0  # every scored step was generated by the policy
    pairs = [json.loads(line) for line in (out / PAIRS_FILE).read_text().splitlines()]
    merged = sum(r["pruned"] for r in records)
    assert merged > 0 and sum(p["kind"] == "merged" for p in pairs) >= merged
    ids = {r["id"] for r in records}
    for p in pairs:
        assert p["id"] in ids and p["seed"] == 0 and p["a"] != p["b"]  # exact duplicates never reach the judge
        if p["kind"] == "kept_apart":
            if p["reason"] == "below_threshold":  # a close call
                assert 0.25 - NEAR_MARGIN <= p["probability"] < 0.25
            else:  # above the threshold, but greedy grouping put the two in different classes
                assert p["reason"] == "threshold" and p["probability"] >= 0.25
        else:
            assert p["reason"] in ("threshold", "below_threshold")  # merged directly, or through a third sibling
    # The report links the pair file with its counts.
    from equiv.report.cli import report_main

    assert report_main([str(out), "--out", str(tmp_path / "report")]) == 0
    page = next((tmp_path / "report").glob("*.html")).read_text()
    n_merged = sum(p["kind"] == "merged" for p in pairs)
    assert f"{PAIRS_FILE}</a>: {n_merged} merged pair(s) (" in page
    assert '"reasons":{"' in page  # the tree viewer shows why each merged node merged
