"""Bounds on what an HTTP client waits for and reads: a deadline on the whole request, a cap on
the answer's body.

httpx's timeouts (and urllib's) are per socket operation: a server that trickles one byte every
second never trips a 5 s read timeout, so a request could hang for as long as the server liked
(issue 66, hole 5: a search past ``--policy.request_timeout_s``, the remote judge past its 60 s,
the labeller's ``--timeout 5`` taking 64 s). And an answer was read whole before anyone looked
at its size: 300 MB from a policy server became 2 GB of Python objects, and a 102 KB gzip
answer inflated to 100 MB in the labeller (hole 11). Every client of equiv that talks to a
server goes through one of the transports here:

- :class:`BoundedTransport` (sync httpx: the llama.cpp policy client, the remote judge): each
  request -- connect, send, the status line and headers, and the whole body -- must end within
  ``timeout`` seconds. The socket's timeout is set, before every read and write, to what is left
  of that deadline (a network backend of httpcore's, so a trickled header is bounded too).
- :func:`bounded_async_transport` (async, for the httpx module the ``openai`` client uses: the
  labeller): the same deadline, as ``asyncio.wait_for`` around the whole exchange.

Both read the body inside the transport, counting *decoded* bytes: they ask for ``gzip`` only,
inflate it themselves at most ``max_bytes + 1`` bytes at a time, and refuse the answer
(:class:`AnswerTooLarge`) once it passes ``max_bytes`` -- so neither a long body nor a
compression bomb is ever held beyond the cap. An encoding that was not asked for (``br``,
``zstd``, raw deflate) is refused, never passed on to a decoder without a cap.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import threading
import time
import zlib
from contextlib import contextmanager
from typing import Any, Iterator

import httpcore
import httpx

ACCEPT_ENCODING = "gzip"  # the one compression decoded here, under the cap
MAX_BYTES = "equiv_max_bytes"
"""A request extension (``extensions={MAX_BYTES: n}``) giving one request a cap of its own."""


class AnswerTooLarge(Exception):
    """An answer's body passed the client's cap (decoded bytes), or came in an encoding the client
    did not ask for and will not inflate without a cap. Not an httpx error, so no client retries
    it as a network failure: the server would send it again."""


# -- the decoded, capped body ------------------------------------------------------------------
class CappedBody:
    """Collects an answer's body as it arrives: inflates ``gzip`` (or zlib ``deflate``) itself,
    never more than one byte past ``max_bytes``, and raises :class:`AnswerTooLarge` past it."""

    def __init__(self, content_encoding: str, max_bytes: int, where: str) -> None:
        self.max_bytes, self.where = max_bytes, where
        self.parts: list[bytes] = []
        self.size = 0
        encoding = content_encoding.strip().lower()
        if encoding in ("", "identity"):
            self._inflate = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header, read from the data
        else:
            raise AnswerTooLarge(f"{where} answered in the encoding {encoding!r}, which was not asked for "
                                 f"(only {ACCEPT_ENCODING})")

    def _add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise AnswerTooLarge(f"{self.where} answered more than {self.max_bytes:,} bytes; refused")
        self.parts.append(data)

    def feed(self, chunk: bytes) -> None:
        """One received chunk (still encoded)."""
        if self._inflate is None:
            self._add(chunk)
            return
        try:
            # max_length: at most one byte past the cap comes out of this chunk, however it inflates
            self._add(self._inflate.decompress(chunk, self.max_bytes - self.size + 1))
        except zlib.error as err:
            raise AnswerTooLarge(f"{self.where} answered a body its encoding cannot decode: {err}") from None
        if self._inflate.unconsumed_tail:  # held back by max_length: it inflates past the cap
            raise AnswerTooLarge(f"{self.where} answered more than {self.max_bytes:,} bytes (decoded); refused")

    def content(self) -> bytes:
        """The whole decoded body (after the last chunk)."""
        if self._inflate is not None:
            try:
                self._add(self._inflate.flush(self.max_bytes - self.size + 1))
            except zlib.error as err:
                raise AnswerTooLarge(f"{self.where} answered a body its encoding cannot decode: {err}") from None
        return b"".join(self.parts)


def _plain_headers(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    """The answer's headers once its body is decoded here: no encoding or length left to apply."""
    return [(k, v) for k, v in headers.raw if k.lower() not in (b"content-encoding", b"content-length")]


# -- sync: a deadline under every socket read and write ------------------------------------------
_local = threading.local()


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The socket timeout for the next operation: httpx's own, shortened to what is left of this
    thread's request deadline (none set: httpx's own)."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise error(f"the whole request took longer than its {_local.budget:g} s")
    return remaining if timeout is None else min(timeout, remaining)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every socket operation of this thread's requests inside the block ends ``seconds`` from now."""
    before = getattr(_local, "deadline", None), getattr(_local, "budget", None)
    _local.deadline, _local.budget = time.monotonic() + seconds, seconds
    try:
        yield
    finally:
        _local.deadline, _local.budget = before


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each operation's timeout cut to the request's deadline."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout),
                                                       local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout),
                                                               socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@functools.lru_cache(maxsize=1)
def shared_ssl_context() -> ssl.SSLContext:
    """httpx's default context (certificates verified against certifi's bundle), built once per
    process: building one reads the whole bundle (about 40 ms), and every transport used to build
    two. A context is safe to share between connections and threads once configured."""
    return httpx.create_ssl_context()


class BoundedTransport(httpx.HTTPTransport):
    """httpx's transport where one request, as a whole, takes at most ``timeout`` seconds and its
    answer at most ``max_bytes`` decoded bytes (module docstring). The body is read here, so the
    response handed back is complete: a caller's ``response.read()`` costs nothing more."""

    def __init__(self, *, timeout: float, max_bytes: int, retries: int = 0,
                 limits: httpx.Limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)) -> None:
        super().__init__(verify=shared_ssl_context(), retries=retries, limits=limits)
        self.timeout, self.max_bytes = timeout, max_bytes
        # httpx takes no network backend, httpcore does: the same pool httpx builds, on ours
        self._pool = httpcore.ConnectionPool(
            ssl_context=shared_ssl_context(), max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            retries=retries, network_backend=_DeadlineBackend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        with deadline(self.timeout):
            response = super().handle_request(request)
            try:
                body = CappedBody(response.headers.get("content-encoding", ""),
                                  int(request.extensions.get(MAX_BYTES, self.max_bytes)),
                                  f"{request.url.scheme}://{request.url.netloc.decode('ascii', 'replace')}")
                for chunk in response.iter_raw():
                    body.feed(chunk)
                content = body.content()
            finally:
                response.close()
        return httpx.Response(response.status_code, headers=_plain_headers(response.headers), content=content,
                              extensions=response.extensions, request=request)


# -- async: the openai client's transport ------------------------------------------------------------
def bounded_async_transport(hx: Any, *, timeout: float, max_bytes: int) -> Any:
    """An async transport of the httpx-like module ``hx`` (``httpx``, or ``httpx2`` for newer
    ``openai`` clients) where one request, as a whole, takes at most ``timeout`` seconds (a
    ``hx.ReadTimeout`` past it, which the client treats as its own timeout) and its answer at most
    ``max_bytes`` decoded bytes (:class:`AnswerTooLarge`)."""

    class BoundedAsyncTransport(hx.AsyncBaseTransport):  # type: ignore[name-defined, misc]
        def __init__(self) -> None:
            self.inner = hx.AsyncHTTPTransport()

        async def _whole(self, request: Any) -> Any:
            request.headers["Accept-Encoding"] = ACCEPT_ENCODING
            response = await self.inner.handle_async_request(request)
            try:
                body = CappedBody(response.headers.get("content-encoding", ""), max_bytes,
                                  f"{request.url.scheme}://{request.url.netloc.decode('ascii', 'replace')}")
                async for chunk in response.aiter_raw():
                    body.feed(chunk)
                content = body.content()
            finally:
                await response.aclose()
            return hx.Response(response.status_code, headers=_plain_headers(response.headers), content=content,
                               extensions=response.extensions, request=request)

        async def handle_async_request(self, request: Any) -> Any:
            try:
                return await asyncio.wait_for(self._whole(request), timeout)
            except asyncio.TimeoutError:
                raise hx.ReadTimeout(f"no whole answer within {timeout:g} s", request=request) from None

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BoundedAsyncTransport()
