"""Runner tests with scripted engines: batching invariance, errors, resume, summary, trees."""

from __future__ import annotations

import asyncio
import json
import operator

import pytest

from equiv.errors import InputError
from equiv.search.algorithms import ALGORITHMS
from equiv.search.config import RunConfig, SearchConfig
from equiv.search.runner import Engines, Grader, run_eval
from tests.helpers.scripted import KeyedReward, RestateJudge, SeededPolicy, problems, simple_extract, simple_grade

GRADER = Grader(simple_extract, simple_grade)
TIMING = {"seconds", "tree"}


def engines(**policy_kw):
    return Engines(SeededPolicy(**policy_kw), KeyedReward(), RestateJudge())


def evaluate(out, algo="sbs", n=6, concurrency=1, fail=(), eng=None, seeds=(0,), **run_kw):
    return run_eval(
        algo=algo,
        problems=problems(n, fail=fail),
        engines=eng or engines(),
        out_dir=out,
        search=SearchConfig(width=4, num_simulations=4),
        run=RunConfig(concurrency=concurrency, progress=False, seeds=list(seeds), **run_kw),
        pruner="restate",
        grader=GRADER,
    )


def records(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def comparable(out):
    return {(r["id"], r["seed"]): {k: v for k, v in r.items() if k not in TIMING} for r in records(out)}


# One problem at a time, the largest generate batch is at most its beams (lookahead: its rollouts,
# beams x width). With problems in flight it grows for SBS and lookahead; for MCTS and DFS it need
# not grow, only never shrinks (their calls still merge across problems: fewer of them).
CONCURRENCY_CASES = {  # per algorithm: the largest generate batch alone, and how K = 4 compares
    "mcts": (3, operator.ge), "sbs": (3, operator.gt), "dfs": (3, operator.ge), "lookahead": (3 * 4, operator.gt),
}


@pytest.mark.parametrize("algo", ALGORITHMS.names())
def test_concurrency_does_not_change_results_but_batches_across_problems(tmp_path, algo):
    largest_alone, largest_generate = CONCURRENCY_CASES[algo]
    one = evaluate(tmp_path / "c1", algo, concurrency=1)
    four = evaluate(tmp_path / "c4", algo, concurrency=4)
    assert comparable(tmp_path / "c1") == comparable(tmp_path / "c4")
    assert one["largest_batch"]["generate"] <= largest_alone
    assert largest_generate(four["largest_batch"]["generate"], one["largest_batch"]["generate"])
    assert four["engine_calls"]["generate"] < one["engine_calls"]["generate"]
    assert four["accuracy"] == one["accuracy"] and four["mean_generated_tokens"] == one["mean_generated_tokens"]


def test_record_and_summary_keys(tmp_path):
    summary = evaluate(tmp_path, save_trees=True)
    recs = records(tmp_path)
    assert len(recs) == 6
    for key in ("id", "question", "answer", "prediction", "correct", "generated_tokens", "prm_calls",
                "judge_calls", "expanded", "pruned", "seconds", "path", "error", "algo", "seed", "pruner"):
        assert key in recs[0]
    for key in ("accuracy", "mean_generated_tokens", "problems", "errors", "pruned_per_expansion", "algo",
                "pruner", "mean_prm_calls", "mean_judge_calls", "seconds"):
        assert key in summary
    assert summary == json.loads((tmp_path / "summary.json").read_text())
    assert summary["problems"] == 6 and summary["complete"] is True
    assert summary["accuracy"] == pytest.approx(sum(r["correct"] for r in recs) / 6)
    assert summary["mean_generated_tokens"] == pytest.approx(sum(r["generated_tokens"] for r in recs) / 6)
    assert summary["pruned_per_expansion"] == pytest.approx(
        sum(r["pruned"] for r in recs) / sum(r["expanded"] for r in recs))
    tree = json.loads((tmp_path / recs[0]["tree"]).read_text())
    assert {"id", "question", "answer", "prediction", "correct", "algo", "nodes"} <= set(tree)
    on_path = [n["text"] for n in tree["nodes"] if n["on_path"] and n["parent"] is not None]
    assert on_path == recs[0]["path"]
    merged = [n for n in tree["nodes"] if n["merged_into"] is not None]
    assert merged and all(n["judge_prob"] is not None for n in merged)


def test_policy_error_on_one_problem_is_recorded_and_the_run_goes_on(tmp_path):
    summary = evaluate(tmp_path, concurrency=3, fail=(2,))
    recs = {r["id"]: r for r in records(tmp_path)}
    assert len(recs) == 6
    assert recs["p2"]["error"] == "RuntimeError: scripted policy failure"
    assert recs["p2"]["correct"] is False
    assert all(r["error"] is None for i, r in recs.items() if i != "p2")
    assert summary["errors"] == 1
    # the others are unaffected by sharing batches with the failing problem
    clean = tmp_path / "clean"
    evaluate(clean, concurrency=1, fail=())
    ok = comparable(clean)
    for key, rec in comparable(tmp_path).items():
        if key[0] != "p2":
            assert rec == ok[key]


class _RecordingTasks(asyncio.DefaultEventLoopPolicy):
    """An event loop policy whose loops keep every task they create, so a test can retrieve the
    interrupted tasks' exceptions without scanning the heap (``gc.get_objects()`` after a
    ``gc.collect()`` took 1-3 s in a suite worker holding torch and transformers)."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[asyncio.Task] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()

        def factory(loop: asyncio.AbstractEventLoop, coro, **kwargs) -> asyncio.Task:
            task = asyncio.Task(coro, loop=loop, **kwargs)
            self.tasks.append(task)
            return task

        loop.set_task_factory(factory)
        return loop


def _retrieve_the_interrupted_tasks(tasks: list[asyncio.Task]) -> None:
    """A KeyboardInterrupt raised inside ``asyncio.run`` stays on its tasks, unretrieved. When a
    task is freed, its finaliser logs "Task exception was never retrieved", and formatting that
    traceback parses source with ``ast`` (Python 3.11's error carets). When that happened inside
    another test's ``ast.parse`` (pydantic reading a class during ``import wandb``), the nested
    parse reset CPython 3.11's shared AST recursion counter under the outer one: ``SystemError:
    AST constructor recursion depth mismatch`` (cpython#106905; once in CI's default suite,
    2026-11-28). Retrieving the exceptions here (every task the run's loop created, recorded by
    :class:`_RecordingTasks`) leaves the finalisers nothing to log."""
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()


def test_resume_after_interrupt_loses_and_duplicates_nothing(tmp_path):
    full = tmp_path / "full"
    evaluate(full, concurrency=2)
    out = tmp_path / "run"
    policy = _RecordingTasks()
    asyncio.set_event_loop_policy(policy)
    try:
        with pytest.raises(KeyboardInterrupt):
            evaluate(out, concurrency=2, eng=engines(interrupt_after=5))
    finally:
        asyncio.set_event_loop_policy(None)
        _retrieve_the_interrupted_tasks(policy.tasks)
    assert policy.tasks  # the run's loop was this policy's: its tasks were retrieved
    partial = records(out)
    assert 0 < len(partial) < 6
    summary = evaluate(out, concurrency=2)
    recs = records(out)
    assert len(recs) == 6 and len({r["id"] for r in recs}) == 6
    assert comparable(out) == comparable(full)
    assert summary["complete"] is True
    # a third run has nothing to do and changes nothing
    policy = SeededPolicy()
    evaluate(out, eng=Engines(policy, KeyedReward(), RestateJudge()))
    assert policy.calls == 0 and len(records(out)) == 6


def test_errors_are_retried_on_rerun_unless_disabled(tmp_path):
    evaluate(tmp_path, fail=(1,))
    evaluate(tmp_path, fail=(1,), retry_errors=False)
    assert len(records(tmp_path)) == 6
    # the failure is fixed: the rerun replaces the error record instead of duplicating it
    summary = evaluate(tmp_path, fail=())
    recs = records(tmp_path)
    assert len(recs) == 6 and summary["errors"] == 0
    assert [r["id"] for r in recs if r["error"]] == []


def test_torn_last_line_is_dropped_and_rerun(tmp_path):
    evaluate(tmp_path)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    (tmp_path / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])
    evaluate(tmp_path)
    assert len(records(tmp_path)) == 6


def test_torn_last_line_inside_a_multibyte_character_is_dropped_and_rerun(tmp_path):
    from equiv.rundir import load_records

    evaluate(tmp_path)
    lines = (tmp_path / "results.jsonl").read_bytes().splitlines()
    last = json.loads(lines[-1])
    last["question"] = "Ünïcode " + last["question"]
    data = json.dumps(last, ensure_ascii=False).encode("utf-8")
    torn = data[: data.index("Ü".encode("utf-8")) + 1]  # the write died between the two bytes of Ü
    (tmp_path / "results.jsonl").write_bytes(b"\n".join(lines[:-1]) + b"\n" + torn)
    assert len(load_records(tmp_path)) == 5  # compare and report read past the tear
    evaluate(tmp_path)
    assert len(records(tmp_path)) == 6 and len({r["id"] for r in records(tmp_path)}) == 6


def test_a_bad_byte_in_the_middle_names_line_and_offset(tmp_path):
    evaluate(tmp_path, n=3)
    lines = (tmp_path / "results.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"question": "', b'"question": "\xff', 1)
    (tmp_path / "results.jsonl").write_bytes(b"".join(lines))
    offset = len(lines[0]) + lines[1].index(b"\xff")
    with pytest.raises(InputError, match=rf"results.jsonl:2: not UTF-8 \(byte offset {offset} in the file\)"):
        evaluate(tmp_path, n=3)


def test_malformed_line_in_the_middle_is_an_input_error(tmp_path):
    evaluate(tmp_path, n=3)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    lines[1] = "{not json"
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"results.jsonl:2: malformed JSON"):
        evaluate(tmp_path, n=3)


def test_refuses_to_mix_algorithms_in_one_directory(tmp_path):
    evaluate(tmp_path, n=2)
    with pytest.raises(InputError, match="holds results of algo 'sbs'"):
        evaluate(tmp_path, algo="dfs", n=2)


def test_seeds_are_separate_records_and_change_the_search(tmp_path):
    summary = evaluate(tmp_path, n=3, seeds=(0, 1))
    recs = records(tmp_path)
    assert sorted((r["id"], r["seed"]) for r in recs) == [(f"p{i}", s) for i in range(3) for s in (0, 1)]
    assert set(summary["per_seed"]) == {"0", "1"}
    by = {(r["id"], r["seed"]): r for r in recs}
    assert any(by[(f"p{i}", 0)]["path"] != by[(f"p{i}", 1)]["path"] for i in range(3))


def test_duplicate_problem_ids_are_rejected(tmp_path):
    from tests.helpers.scripted import Problem

    probs = [Problem("x", "q1", "1"), Problem("x", "q2", "2")]
    with pytest.raises(InputError, match="occurs more than once"):
        run_eval(algo="sbs", problems=probs, engines=engines(), out_dir=tmp_path,
                 run=RunConfig(progress=False), grader=GRADER)


def test_unknown_algorithm(tmp_path):
    with pytest.raises(InputError, match="unknown algorithm 'bfs'"):
        run_eval(algo="bfs", problems=problems(1), engines=engines(), out_dir=tmp_path, grader=GRADER)


class TemperatureLog(SeededPolicy):
    """Records the request temperatures of each batched call."""

    def __init__(self):
        super().__init__()
        self.log = []

    def generate(self, requests):
        self.log.append(sorted({r.temperature for r in requests}, key=str))
        return super().generate(requests)


def test_greedy_rollouts_and_sampled_expansions_share_batches(tmp_path):
    policy = TemperatureLog()
    eng = Engines(policy, KeyedReward(), RestateJudge())
    from tests.helpers.scripted import Problem

    # a deeper problem and more problems than workers: problems fall out of lockstep
    probs = [Problem("deep", "question DEEP", "3"), *problems(4)]
    run_eval(algo="lookahead", problems=probs, engines=eng, out_dir=tmp_path, search=SearchConfig(width=4),
             run=RunConfig(concurrency=2, progress=False), grader=GRADER)
    temps = {t for call in policy.log for t in call}
    assert temps == {None, 0.0}  # expansions use the policy's temperature, rollouts ask for 0.0
    assert any(len(call) == 2 for call in policy.log)  # one call carried both kinds


def test_wandb_offline_logging(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    evaluate(tmp_path, n=2, wandb_project="equiv-test")
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert any(p.suffix == ".wandb" for p in runs[0].iterdir())


def test_tree_file_names_are_safe_and_distinct():
    from equiv.rundir import safe_name

    assert safe_name("p0") == "p0"
    a, b = safe_name("test/precalculus/807.json"), safe_name("test_precalculus_807.json")
    assert "/" not in a and a != b and a.startswith("test_precalculus_807.json-")
    assert safe_name("..") != "" and "/" not in safe_name("../../etc")
