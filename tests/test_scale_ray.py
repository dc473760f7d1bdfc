"""Multi-worker search on a local Ray instance (CPU): same records as one process, resumable.

Workers run the scripted engines of tests/helpers/scripted.py (outputs depend only on each request's
content and seed), so any difference between one process and two workers would be a bug in
sharding, merging or resume -- not noise.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from equiv.rundir import shard_paths
from equiv.search.config import RunConfig, ScaleConfig, SearchConfig
from equiv.search.distributed import ray_runtime_env, run_distributed
from equiv.search.runner import Engines, Grader, run_eval
from tests.helpers.scripted import KeyedReward, RestateJudge, SeededPolicy, problems, simple_extract, simple_grade

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'equiv[ray]')")

pytestmark = pytest.mark.ray

GRADER = Grader(simple_extract, simple_grade)
SEARCH = SearchConfig(width=4, num_simulations=4)
TIMING = {"seconds"}


class CrashingPolicy(SeededPolicy):
    """Kills its own process (as an OOM killer or a lost node would) on one question."""

    def __init__(self, crash_on: str) -> None:
        super().__init__()
        self.crash_on = crash_on

    def generate(self, requests):
        if any(r.question == self.crash_on for r in requests):
            os._exit(17)
        return super().generate(requests)


def scripted_engines(placement, crash_on: str | None = None) -> Engines:
    """Engine factory shipped to the workers (module level, so Ray can pickle it by reference)."""
    policy = CrashingPolicy(crash_on) if crash_on else SeededPolicy()
    return Engines(policy, KeyedReward(), RestateJudge())


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, runtime_env=ray_runtime_env(), log_to_driver=False)
    yield
    ray.shutdown()


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def comparable(out: Path) -> dict:
    return {(r["id"], r["seed"]): {k: v for k, v in r.items() if k not in TIMING} for r in records(out)}


def distributed(out: Path, n: int, factory=scripted_engines, seeds=(0, 1), concurrency=2, **run_kw) -> dict:
    return run_distributed(
        algo="sbs",
        problems=problems(n),
        engine_factory=factory,
        out_dir=out,
        scale=ScaleConfig(workers=2),
        search=SEARCH,
        run=RunConfig(concurrency=concurrency, progress=False, seeds=list(seeds), **run_kw),
        pruner="restate",
        grader=GRADER,
    )


def test_two_workers_match_one_process(tmp_path: Path, local_ray):
    single = run_eval(
        algo="sbs",
        problems=problems(6),
        engines=scripted_engines(None),
        out_dir=tmp_path / "one",
        search=SEARCH,
        run=RunConfig(concurrency=2, progress=False, seeds=[0, 1], save_trees=True),
        pruner="restate",
        grader=GRADER,
    )
    summary = distributed(tmp_path / "two", 6, save_trees=True)

    assert comparable(tmp_path / "two") == comparable(tmp_path / "one")
    # merged in problem order (then seed), shards folded in and removed
    assert [(r["id"], r["seed"]) for r in records(tmp_path / "two")] == [
        (f"p{i}", s) for i in range(6) for s in (0, 1)
    ]
    assert shard_paths(tmp_path / "two") == [] and not (tmp_path / "two" / "workers").exists()
    for r in records(tmp_path / "two"):  # tree paths stay valid after the merge
        assert json.loads((tmp_path / "two" / r["tree"]).read_text())["id"] == r["id"]
    on_disk = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert on_disk == summary and summary["complete"] and summary["workers"] == 2
    for key in ("problems", "accuracy", "mean_generated_tokens", "mean_prm_calls", "pruned_per_expansion"):
        assert summary[key] == single[key], key
    # both workers did engine work: the calls add up to at least one per problem and seed
    assert summary["engine_calls"]["generate"] >= 1


def test_killed_worker_run_resumes_without_rerunning_finished_problems(tmp_path: Path, local_ray):
    reference = tmp_path / "reference"
    distributed(reference, 8, seeds=(0,))

    out = tmp_path / "killed"
    crash = functools.partial(scripted_engines, crash_on="question 5")  # worker 1 holds p1, p3, p5, p7
    with pytest.raises(ray.exceptions.RayActorError):
        distributed(out, 8, factory=crash, seeds=(0,), concurrency=1)
    before = {r["id"]: r for r in records(out)}
    assert {"p1", "p3"} <= before.keys() and "p5" not in before  # finished work was kept, not lost
    assert not (out / "workers").exists()

    resumed = distributed(out, 8, seeds=(0,))
    assert comparable(out) == comparable(reference)
    assert resumed["complete"] and resumed["problems"] == 8
    # the resumed run only did the unfinished problems: a finished problem's record is the very
    # one written before the crash (its `seconds` would differ had it run again). Engine calls
    # are batched across problems and the leftovers are dealt to workers anew, so their count is
    # no measure of the work skipped.
    after = {r["id"]: r for r in records(out)}
    assert all(after[pid] == record for pid, record in before.items())
    assert resumed["engine_calls"]["generate"] >= 1
    # and a third run has nothing left to do
    again = distributed(out, 8, seeds=(0,))
    assert again["engine_calls"] == {} and comparable(out) == comparable(reference)


def test_resume_from_partial_seeds_and_leftover_shards(tmp_path: Path, local_ray):
    """A driver killed mid-run leaves results.jsonl plus shard files (one with a torn line)."""
    reference = tmp_path / "reference"
    distributed(reference, 5, save_trees=True)
    ref = {(r["id"], r["seed"]): r for r in records(reference)}

    out = tmp_path / "resumed"
    (out / "workers" / "1").mkdir(parents=True)
    (out / "results.jsonl").write_text(
        json.dumps(ref[("p0", 0)]) + "\n" + json.dumps(ref[("p0", 1)]) + "\n" + json.dumps(ref[("p2", 1)]) + "\n"
    )
    (out / "workers" / "1" / "results.jsonl").write_text(json.dumps(ref[("p3", 0)]) + '\n{"id": "p3", "se')
    summary = distributed(out, 5, save_trees=True)

    assert {k: {f: v for f, v in r.items() if f not in TIMING | {"tree"}} for k, r in ref.items()} == {
        k: {f: v for f, v in r.items() if f not in TIMING | {"tree"}} for k, r in comparable(out).items()
    }
    # trees of the newly run pairs carry the same per-seed names as a fresh multi-seed run
    for r in records(out):
        if (r["id"], r["seed"]) not in {("p0", 0), ("p0", 1), ("p2", 1), ("p3", 0)}:
            assert r["tree"] == ref[(r["id"], r["seed"])]["tree"]
            assert (out / r["tree"]).exists()
    assert summary["complete"] and summary["problems"] == 10
