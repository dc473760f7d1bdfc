"""The ``remote`` strategy: the judge of a running ``search_cli.py serve``, asked over HTTP.

Same interface as a local judge (:class:`~equiv.prune.cached.CachedJudge`): the same
order-insensitive cache (keyed on the question too, since the service's claim guard reads it),
the same ``pair_verdicts`` (probability and whether it took a forward), stats filled from the
service's per-pair reasons. The service applies the judge's whole policy (shortcut, prefilter,
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
from dataclasses import replace
from typing import Any, Sequence

from equiv.errors import InputError, ServiceError
from equiv.judge.decide import FLOOR, GUARD_PREFIX, RESTATED
from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge, Pair, PairVerdict, pair_key

CHUNK = 1024  # pairs per /verdicts request (under the service's default limit of 4096)
_STATS = {"identical": "exact", "prefiltered": "prefiltered"}


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


class RemoteJudge(CachedJudge):
    """The judge served at ``url`` (``search_cli.py serve``); its policy is the service's.

    The service decides every pair with its judge's whole policy and answers the verdict (merged,
    reason, probability); this judge caches those verdicts per (pair, question) and counts its
    stats from their reasons, as a local judge counts its own. ``policy`` mirrors the service's
    (for ``describe`` and the records); changing it here would change nothing the service decides,
    so the threshold cannot be set.
    """

    name = "remote"
    learned = True

    def __init__(self, url: str | None, *, expected_fingerprint: str | None = None, timeout: float = 60.0,
                 retries: int = 3, backoff: float = 0.5) -> None:
        super().__init__()
        if not url or not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InputError(f"the remote strategy needs the service's address, http://HOST:PORT; got {url!r}",
                             field="url")
        self.url = url.rstrip("/")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        info = service_info(self.url, timeout=timeout, retries=retries, backoff=backoff)
        self.fingerprint: str = info["judge_fingerprint"]
        self.served: dict[str, Any] = info["policy"]
        if expected_fingerprint is not None and expected_fingerprint != self.fingerprint:
            raise InputError(f"the service at {self.url} serves judge {self.fingerprint}, not the expected "
                             f"{expected_fingerprint}", field="judge_fingerprint")
        stored = self.served.get("policy")
        self.policy = (DecisionPolicy.from_dict(stored, source=f"{self.url}/info") if isinstance(stored, dict)
                       else replace(self.default_policy, threshold=float(self.served["threshold"])))
        self._verdicts: dict[tuple[str, ...], PairVerdict] = {}

    @property
    def threshold(self) -> float:
        return self.policy.threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        raise InputError("the remote strategy decides with the served judge's threshold; set it where the judge "
                         "is exported", field="threshold")

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
                      score_ruled: bool = False) -> list[PairVerdict]:
        """The service's verdict per pair, in order; each new (pair, question) asked once, in one
        request (``score_ruled``: with the probability of the pairs a rule decided, asked again
        where the cached verdict has none)."""
        if questions is not None and len(questions) != len(pairs):
            raise ValueError(f"{len(questions)} questions for {len(pairs)} pairs")
        start = time.perf_counter()
        asked = list(questions) if questions is not None else [""] * len(pairs)
        keys = []
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise InputError(f"pair {i} must be two strings, got {pair!r}"[:200], field="pairs")
            keys.append(self._key(pair[0], pair[1], asked[i]))
        self.stats.pairs += len(keys)
        new: dict[tuple[str, ...], tuple[Pair, str]] = {}
        for key, pair, question in zip(keys, pairs, asked):
            cached = self._verdicts.get(key)
            if (cached is not None and not (score_ruled and cached.probability is None)) or key in new:
                self.stats.cache_hits += 1
            else:
                new[key] = ((pair[0], pair[1]), question)
        if new:
            found = self._ask([p for p, _ in new.values()], [q for _, q in new.values()], score_ruled)
            self.stats.forward_batches += 1
            for key, v in zip(new, found):
                probability = None if v["probability"] is None else float(v["probability"])
                verdict = PairVerdict(probability, bool(v.get("model_call")), v["merged"], v["reason"],
                                      str(v.get("detail", "")))
                self._verdicts[key] = verdict
                stat = _STATS.get(verdict.reason, "scored" if verdict.probability is not None else None)
                if stat is not None:
                    setattr(self.stats, stat, getattr(self.stats, stat) + 1)
        out = [self._verdicts[key] for key in keys]
        for verdict in out:  # as a local judge counts them: every ask, repeats included
            self.stats.guarded += verdict.reason.startswith(GUARD_PREFIX)
            self.stats.floored += verdict.reason == FLOOR
            self.stats.restated += verdict.reason == RESTATED
        self.stats.seconds += time.perf_counter() - start
        return out

    def pair_scores(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[float]:
        return [float(v.probability) for v in self.pair_verdicts(pairs, questions, score_ruled=True)]

    def clear_cache(self) -> None:
        super().clear_cache()
        self._verdicts.clear()

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.name, "url": self.url, "threshold": self.threshold,
                "judge_fingerprint": self.fingerprint, "policy": self.policy.to_dict()}
