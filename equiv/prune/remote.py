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
from typing import Any, Sequence

from equiv.errors import InputError, ServiceError
from equiv.prune.cached import CachedJudge, Pair, PairVerdict

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
    """The judge served at ``url`` (``search_cli.py serve``); its threshold and policy are the service's."""

    name = "remote"
    learned = True
    exact_shortcut = False  # the service decides every rule; nothing is decided here

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
        self.policy: dict[str, Any] = info["policy"]
        if expected_fingerprint is not None and expected_fingerprint != self.fingerprint:
            raise InputError(f"the service at {self.url} serves judge {self.fingerprint}, not the expected "
                             f"{expected_fingerprint}", field="judge_fingerprint")
        self.threshold = float(self.policy["threshold"])
        self._reasons: dict[tuple[str, ...], str] = {}

    def _key(self, a: str, b: str, question: str) -> tuple[str, ...]:
        # the service's guard reads the question, so one pair of texts may differ between problems
        return (*sorted((a, b)), question)

    def _ask(self, pairs: list[Pair], questions: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for start in range(0, len(pairs), CHUNK):
            chunk = [list(p) for p in pairs[start:start + CHUNK]]
            answer = _request(self.url + "/verdicts", {"pairs": chunk, "questions": questions[start:start + CHUNK]},
                              timeout=self.timeout, retries=self.retries, backoff=self.backoff)
            found = answer.get("verdicts") if isinstance(answer, dict) else None
            if not isinstance(found, list) or len(found) != len(chunk) or not all(
                    isinstance(v, dict) and isinstance(v.get("probability"), (int, float)) for v in found):
                raise ServiceError(f"{self.url}/verdicts answered {len(chunk)} pairs with something else: "
                                   f"{json.dumps(answer)[:200]}", field="pruner.url")
            out.extend(found)
        return out

    def pair_results(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[tuple[float, float]]:
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
            if key in self._cache or key in new:
                self.stats.cache_hits += 1
            else:
                new[key] = ((pair[0], pair[1]), question)
        if new:
            found = self._ask([p for p, _ in new.values()], [q for _, q in new.values()])
            self.stats.forward_batches += 1
            for key, verdict in zip(new, found):
                reason = str(verdict.get("reason", ""))
                self._cache[key] = (float(verdict["probability"]), float(verdict.get("score", verdict["probability"])))
                self._reasons[key] = reason
                if verdict.get("model_call"):
                    self._model_calls.add(key)
                setattr(self.stats, _STATS.get(reason, "scored"), getattr(self.stats, _STATS.get(reason, "scored")) + 1)
        for key in keys:  # as a local judge counts them: every ask, repeats included
            reason = self._reasons[key]
            if reason.startswith("guard:"):
                self.stats.guarded += 1
            elif reason == "floor":
                self.stats.floored += 1
        self.stats.seconds += time.perf_counter() - start
        return [self._cache[key] for key in keys]

    def pair_verdicts(self, pairs: Sequence[Pair], questions: Sequence[str] | None = None) -> list[PairVerdict]:
        results = self.pair_results(pairs, questions)
        asked = list(questions) if questions is not None else [""] * len(pairs)
        return [PairVerdict(prob, self._key(a, b, q) in self._model_calls)
                for (prob, _), (a, b), q in zip(results, pairs, asked)]

    def clear_cache(self) -> None:
        super().clear_cache()
        self._reasons.clear()

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.name, "url": self.url, "threshold": self.threshold,
                "judge_fingerprint": self.fingerprint, "policy": self.policy}
