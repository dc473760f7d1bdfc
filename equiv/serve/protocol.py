"""What the service accepts and answers, checked before a request reaches the judge (no torch).

Each public route's JSON body is checked by :func:`parse_request` against the route's pydantic
model (:class:`VerdictsRequest`, :class:`GroupRequest`, :class:`PredictRequest`,
:class:`MergeRequest`) and turned into one internal request ``{"route": NAME, ...}`` that the judge
worker serves; anything else is a :class:`RequestError` -- a 4xx status and one line naming the
field, from pydantic's error location (``pairs[0][1]``) -- so a bad request costs the worker
nothing and the server keeps serving. Routes:

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
import re
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Discriminator, Tag, ValidationError,
                      ValidationInfo, field_validator)
from pydantic_core import PydanticCustomError

from equiv.errors import unencodable

INTERNAL_PATH = "/_equiv/judge"
"""The one LitServe endpoint every public route is rewritten to (refused when asked directly)."""

ROUTES = {"/verdicts": "verdicts", "/group": "group", "/predict": "predict",
          "/merge_model_inference": "merge_model_inference", "/metrics": "metrics"}
OUTPUT_TYPES = ("binary", "similarity")


@dataclass(frozen=True)
class Limits:
    """What one request may make the judge do, so no request holds the only worker for minutes
    (issue 66: a 9 KB ``/group`` of 91 distinct steps, 4,095 pairs, held it 105 s on 2 cores).

    ``max_pairs``: the pairs one request may have judged (a ``/group`` of n steps: n(n-1)/2, what
    grouping asks in the worst case, every step distinct); ``max_chars``: one text;
    ``max_request_chars``: the characters the judge reads for one request, summed over every pair
    it may judge (both sides: a ``/group``'s step once per pair it is in; and each question once).
    ``max_body_bytes`` (None: derived) caps the body at what those limits allow a JSON body to
    hold, so an oversized one is refused before it is read or parsed (:meth:`body_limit`).
    """

    max_pairs: int = 1024
    max_chars: int = 20_000
    max_request_chars: int = 2_000_000
    max_body_bytes: int | None = None

    @property
    def body_limit(self) -> int:
        """The largest body accepted: 6 bytes a character (JSON's ``\\uXXXX``), 64 a pair for the
        brackets, quotes, commas and spacing, 64 KiB for the rest; ``max_body_bytes`` if set."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return min(sys.maxsize, 6 * self.max_request_chars + 64 * self.max_pairs + 65_536)

    @property
    def max_items(self) -> int:
        """The JSON items (``[``, ``{`` and ``,`` outside strings) a body within the pair limit
        holds: a pair is ``[a, b]`` and a separator, its question a separator; 64 for the rest."""
        return min(sys.maxsize, 4 * self.max_pairs + 64)


_UNLIMITED = Limits(max_pairs=sys.maxsize, max_chars=sys.maxsize, max_request_chars=sys.maxsize,
                    max_body_bytes=sys.maxsize)
TOO_LARGE = "too_large"
"""The pydantic error type of a limit exceeded: answered 413, every other refusal 400."""


class RequestError(ValueError):
    """A request the service refuses: an HTTP status and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# -- the request models ---------------------------------------------------------------------------
# pydantic checks types, required fields, literals and each item's place (``pairs[0][1]``); the
# validators below add what it cannot know: the server's limits (passed as the validation context,
# since ``--max_pairs``/``--max_chars`` are settings, not constants), text a tokenizer cannot read,
# and which of the two shapes ``[a, b]`` / ``[[a, b], ...]`` a reference-compatible route got. Strict
# mode: JSON's ``"yes"`` is not a boolean and ``1`` not a string. Unknown keys are ignored (TEI
# clients send ``truncate`` and the like).

def _limits(info: ValidationInfo) -> Limits:
    return (info.context or {}).get("limits", _UNLIMITED)


def _text(value: str, info: ValidationInfo) -> str:
    limit = _limits(info).max_chars
    if len(value) > limit:
        raise PydanticCustomError(TOO_LARGE, "{n} characters, more than the limit of {limit} (serve --max_chars)",
                                  {"n": len(value), "limit": limit})
    problem = unencodable(value)
    if problem:
        raise PydanticCustomError("not_text", problem)
    return value


def _a_pair(value: Any) -> Any:
    if not isinstance(value, list) or len(value) != 2:
        raise PydanticCustomError("pair", "must be a pair of two strings [a, b]")
    return value


def _a_batch(value: Any, info: ValidationInfo) -> Any:
    """The batch's shape and size before its items are checked: an enormous one costs nothing."""
    if not isinstance(value, list):
        raise PydanticCustomError("pairs", "must be a list of [a, b] pairs")
    if not value:
        raise PydanticCustomError("empty", "empty; send at least one pair")
    limit = _limits(info).max_pairs
    if len(value) > limit:
        raise PydanticCustomError(TOO_LARGE, "{n} pairs, more than the limit of {limit} (serve --max_pairs)",
                                  {"n": len(value), "limit": limit})
    return value


def _siblings(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, list) or not value:
        raise PydanticCustomError("steps", "must be a non-empty list of sibling step strings")
    limit = _limits(info).max_pairs
    if len(value) * (len(value) - 1) // 2 > limit:  # n steps make n(n-1)/2 pairs: the pair limit bounds the width
        raise PydanticCustomError(TOO_LARGE, "{n} steps make {pairs} pairs, more than the limit of {limit} (serve --max_pairs)",
                                  {"n": len(value), "pairs": len(value) * (len(value) - 1) // 2, "limit": limit})
    return value


def _one_pair(value: Any) -> str:
    """``[a, b]`` is one pair, anything else a batch (the TEI and reference shapes)."""
    return "one" if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value) else "many"


Text = Annotated[str, AfterValidator(_text)]
Pair = Annotated[list[Text], BeforeValidator(_a_pair)]
Pairs = Annotated[list[Pair], BeforeValidator(_a_batch)]
OneOrMany = Annotated[Union[Annotated[Pair, Tag("one")], Annotated[Pairs, Tag("many")]], Discriminator(_one_pair)]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class VerdictsRequest(_Body):
    """``/verdicts`` (and the worker's check of every pair route's internal request)."""

    pairs: Pairs
    questions: Optional[list[Text]] = None
    score_ruled: bool = False

    @field_validator("questions")
    @classmethod
    def _one_per_pair(cls, value: Optional[list[str]], info: ValidationInfo) -> Optional[list[str]]:
        pairs = info.data.get("pairs")
        if value is not None and pairs is not None and len(value) != len(pairs):
            raise PydanticCustomError("questions", "must be a list of {n} strings, one per pair", {"n": len(pairs)})
        return value


class GroupRequest(_Body):
    """``/group``: one problem's sibling steps."""

    steps: Annotated[list[Text], BeforeValidator(_siblings)]
    question: Optional[Text] = None
    grouping: Literal["greedy", "transitive"] = "greedy"


class PredictRequest(_Body):
    """``/predict``: text-embeddings-inference's pair classification."""

    inputs: OneOrMany


class MergeRequest(_Body):
    """``/merge_model_inference``: the reference's worker (``output_type`` null or absent: the server's)."""

    input_pairs: OneOrMany
    output_type: Optional[Literal["binary", "similarity"]] = None


def _where(loc: tuple[Any, ...], rename: dict[str, str]) -> str:
    """``('pairs', 0, 1)`` -> ``pairs[0][1]`` (the models are flat: only the first name is a field;
    later names are pydantic's union tags and validator labels)."""
    name = str(loc[0])
    return rename.get(name, name) + "".join(f"[{part}]" for part in loc[1:] if isinstance(part, int))


def _got(value: Any) -> str:
    return repr(value)[:60] if isinstance(value, (str, bool, int, float)) or value is None else type(value).__name__


def _refusal(err: ValidationError, rename: dict[str, str] | None = None) -> RequestError:
    """The first of pydantic's errors as one line naming its field; a limit exceeded is a 413."""
    first = err.errors(include_url=False)[0]
    kind, loc, value = first["type"], first["loc"], first.get("input")
    if not loc:
        return RequestError(400, f"the body must be a JSON object, got {type(value).__name__}")
    message = {"missing": "missing"}.get(kind, first["msg"][:1].lower() + first["msg"][1:])
    if kind.endswith("_type") or kind == "literal_error":
        message += f", got {_got(value)}"
    more = err.error_count() - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return RequestError(413 if kind == TOO_LARGE else 400, f"field '{_where(loc, rename or {})}': {message}{tail}"[:400])


def decode_json(raw: bytes, limits: Limits) -> Any:
    """The request body as JSON (malformed or too large: a :class:`RequestError`). The standard
    library's parser, not pydantic's: it reads a lone surrogate into a ``str`` the models then
    refuse by name, and a too-deep or too-long document is a 400 here."""
    if len(raw) > limits.body_limit:
        raise RequestError(413, body_too_large(len(raw), limits))
    if not raw.strip():
        return {}
    items = json_items(raw, limits.max_items)
    if items > limits.max_items:
        raise RequestError(413, f"request body of more than {limits.max_items} JSON items, more than the limit of "
                                f"{limits.max_pairs} pairs can hold (serve --max_pairs)")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RequestError(400, f"malformed JSON: {err}") from None
    except RecursionError:
        raise RequestError(400, "malformed JSON: nested too deeply") from None
    except ValueError as err:  # e.g. an integer literal past Python's digit limit
        raise RequestError(400, f"malformed JSON: {str(err).splitlines()[0][:200]}") from None


def body_too_large(size: int | None, limits: Limits) -> str:
    """The one line refusing a body over :attr:`Limits.body_limit` (``size`` None: still arriving)."""
    what = "request body" if size is None else f"request body of {size} bytes"
    return (f"{what} larger than the limit of {limits.body_limit} bytes (what --max_request_chars "
            f"{limits.max_request_chars} characters and --max_pairs {limits.max_pairs} allow; serve --max_request_chars "
            "raises it)")


_STRUCTURE = re.compile(rb'["\[{,]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def json_items(raw: bytes, cap: int) -> int:
    """How many containers and separators (``[``, ``{``, ``,``) a JSON body holds outside its
    strings, counted up to just past ``cap``: the objects a parse would build, known before
    parsing (a 60 MB ``{"pairs": [[], [], ...]}`` drove the server to 1.9 GB and blocked its
    event loop for seconds). Linear: each byte is looked at once; malformed JSON stops the count
    (the parser then says what is wrong)."""
    count, pos = 0, 0
    while count <= cap:
        found = _STRUCTURE.search(raw, pos)
        if found is None:
            break
        if found.group() == b'"':
            rest = _STRING_REST.match(raw, found.end())
            if rest is None:
                break
            pos = rest.end()
        else:
            count, pos = count + 1, found.end()
    return count


def request_chars(request: dict[str, Any]) -> int:
    """The characters the judge reads to answer an internal request, summed over every pair it may
    judge: both texts (what the prefilter and the model read; a ``/group``'s step once per pair it
    is in, as grouping may ask it against every other), and each distinct question once (the
    guard's cheap number scans read it; search's remote client sends one per pair, mostly the same)."""
    if request["route"] == "group":
        steps, n = request["steps"], len(request["steps"])
        return (n - 1) * sum(map(len, steps)) + len(request.get("question") or "")
    if request["route"] == "metrics":
        return 0
    return sum(len(a) + len(b) for a, b in request["pairs"]) + sum(map(len, set(request.get("questions") or [])))


def _within_work(request: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """The request, unless the judge would read more than ``max_request_chars`` for it (a 413
    naming the limit and the setting that raises it, before the judge does any of the work)."""
    chars = request_chars(request)
    if chars > limits.max_request_chars:
        raise RequestError(413, f"this request makes the judge read {chars} characters (every pair's texts and each "
                                f"question), more than the limit of {limits.max_request_chars} (serve --max_request_chars)")
    return request


def _validated(model: type[BaseModel], body: Any, limits: Limits, rename: dict[str, str] | None = None) -> Any:
    try:
        return model.model_validate(body, context={"limits": limits})
    except ValidationError as err:
        raise _refusal(err, rename) from None


def parse_request(route: str, body: Any, limits: Limits = Limits(), *, default_output: str = "binary") -> dict[str, Any]:
    """The internal request for a public route's parsed JSON body, within every limit."""
    return _within_work(_parse_request(route, body, limits, default_output=default_output), limits)


def _parse_request(route: str, body: Any, limits: Limits = Limits(), *, default_output: str = "binary") -> dict[str, Any]:
    if route == "metrics":
        return {"route": "metrics"}
    if route == "verdicts":
        asked = _validated(VerdictsRequest, body, limits)
        return {"route": route, "pairs": asked.pairs, "questions": asked.questions, "score_ruled": asked.score_ruled}
    if route == "group":
        sibs = _validated(GroupRequest, body, limits)
        return {"route": route, "steps": sibs.steps, "question": sibs.question, "grouping": sibs.grouping}
    if route == "predict":
        tei = _validated(PredictRequest, body, limits)
        single = isinstance(tei.inputs[0], str)
        return {"route": route, "pairs": [tei.inputs] if single else tei.inputs, "single": single}
    if route == "merge_model_inference":
        ref = _validated(MergeRequest, body, limits)
        single = isinstance(ref.input_pairs[0], str)
        return {"route": route, "pairs": [ref.input_pairs] if single else ref.input_pairs, "single": single,
                "output_type": ref.output_type or default_output}
    raise RequestError(404, f"no route {route!r}")


def check_internal(request: Any) -> dict[str, Any]:
    """An internal request checked again where the judge worker receives it (its shape, and every
    text encodable; the sizes were the middleware's to check): the middleware checks each public
    request first, so this is the worker's own guard against a request that would fail every
    request batched with it. The same models, without limits; a pair route's ``pairs`` is named
    as its client sent it."""
    if not isinstance(request, dict) or request.get("route") not in set(ROUTES.values()):
        raise RequestError(400, "not an internal request of this service")
    route = request["route"]
    if route == "group":
        _validated(GroupRequest, request, _UNLIMITED)
    elif route != "metrics":
        public = {"verdicts": "pairs", "predict": "inputs", "merge_model_inference": "input_pairs"}[route]
        _validated(VerdictsRequest, request, _UNLIMITED, {"pairs": public})
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
