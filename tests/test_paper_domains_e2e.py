"""HumanEval and CommonsenseQA through the real CLI and runner.

- the tiny random-init CPU models on one HumanEval problem and two CommonsenseQA questions: the
  run completes, every record is graded (wrong, since the models are random), none crashes;
- scripted engines whose steps form a correct (and a hanging) program: the runner joins the
  path, extracts the program and grades it in the sandbox;
- the ``code`` prompt format keeps the indentation of each step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.problems import Problem, load_problems
from equiv.search.cli import eval_main
from equiv.search.config import RunConfig, SearchConfig
from equiv.search.policies.prompts import resolve_format
from equiv.search.runner import Engines, run_eval
from tests.helpers.scripted import TablePolicy, TableReward, cand

CSQA = Path(__file__).parent / "data" / "commonsense_qa_synthetic.jsonl"


def tiny_args(out, policy, prm, algo="mcts"):
    return [
        "--algo", algo, "--out", str(out),
        "--policy.model", policy, "--reward.model", prm, "--policy.backend", "transformers",
        "--policy.max_new_tokens", "8", "--policy.device", "cpu", "--reward.device", "cpu",
        "--search.width", "2", "--search.max_depth", "2", "--search.num_simulations", "2",
        "--run.progress", "false", "--run.save_trees", "true",
    ]


def read(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_humaneval_one_problem_on_tiny_models(tmp_path, tiny_models):
    out = tmp_path / "he"
    args = tiny_args(out, *tiny_models) + ["--data.dataset", "humaneval", "--data.end", "1",
                                           "--policy.prompt_format", "code", "--pruner.strategy", "levenshtein"]
    assert eval_main(args) == 0
    (rec,) = read(out)
    assert rec["id"] == "HumanEval/0" and rec["error"] is None and rec["correct"] is False
    assert rec["generated_tokens"] > 0 and rec["path"]


def test_commonsense_qa_sample_on_tiny_models(tmp_path, tiny_models):
    out = tmp_path / "csqa"
    args = tiny_args(out, *tiny_models, algo="sbs") + ["--data.dataset", "commonsense_qa", "--data.path", str(CSQA),
                                                       "--data.sample", "2", "--data.sample_seed", "3"]
    assert eval_main(args) == 0
    recs = read(out)
    expected = [p.id for p in load_problems("commonsense_qa", path=CSQA, sample=2, sample_seed=3)]
    # records are appended as problems finish, which depends on what each search sampled
    assert sorted(r["id"] for r in recs) == sorted(expected) and all(r["error"] is None for r in recs)
    assert all(r["answer"] in "ABCDE" for r in recs)


def code_problem() -> Problem:
    from equiv.data.humaneval import CodeTask

    task = CodeTask(prompt="def add(a, b):\n", test="def check(f):\n    assert f(2, 3) == 5\n", entry_point="add")
    return Problem(id="add", question="Write add.", answer=task.to_answer(), kind="code")


@pytest.mark.parametrize("body, correct", [("    return a + b", True), ("    while True:\n        pass", False)])
def test_runner_grades_the_searched_program_in_the_sandbox(tmp_path, monkeypatch, body, correct):
    from functools import partial

    from equiv.search import code_grading

    # The hanging program runs into the sandbox's timeout: 1 s here rather than HumanEval's default.
    quick = code_grading.SandboxLimits(timeout_s=1.0)
    monkeypatch.setattr(code_grading, "grade_code", partial(code_grading.grade_code, limits=quick))
    first, last = "```python\ndef add(a, b):", body + "\n```"
    policy = TablePolicy({(): [cand(first)], (first,): [cand(last, finished=True)]})
    engines = Engines(policy, TableReward({}), None)
    summary = run_eval(algo="sbs", problems=[code_problem()], engines=engines, out_dir=tmp_path,
                       search=SearchConfig(width=1, beam_size=1), run=RunConfig(progress=False), pruner="none")
    (rec,) = read(tmp_path)
    assert rec["error"] is None and rec["correct"] is correct and summary["accuracy"] == float(correct)
    assert rec["prediction"].startswith("def add(a, b):\n    ")


def test_code_format_keeps_indentation_and_ends_at_the_fence():
    fmt = resolve_format("code", "any")
    assert fmt.clean_step("\n    return a + b\n\n    # more") == "    return a + b"
    assert fmt.is_final("    return x\n```") and not fmt.is_final("```python\ndef f():")
    assert fmt.build("Q", ["def f():", "    return 1"]) == "Q\n\ndef f():\n\n    return 1\n\n"
    custom = resolve_format("code", "any", step_delimiter="\n# step\n")
    assert custom.clean_step("\n    x = 1\n# step\n    y") == "    x = 1"  # still the code rules
