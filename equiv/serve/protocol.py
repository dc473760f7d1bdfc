"""What the service accepts and answers, checked before a request reaches the judge (no torch).

Each public route's JSON body is checked by :func:`parse_request` and turned into one internal
request ``{"route": NAME, ...}`` that the judge worker serves; anything else is a
:class:`RequestError` -- a 4xx status and one line naming the field -- so a bad request costs the
worker nothing and the server keeps serving. Routes:

- ``/verdicts``: ``{"pairs": [[a, b], ...], "questions": [q, ...]?, "score_ruled": bool?}`` -> a
  verdict per pair (what the ``remote`` pruning strategy asks); a pair a guard rule or the
  restatement rule decided has probability null unless ``score_ruled`` is true;
- ``/group``: ``{"steps": [s, ...], "question": q?, "grouping": "greedy"|"transitive"?}`` -> classes,
  representatives and a verdict per pair (one problem's siblings in one call);
- ``/predict``: text-embeddings-inference's pair classification, ``{"inputs": [a, b]}`` or
  ``{"inputs": [[a, b], ...]}`` -> ``[{"label", "score"}, ...]`` per pair, highest score first;
- ``/merge_model_inference``: the reference's worker, ``{"input_pairs": [a, b]}`` or
  ``{"input_pairs": [[a, b], ...]}`` -> ``is_similar`` / ``is_similar_list`` (``output_type``
  ``similarity``: ``similarity_score`` / ``similarity_scores``);
- ``/metrics``: the judge's work counters (GET or POST, no body needed).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from equiv.errors import unencodable

INTERNAL_PATH = "/_equiv/judge"
"""The one LitServe endpoint every public route is rewritten to (refused when asked directly)."""

ROUTES = {"/verdicts": "verdicts", "/group": "group", "/predict": "predict",
          "/merge_model_inference": "merge_model_inference", "/metrics": "metrics"}
OUTPUT_TYPES = ("binary", "similarity")


@dataclass(frozen=True)
class Limits:
    """What one request may hold (an enormous batch or step is refused, not queued)."""

    max_pairs: int = 4096
    max_chars: int = 20_000
    max_body_bytes: int = 64 * 1024 * 1024


class RequestError(ValueError):
    """A request the service refuses: an HTTP status and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _text(value: Any, field: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise RequestError(400, f"field '{field}': must be a string, got {type(value).__name__}")
    if len(value) > limits.max_chars:
        raise RequestError(413, f"field '{field}': {len(value)} characters, more than the limit of {limits.max_chars}")
    problem = unencodable(value)
    if problem:
        raise RequestError(400, f"field '{field}': {problem}")
    return value


def _pair(value: Any, field: str, limits: Limits) -> list[str]:
    if not isinstance(value, list) or len(value) != 2:
        raise RequestError(400, f"field '{field}': must be a pair of two strings [a, b]")
    return [_text(value[0], f"{field}[0]", limits), _text(value[1], f"{field}[1]", limits)]


def _pairs(value: Any, field: str, limits: Limits) -> list[list[str]]:
    if not isinstance(value, list):
        raise RequestError(400, f"field '{field}': must be a list of [a, b] pairs")
    if not value:
        raise RequestError(400, f"field '{field}': empty; send at least one pair")
    if len(value) > limits.max_pairs:
        raise RequestError(413, f"field '{field}': {len(value)} pairs, more than the limit of {limits.max_pairs}")
    return [_pair(p, f"{field}[{i}]", limits) for i, p in enumerate(value)]


def _one_or_many(value: Any, field: str, limits: Limits) -> tuple[list[list[str]], bool]:
    """``[a, b]`` (one pair) or ``[[a, b], ...]``; True when it was one pair."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return [_pair(value, field, limits)], True
    return _pairs(value, field, limits), False


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestError(400, f"the body must be a JSON object, got {type(body).__name__}")
    return body


def decode_json(raw: bytes, limits: Limits) -> Any:
    """The request body as JSON (malformed or too large: a :class:`RequestError`)."""
    if len(raw) > limits.max_body_bytes:
        raise RequestError(413, f"request body of {len(raw)} bytes, more than the limit of {limits.max_body_bytes}")
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RequestError(400, f"malformed JSON: {err}") from None
    except RecursionError:
        raise RequestError(400, "malformed JSON: nested too deeply") from None
    except ValueError as err:  # e.g. an integer literal past Python's digit limit
        raise RequestError(400, f"malformed JSON: {str(err).splitlines()[0][:200]}") from None


def parse_request(route: str, body: Any, limits: Limits = Limits(), *, default_output: str = "binary") -> dict[str, Any]:
    """The internal request for a public route's parsed JSON body."""
    if route == "metrics":
        return {"route": "metrics"}
    data = _object(body)
    if route == "verdicts":
        pairs = _pairs(data.get("pairs"), "pairs", limits)
        questions = data.get("questions")
        if questions is not None:
            if not isinstance(questions, list) or len(questions) != len(pairs):
                raise RequestError(400, f"field 'questions': must be a list of {len(pairs)} strings, one per pair")
            questions = [_text(q, f"questions[{i}]", limits) for i, q in enumerate(questions)]
        score_ruled = data.get("score_ruled", False)
        if not isinstance(score_ruled, bool):
            raise RequestError(400, f"field 'score_ruled': must be true or false, got {score_ruled!r}"[:200])
        return {"route": route, "pairs": pairs, "questions": questions, "score_ruled": score_ruled}
    if route == "group":
        steps = data.get("steps")
        if not isinstance(steps, list) or not steps:
            raise RequestError(400, "field 'steps': must be a non-empty list of sibling step strings")
        # n steps make n(n-1)/2 pairs: the pair limit bounds the width
        if len(steps) * (len(steps) - 1) // 2 > limits.max_pairs:
            raise RequestError(413, f"field 'steps': {len(steps)} steps make more than {limits.max_pairs} pairs")
        texts = [_text(s, f"steps[{i}]", limits) for i, s in enumerate(steps)]
        question = data.get("question")
        if question is not None:
            question = _text(question, "question", limits)
        grouping = data.get("grouping", "greedy")
        if grouping not in ("greedy", "transitive"):
            raise RequestError(400, f"field 'grouping': must be greedy or transitive, got {grouping!r}"[:200])
        return {"route": route, "steps": texts, "question": question, "grouping": grouping}
    if route == "predict":
        if "inputs" not in data:
            raise RequestError(400, "field 'inputs': missing; send [a, b] or [[a, b], ...]")
        pairs, single = _one_or_many(data["inputs"], "inputs", limits)
        return {"route": route, "pairs": pairs, "single": single}
    if route == "merge_model_inference":
        if "input_pairs" not in data:
            raise RequestError(400, "field 'input_pairs': missing; send [s1, s2] or [[s1, s2], ...]")
        pairs, single = _one_or_many(data["input_pairs"], "input_pairs", limits)
        output = data.get("output_type", default_output)
        if output not in OUTPUT_TYPES:
            raise RequestError(400, f"field 'output_type': must be binary or similarity, got {output!r}"[:200])
        return {"route": route, "pairs": pairs, "single": single, "output_type": output}
    raise RequestError(404, f"no route {route!r}")


_UNLIMITED = Limits(max_pairs=sys.maxsize, max_chars=sys.maxsize, max_body_bytes=sys.maxsize)


def check_internal(request: Any) -> dict[str, Any]:
    """An internal request checked again where the judge worker receives it (its shape, and every
    text encodable; the sizes were the middleware's to check): the middleware checks each public
    request first, so this is the worker's own guard against a request that would fail every
    request batched with it."""
    if not isinstance(request, dict) or request.get("route") not in set(ROUTES.values()):
        raise RequestError(400, "not an internal request of this service")
    route = request["route"]
    if route == "metrics":
        return request
    if route == "group":
        steps = request.get("steps")
        if not isinstance(steps, list) or not steps or request.get("grouping") not in ("greedy", "transitive"):
            raise RequestError(400, "field 'steps': must be a non-empty list of sibling step strings")
        for i, step in enumerate(steps):
            _text(step, f"steps[{i}]", _UNLIMITED)
        if request.get("question") is not None:
            _text(request["question"], "question", _UNLIMITED)
        return request
    field = {"verdicts": "pairs", "predict": "inputs", "merge_model_inference": "input_pairs"}[route]
    pairs = _pairs(request.get("pairs"), field, _UNLIMITED)
    questions = request.get("questions")
    if questions is not None:
        if not isinstance(questions, list) or len(questions) != len(pairs):
            raise RequestError(400, f"field 'questions': must be a list of {len(pairs)} strings, one per pair")
        for i, question in enumerate(questions):
            _text(question, f"questions[{i}]", _UNLIMITED)
    return request


ERROR_KEY = "_equiv_error"
"""The key of the answer the worker gives for one request it cannot serve (``{ERROR_KEY: {"status",
"error"}}``): LitServe answers a whole batch with one status, so the middleware turns this one
request's answer into its own 4xx or 5xx."""


def pair_count(request: dict[str, Any]) -> int:
    """How many pairs an internal request asks about (0 for metrics)."""
    if request["route"] == "group":
        n = len(request["steps"])
        return n * (n - 1) // 2
    return len(request.get("pairs") or [])
