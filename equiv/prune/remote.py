"""The ``remote`` strategy: the judge of a running ``search_cli.py serve``, asked over HTTP.

The judge interface (:class:`equiv.search.types.PairJudge`) implemented directly: an
order-insensitive cache of the service's verdicts (keyed on the question too, since the service's
claim guard reads it), the same ``pair_verdicts`` (the one :class:`~equiv.judge.decide.Verdict`,
with whether it took a forward), counted into the same stats object a local judge counts into. The service applies the judge's whole policy (shortcut, prefilter,
model, guard, floor) and its threshold is the one grouping uses, so records equal a local run's.

A service that is down or answers badly is retried a bounded number of times, then a
:class:`~equiv.errors.ServiceError` (one line, the run stops with a non-zero exit) -- never the
reference client's silent "not similar" after three tries. Standard library only (urllib).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Sequence

from equiv.errors import InputError, ServiceError
from equiv.judge.decide import Verdict
from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import Pair, checked_pairs, pair_key
from equiv.prune.lru import BoundedLRU, text_bytes
from equiv.prune.stats import JudgeStats

CHUNK = 1024  # pairs per /verdicts request (under the service's default limit of 4096)


def _request(url: str, payload: Any | None, *, timeout: float, retries: int, backoff: float) -> Any:
    """GET (payload None) or POST JSON with a bounded retry; a 4xx is not retried (it will not change)."""
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            body = err.read()[:300].decode("utf-8", "replace")
            last = f"HTTP {err.code}: {body}"
            if 400 <= err.code < 500:
                break
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as err:
            last = str(getattr(err, "reason", None) or err)
    tries = attempt + 1
    raise ServiceError(f"the judge service at {url} failed after {tries} tr{'y' if tries == 1 else 'ies'}: {last}"[:400],
                       field="pruner.url")


def service_info(url: str, *, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5) -> dict[str, Any]:
    """The service's ``/info`` ``model`` block: model path, ``judge_fingerprint``, ``policy``."""
    info = _request(url.rstrip("/") + "/info", None, timeout=timeout, retries=retries, backoff=backoff)
    model = info.get("model") if isinstance(info, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("judge_fingerprint"), str) \
            or not isinstance(model.get("policy"), dict) or "threshold" not in model["policy"]:
        raise ServiceError(f"{url}/info is not an equiv judge service's answer (no judge_fingerprint and policy)",
                           field="pruner.url")
    return model


class RemoteJudge:
    """The judge served at ``url`` (``search_cli.py serve``); its policy is the service's.

    Implements the judge interface (:class:`equiv.search.types.PairJudge`) directly: the service
    decides every pair with its judge's whole policy and answers the verdict (merged, reason,
    probability); this judge caches those verdicts per (pair, question) and counts them into the
    same :class:`~equiv.prune.stats.JudgeStats` a local judge does. ``policy`` mirrors the
    service's (for ``describe`` and the records); the threshold is read-only, since changing it
    here would change nothing the service decides.
    """

    name = "remote"
    learned = True

    def __init__(self, url: str | None, *, expected_fingerprint: str | None = None, timeout: float = 60.0,
                 retries: int = 3, backoff: float = 0.5) -> None:
        if not url or not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InputError(f"the remote strategy needs the service's address, http://HOST:PORT; got {url!r}",
                             field="url")
        self.stats = JudgeStats()
        self.url = url.rstrip("/")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        info = service_info(self.url, timeout=timeout, retries=retries, backoff=backoff)
        self.fingerprint: str = info["judge_fingerprint"]
        self.served: dict[str, Any] = info["policy"]
        if expected_fingerprint is not None and expected_fingerprint != self.fingerprint:
            raise InputError(f"the service at {self.url} serves judge {self.fingerprint}, not the expected "
                             f"{expected_fingerprint}", field="judge_fingerprint")
        stored = self.served.get("policy")
        self.policy: DecisionPolicy = (
            DecisionPolicy.from_dict(stored, source=f"{self.url}/info") if isinstance(stored, dict)
            else DecisionPolicy(threshold=float(self.served["threshold"]), prefilter=None, same_step="whitespace"))
        # the service's verdicts per (pair, question), bounded as a local judge's cache is
        self.cache: BoundedLRU[tuple[str, ...], Verdict] = BoundedLRU(size_of=lambda key, _: text_bytes(*key))

    @property
    def threshold(self) -> float:
        """The served judge's threshold (read-only: set it where the judge is exported)."""
        return self.policy.threshold

    def _key(self, a: str, b: str, question: str) -> tuple[str, ...]:
        # the service's guard reads the question, so one pair of texts may differ between problems
        return (*pair_key(a, b), question)

    def _ask(self, pairs: list[Pair], questions: list[str], score_ruled: bool = False) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for start in range(0, len(pairs), CHUNK):
            chunk = [list(p) for p in pairs[start:start + CHUNK]]
            answer = _request(self.url + "/verdicts", {"pairs": chunk, "questions": questions[start:start + CHUNK],
                                                      "score_ruled": score_ruled},
                              timeout=self.timeout, retries=self.retries, backoff=self.backoff)
            found = answer.get("verdicts") if isinstance(answer, dict) else None
            if not isinstance(found, list) or len(found) != len(chunk) or not all(
                    isinstance(v, dict) and (v.get("probability") is None or isinstance(v.get("probability"), (int, float)))
                    and isinstance(v.get("merged"), bool) and isinstance(v.get("reason"), str) for v in found):
                raise ServiceError(f"{self.url}/verdicts answered {len(chunk)} pairs with something else: "
                                   f"{json.dumps(answer)[:200]}", field="pruner.url")
            out.extend(found)
        return out

    def pair_verdicts(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None, *,
                      score_ruled: bool = False) -> list[Verdict]:
        """The service's verdict per pair, in order; each new (pair, question) asked once, in one
        request (``score_ruled``: with the probability of the pairs a rule decided, asked again
        where the cached verdict has none)."""
        asked = checked_pairs(pairs, questions)
        start = time.perf_counter()
        keys = [self._key(a, b, q) for (a, b), q in zip(pairs, asked)]
        new: dict[tuple[str, ...], tuple[Pair, str]] = {}
        fresh: list[bool] = []
        for key, pair, question in zip(keys, pairs, asked):
            cached = self.cache.get(key)
            hit = (cached is not None and not (score_ruled and cached.probability is None)) or key in new
            fresh.append(not hit)
            if not hit:
                new[key] = ((pair[0], pair[1]), question)
        answered: dict[tuple[str, ...], Verdict] = {}
        if new:
            found = self._ask([p for p, _ in new.values()], [q for _, q in new.values()], score_ruled)
            self.stats.forward_batches += 1
            for key, v in zip(new, found):
                answered[key] = Verdict(None if v["probability"] is None else float(v["probability"]),
                                        v["merged"], v["reason"], str(v.get("detail", "")), bool(v.get("model_call")))
                self.cache.put(key, answered[key])
        out = [answered.get(key) or self.cache.get(key) for key in keys]
        self.stats.count(out, fresh, time.perf_counter() - start)
        return out

    def pair_probabilities(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        """The model's probability per pair, those a rule decided too."""
        return [float(v.probability) for v in self.pair_verdicts(pairs, questions, score_ruled=True)]

    def pair_scores(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        return self.pair_probabilities(pairs, questions)

    def clear_cache(self) -> None:
        """Forget the verdicts asked so far."""
        self.cache.clear()

    def cache_info(self) -> dict[str, int]:
        """The verdict cache's entries, estimated bytes, bounds and evictions."""
        return self.cache.info()

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.name, "url": self.url, "threshold": self.threshold,
                "judge_fingerprint": self.fingerprint, "policy": self.policy.to_dict()}
