"""Every cache of a long-lived judge is bounded, by entries and by an estimate of its bytes
(issue #53 item 5): many distinct large pairs never take it past its bounds, locally, through the
service's judge API, and the service reads the cache's size from the judge, not its insides."""

from __future__ import annotations

import pytest

from equiv.judge.policy import DecisionPolicy
from equiv.prune import LevenshteinJudge
from equiv.prune.lru import ENTRY_OVERHEAD, BoundedLRU, text_bytes


def test_the_lru_keeps_the_most_recently_used_within_both_bounds():
    lru: BoundedLRU[str, int] = BoundedLRU(max_entries=3, max_bytes=10_000, size_of=lambda k, v: len(k))
    for key in "abcd":
        lru.put(key, 1)
    assert len(lru) == 3 and "a" not in lru and lru.evictions == 1
    lru.get("b")  # used: now the newest
    lru.put("e", 1)
    assert "b" in lru and "c" not in lru
    heavy: BoundedLRU[str, int] = BoundedLRU(max_entries=100, max_bytes=250, size_of=lambda k, v: len(k))
    for k in range(10):
        heavy.put(str(k) * 100, k)
        assert heavy.bytes <= 250 and len(heavy) <= 2
    heavy.put("x" * 1000, 0)  # heavier than the whole bound: not kept, nothing else lost
    assert "x" * 1000 not in heavy and len(heavy) == 2
    heavy.clear()
    assert (len(heavy), heavy.bytes) == (0, 0)


def _distinct_large_pairs(n: int, size: int) -> list[tuple[str, str]]:
    # nearly equal texts, so the prefilter-free Levenshtein judge scores every one
    return [(f"{k} " + "x" * size, f"{k} " + "x" * size + "y") for k in range(n)]


def test_a_judges_cache_stays_under_its_bounds_with_many_distinct_large_pairs():
    judge = LevenshteinJudge(0.5)
    judge.policy = DecisionPolicy(threshold=0.5, prefilter=None, same_step="whitespace", compare=">")
    judge.cache = BoundedLRU(max_entries=50, max_bytes=40_000, size_of=lambda key, _: text_bytes(*key))
    for start in range(0, 400, 40):
        judge.pair_verdicts(_distinct_large_pairs(400, 2_000)[start:start + 40])
        info = judge.cache_info()
        assert info["entries"] <= 50 and info["bytes"] <= 40_000
    assert judge.cache_info()["evictions"] > 300 and judge.stats.scored == 400
    # the identical pairs the shortcut decides are remembered in the same bounded cache
    same = [(f"{k} " + "z" * 2_000, f"{k} " + "z" * 2_000) for k in range(100)]
    assert all(v.reason == "identical" for v in judge.pair_verdicts(same))
    assert judge.cache_info()["entries"] <= 50 and judge.cache_info()["bytes"] <= 40_000
    # an evicted pair is scored again, the same: a cache is memory, never a decision
    first = _distinct_large_pairs(1, 2_000)
    assert judge.pair_scores(first) == [pytest.approx(judge.pair_scores(first)[0])]


def test_the_default_bounds_hold_a_byte_estimate_of_each_entry():
    judge = LevenshteinJudge(0.5)
    judge.pair_verdicts([("a b c", "a b d")])
    assert judge.cache_info()["bytes"] == ENTRY_OVERHEAD + len("a b c") + len("a b d")
    assert judge.cache_info()["max_entries"] > 0 and judge.cache_info()["max_bytes"] > 0


def test_the_service_api_leaves_the_cache_to_the_judge_and_reports_it():
    pytest.importorskip("litserve")
    from equiv.serve.api import JudgeAPI

    def factory(device: str) -> LevenshteinJudge:
        judge = LevenshteinJudge(0.5)
        judge.cache = BoundedLRU(max_entries=1_000, max_bytes=200_000, size_of=lambda key, _: text_bytes(*key))
        return judge

    api = JudgeAPI(factory)
    api.setup("cpu")
    for round_ in range(20):  # 20 requests of 50 distinct pairs of ~10 KB each: 10 MB asked in all
        pairs = [[a + str(round_), b] for a, b in _distinct_large_pairs(50, 5_000)]
        api.predict([{"route": "verdicts", "pairs": pairs, "questions": None}])
        cache = api.metrics()["cache"]
        assert cache["entries"] <= 1_000 and cache["bytes"] <= 200_000
    assert api.metrics()["judge"]["scored"] == 1_000
