"""The ``remote`` strategy: the judge of a running ``search_cli.py serve``, asked over HTTP.

The judge interface (:class:`equiv.prune.boundary.SiblingJudge`) implemented directly: ``group``
asks the same rounds a local judge asks (:func:`equiv.prune.boundary.group_families`), each
round's pairs through ``/verdicts`` in chunks bounded by pairs and characters; an
order-insensitive cache of the service's verdicts (keyed on the question too, since the service's
claim guard reads it), the same ``pair_verdicts`` (the one :class:`~equiv.judge.decide.Verdict`,
with whether it took a forward), counted into the same stats object a local judge counts into. The service applies the judge's whole policy (shortcut, prefilter,
model, guard, floor) and its threshold is the one grouping uses, so records equal a local run's.

A service that is down or answers badly is retried a bounded number of times, then a
:class:`~equiv.errors.ServiceError` (one line, the run stops with a non-zero exit) -- never the
reference client's silent "not similar" after three tries. The HTTP is httpx's: one pooled
connection per judge, and its transport's retries (:class:`RetryingTransport`). ``timeout`` bounds
each try as a whole -- connect, send and the whole answer (:mod:`equiv.httpbounds`) -- so a service
that trickles its answer a byte at a time fails the try at ``timeout`` like one that never answers.
"""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

import httpx

from equiv.errors import InputError, ServiceError
from equiv.httpbounds import AnswerTooLarge, BoundedTransport
from equiv.judge.decide import Verdict, VerdictJSONError, verdict_from_json
from equiv.judge.policy import DecisionPolicy
from equiv.prune.boundary import GroupsSiblings
from equiv.prune.cached import Pair, checked_pairs, pair_key
from equiv.prune.lru import BoundedLRU, text_bytes
from equiv.prune.stats import JudgeStats

CHUNK = 1024  # pairs per /verdicts request (the service's default --max_pairs)
# characters per /verdicts request, counted as the service counts them (both steps of every pair,
# each distinct question once): half the service's default --max_request_chars (2,000,000), so
# a chunk of long steps is split rather than refused with a 413
CHUNK_CHARS = 1_000_000
MAX_ANSWER_BYTES = 32 * 1024 * 1024  # a /verdicts answer of CHUNK pairs is about 200 KB


def _chunks(pairs: Sequence[Pair], questions: Sequence[str]) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of ``pairs`` sent as one ``/verdicts`` request each: at most
    :data:`CHUNK` pairs and :data:`CHUNK_CHARS` characters (a single longer pair goes alone, and
    the service names its own limit if it is over it)."""
    ranges: list[tuple[int, int]] = []
    start, chars, seen = 0, 0, set()
    for i, ((a, b), q) in enumerate(zip(pairs, questions)):
        cost = len(a) + len(b) + (len(q) if q not in seen else 0)
        if i > start and (i - start >= CHUNK or chars + cost > CHUNK_CHARS):
            ranges.append((start, i))
            start, chars, seen = i, 0, set()
            cost = len(a) + len(b) + len(q)
        chars += cost
        seen.add(q)
    if start < len(pairs):
        ranges.append((start, len(pairs)))
    return ranges


class RetryingTransport(BoundedTransport):
    """httpx's transport, retrying what a later try may find well, at most ``retries`` times; each
    try bounded as a whole by ``timeout`` seconds (connect, send, the whole answer).

    A connection that cannot be opened (refused, connect timeout) is retried by httpx itself
    (``HTTPTransport(retries=...)``, httpcore's backoff of 0, 0.5, 1, ... s); httpx retries nothing
    else, so this transport adds the other passing failures of a service restarting or overloaded:
    a 5xx answer, and a request that timed out or whose connection broke after it opened (a pooled
    keep-alive connection the server closed), with a backoff of ``backoff * 2**k`` s. A 4xx is
    answered at once: it would not change.
    """

    def __init__(self, retries: int, backoff: float, timeout: float = 60.0) -> None:
        super().__init__(timeout=timeout, max_bytes=MAX_ANSWER_BYTES, retries=retries)
        self.retries, self.backoff = retries, backoff

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            last = attempt == self.retries
            try:
                response = super().handle_request(request)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                raise  # httpx's own retries are spent
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError):
                if last:
                    raise
                continue
            if response.status_code < 500 or last:
                return response
            response.close()
        raise AssertionError("unreachable")  # the last attempt returns or raises


def client(*, timeout: float, retries: int, backoff: float) -> httpx.Client:
    """An HTTP client for the service: ``timeout`` s for each try as a whole."""
    return httpx.Client(transport=RetryingTransport(retries, backoff, timeout), timeout=timeout,
                        headers={"Content-Type": "application/json"})


def _request(http: httpx.Client, url: str, payload: Any | None, *, retries: int) -> Any:
    """GET (payload None) or POST JSON through ``http``, whose transport retries ``retries`` times;
    the answer's JSON, else a one-line :class:`ServiceError` naming the URL and what the last try
    got (an answer that is not JSON is not retried: a service that sends one sends it again)."""
    tries = retries + 1
    try:
        response = (http.get(url) if payload is None
                    else http.post(url, content=json.dumps(payload).encode("utf-8")))
    except AnswerTooLarge as err:  # not retried: the service would send it again
        last, tries = str(err), 1
    except httpx.HTTPError as err:
        last = str(err) or type(err).__name__
    else:
        if response.is_success:
            try:
                return response.json()
            except ValueError as err:
                last, tries = f"not JSON ({err})", 1
        else:
            last = f"HTTP {response.status_code}: {response.content[:300].decode('utf-8', 'replace')}"
            tries = 1 if response.status_code < 500 else tries
    raise ServiceError(f"the judge service at {url} failed after {tries} tr{'y' if tries == 1 else 'ies'}: {last}"[:400],
                       field="pruner.url")


def service_info(url: str, *, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5,
                 http: httpx.Client | None = None) -> dict[str, Any]:
    """The service's ``/info`` ``model`` block: model path, ``judge_fingerprint``, ``policy``
    (asked through ``http``, else a client of its own)."""
    if http is None:
        with client(timeout=timeout, retries=retries, backoff=backoff) as own:
            return service_info(url, retries=retries, http=own)
    info = _request(http, url.rstrip("/") + "/info", None, retries=retries)
    model = info.get("model") if isinstance(info, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("judge_fingerprint"), str) \
            or not isinstance(model.get("policy"), dict) or "threshold" not in model["policy"]:
        raise ServiceError(f"{url}/info is not an equiv judge service's answer (no judge_fingerprint and policy)",
                           field="pruner.url")
    return model


class RemoteJudge(GroupsSiblings):
    """The judge served at ``url`` (``search_cli.py serve``); its policy is the service's.

    Implements the judge interface (:class:`equiv.prune.boundary.SiblingJudge`) directly: the service
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
        self.http = client(timeout=timeout, retries=retries, backoff=backoff)
        info = service_info(self.url, retries=retries, http=self.http)
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

    def _ask(self, pairs: list[Pair], questions: list[str], score_ruled: bool = False) -> list[Verdict]:
        out: list[Verdict] = []
        for start, end in _chunks(pairs, questions):
            chunk = [list(p) for p in pairs[start:end]]
            answer = _request(self.http, self.url + "/verdicts",
                              {"pairs": chunk, "questions": questions[start:end], "score_ruled": score_ruled},
                              retries=self.retries)
            found = answer.get("verdicts") if isinstance(answer, dict) else None
            try:  # each verdict in its one JSON form, read by the one reader
                if not isinstance(found, list) or len(found) != len(chunk) or not all(isinstance(v, dict) for v in found):
                    raise VerdictJSONError("verdicts", "not one verdict per pair")
                out.extend(verdict_from_json(v) for v in found)
            except VerdictJSONError as err:
                raise ServiceError(f"{self.url}/verdicts answered {len(chunk)} pairs with something else "
                                   f"({err}): {json.dumps(answer)[:200]}", field="pruner.url") from None
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
            for key, verdict in zip(new, found):
                answered[key] = verdict
                self.cache.put(key, verdict)
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
