"""The completions cache (``policy.cache``): the real CLI and the real transformers backend with the
tiny random-init policy, a real SQLite file, real processes writing it at once
(docs/search.md, "The completions cache")."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.rundir.summary import summarise
from equiv.search.cli import eval_main
from equiv.search.policies import PolicyConfig, build_policy
from equiv.search.policies.completion_cache import FILE
from equiv.search.types import StepRequest
from tests.test_search_crn import arm_args, expansions

REPO = Path(__file__).resolve().parents[1]
HOW = ("seconds", "engine_tokens", "cache_hits")


def lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow  # two whole searches through eval (CI's slow stage; the default suite stays fast)
def test_a_second_arm_is_answered_for_every_request_the_first_made(tmp_path, tiny_models, two_gsm8k_problems):
    policy, prm = tiny_models
    cache = ["--policy.cache", str(tmp_path / "cache")]
    assert eval_main(arm_args(tmp_path / "base", two_gsm8k_problems, policy, prm, "--pruner.strategy", "none",
                              "--search.dedupe_exact", "false", *cache)) == 0
    assert eval_main(arm_args(tmp_path / "pruned", two_gsm8k_problems, policy, prm, "--pruner.strategy", "levenshtein",
                              "--pruner.threshold", "0.1", *cache)) == 0
    base = {r["id"]: r for r in lines(tmp_path / "base")}
    for record in lines(tmp_path / "pruned"):
        assert record["retries"] == 0 and base[record["id"]]["retries"] == 0  # one request per prefix
        tree = record["tree"]
        shared = set(expansions(tmp_path / "base" / tree)) & set(expansions(tmp_path / "pruned" / tree))
        assert () in shared and len(shared) > 1  # the root expansion and later ones
        # every request the pruned arm shares with the unpruned one, and only those, came from disk
        assert record["cache_hits"] == len(shared)
        assert (record["engine_tokens"] == 0) == (record["policy_requests"] == record["cache_hits"])
        assert record["engine_tokens"] < record["generated_tokens"]
    summary = json.loads((tmp_path / "pruned" / "summary.json").read_text())
    recs = lines(tmp_path / "pruned")
    assert summary["engine_tokens"] == sum(r["engine_tokens"] for r in recs)
    assert summary["cache_hits"] == sum(r["cache_hits"] for r in recs) == summary["policy_cache"]["hits"]
    assert summary["policy_cache"]["entries"] > 0 and summary["policy_cache"]["bytes"] > 0


@pytest.mark.slow  # two whole searches through eval (CI's slow stage; the default suite stays fast)
def test_a_warm_rerun_reproduces_the_arm_without_the_engine(tmp_path, tiny_models, two_gsm8k_problems):
    policy, prm = tiny_models
    cache = ["--policy.cache", str(tmp_path / "cache")]
    assert eval_main(arm_args(tmp_path / "cold", two_gsm8k_problems, policy, prm, *cache)) == 0
    assert eval_main(arm_args(tmp_path / "warm", two_gsm8k_problems, policy, prm, *cache)) == 0
    cold, warm = lines(tmp_path / "cold"), lines(tmp_path / "warm")
    assert [{k: v for k, v in r.items() if k not in HOW} for r in cold] == \
           [{k: v for k, v in r.items() if k not in HOW} for r in warm]
    for name in sorted(p.name for p in (tmp_path / "cold" / "trees").iterdir()):
        assert (tmp_path / "cold" / "trees" / name).read_bytes() == (tmp_path / "warm" / "trees" / name).read_bytes()
    assert all(r["engine_tokens"] == r["generated_tokens"] > 0 and r["cache_hits"] == 0 for r in cold)
    assert all(r["engine_tokens"] == 0 and r["cache_hits"] == r["policy_requests"] > 0 for r in warm)
    stats = json.loads((tmp_path / "warm" / "summary.json").read_text())["policy_cache"]
    assert stats["misses"] == 0 and stats["hits"] == sum(r["policy_requests"] for r in warm)


class Counted:
    """The policy's engine call, counted (the real one runs)."""

    def __init__(self, policy) -> None:
        self.calls = 0
        self.inner = policy._sample

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.inner(*args, **kwargs)


def cached_policy(model: str, cache: Path, **settings):
    policy = build_policy(PolicyConfig(backend="transformers", model=model, max_new_tokens=8, dtype="float32",
                                       device="cpu", cache=str(cache), **settings))
    policy._sample = Counted(policy)
    return policy


REQUEST = StepRequest("Janet has 3 apples and buys 4 more. How many apples does she have?", ("She has 3.",), n=2, seed=7)


def test_another_model_temperature_or_stop_misses(tmp_path, tiny_models):
    policy_dir, _ = tiny_models
    cache = tmp_path / "cache"
    first = cached_policy(policy_dir, cache)
    answer = first.generate([REQUEST])
    again = cached_policy(policy_dir, cache)
    assert again.generate([REQUEST]) == [[replace(c, cached=True) for c in answer[0]]]
    assert again._sample.calls == 0
    other = tmp_path / "other"  # the same weights beside one more file: another model's content
    shutil.copytree(policy_dir, other)
    (other / "NOTES.txt").write_text("retrained\n")
    for miss in (cached_policy(str(other), cache), cached_policy(policy_dir, cache, temperature=0.9),
                 cached_policy(policy_dir, cache, step_delimiter="\n")):
        assert not any(c.cached for c in miss.generate([REQUEST])[0]) and miss._sample.calls == 1
    colder = cached_policy(policy_dir, cache)  # a request's own temperature (a greedy rollout) too
    greedy = StepRequest(REQUEST.question, REQUEST.steps, n=1, seed=7, temperature=0.0)
    colder.generate([greedy])
    assert colder._sample.calls == 1


def test_a_damaged_entry_is_recomputed_never_returned(tmp_path, tiny_models, caplog):
    policy_dir, _ = tiny_models
    cache = tmp_path / "cache"
    fresh = cached_policy(policy_dir, cache).generate([REQUEST])
    db = sqlite3.connect(str(cache / FILE))
    (key, value), = db.execute("SELECT key, value FROM completions").fetchall()
    stored = json.loads(value)
    damages = [value[: len(value) // 2],  # torn
               json.dumps({**stored, "completions": [{**c, "num_tokens": "5"} for c in stored["completions"]]}),
               json.dumps({**stored, "completions": stored["completions"][:1]}),  # one of n
               json.dumps({**stored, "request": {**stored["request"], "prompt": "another"}})]  # another request's
    for damage in damages:
        db.execute("UPDATE completions SET value = ? WHERE key = ?", (damage, key))
        db.commit()
        policy = cached_policy(policy_dir, cache)
        with caplog.at_level("WARNING"):
            again = policy.generate([REQUEST])
        assert policy._sample.calls == 1 and not any(c.cached for c in again[0])
        assert again == fresh  # recomputed (the same seed), not read
        assert "damaged completions-cache entry" in caplog.text and policy.cache.damaged == 1
        caplog.clear()
    db.close()


def test_a_file_that_is_not_a_cache_is_refused_in_one_line(tmp_path, tiny_models, two_gsm8k_problems, capsys):
    policy, prm = tiny_models
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / FILE).write_bytes(b"this is not a database, it is a note\n" * 200)
    with pytest.raises(SystemExit) as exc:
        eval_main(arm_args(tmp_path / "run", two_gsm8k_problems, policy, prm, "--policy.cache",
                           str(tmp_path / "cache")))
    assert exc.value.code != 0
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x.startswith("error")]
    assert len(err) == 1 and FILE in err[0] and "policy.cache" in err[0]
    with pytest.raises(InputError):
        build_policy(PolicyConfig(backend="transformers", model=policy, device="cpu", cache=str(tmp_path / "cache")))


WRITER = """
import sys
from equiv.search.policies.base import RawCompletion
from equiv.search.policies.completion_cache import CacheRequest, CompletionCache
cache = CompletionCache(sys.argv[1], {"backend": "test", "model": {"name": "m"}})
me = int(sys.argv[2])
for k in range(300):  # shared keys (both write them) and own keys, interleaved
    key = k if k % 2 else 1000 * me + k
    request = CacheRequest(f"prompt {key}", 1, key, 0.7, "\\n")
    cache.put_many([(request, [RawCompletion(f"step {key}", 3, -1.5, False, True)])])
    assert cache.get_many([request])[0] == [RawCompletion(f"step {key}", 3, -1.5, False, True)]
print("ok", cache.stats()["entries"])
"""


def test_two_processes_write_one_cache_at_once(tmp_path):
    env = {"PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "cache"), str(me)], cwd=REPO,
                              env={**os.environ, **env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for me in (1, 2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.startswith("ok"), err
    db = sqlite3.connect(str(tmp_path / "cache" / FILE))
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 150 + 2 * 150
    db.close()


def test_records_from_before_the_cache_sum_as_engine_work():
    old = [{"id": "a", "correct": True, "generated_tokens": 10}, {"id": "b", "correct": False, "generated_tokens": 5}]
    new = [{"id": "c", "correct": True, "generated_tokens": 8, "engine_tokens": 3, "cache_hits": 2}]
    summary = summarise(old + new, algo="mcts", pruner="none")
    assert summary["generated_tokens"] == 23 and summary["engine_tokens"] == 18 and summary["cache_hits"] == 2
    assert "engine_tokens" not in summarise(old, algo="mcts", pruner="none")  # an old run's summary as it was


def test_a_gguf_model_is_keyed_by_its_file_content(tmp_path):
    from equiv.search.policies import cache_identity

    a, b, c = tmp_path / "a.gguf", tmp_path / "copy.gguf", tmp_path / "c.gguf"
    a.write_bytes(b"GGUF" + b"\0" * 64)
    b.write_bytes(a.read_bytes())
    c.write_bytes(b"GGUF" + b"\1" * 64)
    ident = {p: cache_identity(PolicyConfig(backend="llamacpp", model=str(p))) for p in (a, b, c)}
    assert ident[a] == ident[b] != ident[c]  # a copy elsewhere hits; another file misses
    assert ident[a]["model"]["sha256"] == __import__("hashlib").sha256(a.read_bytes()).hexdigest()


def test_a_warm_rerun_of_a_record_is_not_a_conflicting_result():
    from equiv.rundir.records import conflicting

    cold = {"id": "a", "seed": 0, "correct": True, "generated_tokens": 9, "engine_tokens": 9, "cache_hits": 0,
            "seconds": 2.0}
    warm = {**cold, "engine_tokens": 0, "cache_hits": 3, "seconds": 0.1}
    assert not conflicting(cold, warm)  # how the result was got, not what it is
    assert conflicting(cold, {**warm, "generated_tokens": 8})
