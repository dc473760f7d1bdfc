"""Shard merge and resume bookkeeping (equiv.rundir) and placement plans (equiv.search.placement);
no Ray needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.rundir import finished_keys, merge_records, merge_run_dir, shard_path, shard_paths
from equiv.rundir import read_records as read_records_and_torn
from equiv.search.config import ScaleConfig
from equiv.search.placement import assign_round_robin, plan_placement


def read_records(path: Path) -> list[dict]:
    return read_records_and_torn(path)[0]


def rec(pid: str, seed: int = 0, error: str | None = None, **extra) -> dict:
    return {"id": pid, "seed": seed, "error": error, "correct": error is None, **extra}


def write(path: Path, records: list[dict], *, tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")


def test_round_robin_covers_every_item_once():
    items = list(range(11))
    shards = assign_round_robin(items, 3)
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    assert sorted(x for s in shards for x in s) == items
    assert assign_round_robin(items[:1], 4) == [[0], [], [], []]
    with pytest.raises(InputError):
        assign_round_robin(items, 0)


def test_shard_paths_sorted_numerically(tmp_path: Path):
    for k in (10, 2, 0):
        write(shard_path(tmp_path, k), [])
    write(tmp_path / "workers" / "x" / "results.jsonl", [])  # not a worker index
    (tmp_path / "workers" / "3").mkdir()  # a worker that wrote nothing
    assert [p.relative_to(tmp_path).as_posix() for p in shard_paths(tmp_path)] == [
        "workers/0/results.jsonl",
        "workers/2/results.jsonl",
        "workers/10/results.jsonl",
    ]
    assert shard_paths(tmp_path / "missing") == []


def test_merge_sorts_by_problem_order_and_dedupes():
    order = [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
    old = [rec("c", error="killed"), rec("a", 1)]
    shard0 = [rec("a", 0), rec("c", 0, note="retried")]
    shard1 = [rec("b"), rec("a", 1)]  # an identical copy (a crash during an earlier merge)
    merged = merge_records([old, shard0, shard1], order)
    assert [(r["id"], r["seed"]) for r in merged] == order
    # a later result supersedes an earlier error
    assert merged[3].get("note") == "retried"


def test_merge_refuses_two_different_results_for_one_key():
    with pytest.raises(InputError, match="two different results for id 'c' seed 0"):
        merge_records([[rec("c")], [rec("c", note="other")]], [("c", 0)])


def test_merge_never_replaces_success_with_error_but_retry_replaces_error():
    merged = merge_records([[rec("a"), rec("b", error="boom")], [rec("a", error="late"), rec("b")]], [("a", 0), ("b", 0)])
    assert merged[0]["error"] is None
    assert merged[1]["error"] is None


def test_merge_keeps_records_outside_the_order():
    merged = merge_records([[rec("z"), rec("a"), rec("y")]], [("a", 0)])
    assert [r["id"] for r in merged] == ["a", "z", "y"]


def test_read_records_drops_only_a_torn_last_line(tmp_path: Path):
    path = tmp_path / "results.jsonl"
    write(path, [rec("a"), rec("b")], tail='{"id": "c", "se')
    assert [r["id"] for r in read_records(path)] == ["a", "b"]

    path.write_text(json.dumps(rec("a")) + "\n{broken\n" + json.dumps(rec("b")) + "\n")
    with pytest.raises(InputError, match=r"results.jsonl:2"):
        read_records(path)

    path.write_text('{"seed": 0}\n')
    with pytest.raises(InputError, match="id"):
        read_records(path)

    path.write_text("[1, 2]\n")
    with pytest.raises(InputError, match="JSON object"):
        read_records(path)


def test_finished_keys_reads_results_and_shards(tmp_path: Path):
    write(tmp_path / "results.jsonl", [rec("a"), rec("b", error="boom")])
    write(shard_path(tmp_path, 0), [rec("c")], tail='{"id": "d"')  # worker killed mid-write
    write(shard_path(tmp_path, 1), [rec("e", error="oom")])
    assert finished_keys(tmp_path, retry_errors=True) == {("a", 0), ("c", 0)}
    assert finished_keys(tmp_path, retry_errors=False) == {("a", 0), ("b", 0), ("c", 0), ("e", 0)}


def test_merge_run_dir_writes_results_and_removes_shards(tmp_path: Path):
    write(tmp_path / "results.jsonl", [rec("b")])
    write(shard_path(tmp_path, 0), [rec("a")])
    write(shard_path(tmp_path, 1), [rec("c", tree="trees/c.json")], tail='{"id"')
    (tmp_path / "workers" / "1" / "trees").mkdir()
    (tmp_path / "workers" / "1" / "trees" / "c.json").write_text('{"id": "c"}')
    order = [("a", 0), ("b", 0), ("c", 0), ("d", 0)]
    merged = merge_run_dir(tmp_path, order)
    assert [r["id"] for r in merged] == ["a", "b", "c"]
    assert shard_paths(tmp_path) == [] and not (tmp_path / "workers").exists()
    assert (tmp_path / merged[2]["tree"]).read_text() == '{"id": "c"}' 
    assert [r["id"] for r in read_records(tmp_path / "results.jsonl")] == ["a", "b", "c"]
    assert not (tmp_path / "results.jsonl.tmp").exists()
    # merging again is a no-op
    assert merge_run_dir(tmp_path, order) == merged


def test_scale_config_validation_and_placement():
    ScaleConfig().validate()
    assert not ScaleConfig().distributed
    assert ScaleConfig(workers=2).distributed
    assert ScaleConfig(ray_address="auto").distributed
    with pytest.raises(InputError, match="workers"):
        ScaleConfig(workers=0).validate()
    with pytest.raises(InputError, match="0.95"):
        ScaleConfig(policy_gpu_memory_utilization=0.8, prm_gpu_memory_fraction=0.2).validate()

    cpu = plan_placement(ScaleConfig(workers=2), gpus_available=0)
    assert cpu.num_gpus == 0 and cpu.num_cpus == 1.0

    gpu = plan_placement(ScaleConfig(workers=4), gpus_available=8, tensor_parallel_size=2)
    assert gpu.num_gpus == 2 and gpu.tensor_parallel_size == 2
    assert gpu.policy_gpu_memory_utilization == 0.6
    with pytest.raises(InputError, match="need 10 GPUs"):
        plan_placement(ScaleConfig(workers=5), gpus_available=8, tensor_parallel_size=2)
    with pytest.raises(InputError, match="tensor_parallel_size"):
        plan_placement(ScaleConfig(workers=1, gpus_per_worker=1), gpus_available=8, tensor_parallel_size=2)


def test_placed_engines_applies_the_gpu_split_only_on_gpu_workers():
    from types import SimpleNamespace

    from equiv.search.placement import placed_engines

    def init(backend="vllm"):
        return SimpleNamespace(policy=SimpleNamespace(backend=backend, gpu_memory_utilization=0.9, tensor_parallel_size=1,
                                                      engine_kwargs={}))

    cpu = plan_placement(ScaleConfig(workers=2), gpus_available=0)
    assert placed_engines(lambda i: i, init(), cpu).policy.gpu_memory_utilization == 0.9
    gpu = plan_placement(ScaleConfig(workers=2, policy_gpu_memory_utilization=0.5), gpus_available=8, tensor_parallel_size=4)
    original = init()
    built = placed_engines(lambda i: i, original, gpu)
    assert built.policy.gpu_memory_utilization == 0.5 and built.policy.tensor_parallel_size == 4
    assert built.policy.engine_kwargs == {"distributed_executor_backend": "mp"}
    assert original.policy.gpu_memory_utilization == 0.9  # the caller's config is not mutated
    # A backend that lives in the worker's torch takes no engine share (Backend.gpu_share false).
    plain = placed_engines(lambda i: i, init("transformers"), gpu)
    assert plain.policy.gpu_memory_utilization == 0.9 and plain.policy.engine_kwargs == {}


# -- Ctrl-C: the same handling on the single-process and the Ray path ------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_is_one_message_and_exit_130_on_both_paths(tmp_path: Path, capsys, monkeypatch, workers: int):
    import equiv.search.cli as cli
    import equiv.search.distributed as distributed
    from tests.helpers.scripted import scripted_factory
    from tests.helpers.runs import base_args

    def interrupted(**_: object) -> dict:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_eval", interrupted)
    monkeypatch.setattr(distributed, "run_distributed", interrupted)
    args = base_args(tmp_path) + ["--scale.workers", str(workers)]
    code = cli.eval_main(args, engine_factory=scripted_factory)
    assert code == 130
    err = capsys.readouterr().err
    # nothing ran in a directory this command created: one line, and the directory is gone
    assert "interrupted before any problem finished" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    # a directory that existed (a resumed run): its records are kept and the message says how to resume
    out = Path(args[args.index("--out") + 1])
    out.mkdir(parents=True, exist_ok=True)
    assert cli.eval_main(args, engine_factory=scripted_factory) == 130
    err = capsys.readouterr().err
    assert "interrupted: 0 record(s) kept" in err and "rerun the same command to resume" in err and "Traceback" not in err
    assert out.is_dir()


def test_interrupted_ray_driver_still_finishes_the_run(tmp_path: Path, monkeypatch):
    """An interrupt while workers run: the driver merges what they wrote and writes the summary
    (``complete``: false), as run_eval does, then lets the interrupt through to the CLI."""
    import equiv.search.distributed as distributed
    from equiv.search.config import RunConfig
    from tests.helpers.scripted import problems

    def workers_then_ctrl_c(*, out: Path, order, **_: object) -> list:
        write(shard_path(out, 0), [rec("p0", algo="sbs", pruner="none", generated_tokens=5)])
        merge_run_dir(out, order)
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "_run_workers", workers_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        distributed.run_distributed(
            algo="sbs", problems=problems(3), engine_factory=lambda placement: None, out_dir=tmp_path,
            scale=ScaleConfig(workers=2), run=RunConfig(progress=False),
        )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["complete"] is False and summary["problems"] == 1 and summary["workers"] == 2
    assert not (tmp_path / "workers").exists()
