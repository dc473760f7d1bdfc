"""Small hostile HTTP servers on loopback, for the clients' bounds (issue 66, holes 4, 5 and 11):
one that trickles its answer a byte at a time, one that sends a body past any sane size or a
gzip bomb, one that is simply not the server the client expects. Standard library only."""

from __future__ import annotations

import json
import struct
import threading
import time
import zlib
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

Answer = Callable[[BaseHTTPRequestHandler, bytes], None]
"""Writes the whole answer to one request, given the request's body."""


@contextmanager
def serving(answer: Answer) -> Iterator[tuple[str, list[str]]]:
    """A threaded HTTP/1.1 server on 127.0.0.1 answering every GET and POST with ``answer``;
    yields its URL and the paths asked so far."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            asked.append(self.path)
            try:
                answer(self, body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up: what it should do
                self.close_connection = True

        do_GET = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that hung up mid-answer is what these servers provoke, not news

    httpd = Server(("127.0.0.1", 0), Handler)
    # A short poll: ``shutdown()`` waits up to one poll interval (0.5 s by default, per test).
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", asked
    finally:
        httpd.shutdown()
        httpd.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """One plain answer (JSON unless ``headers`` say otherwise)."""
    handler.send_response(status)
    for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def send_json(handler: BaseHTTPRequestHandler, payload: Any, status: int = 200) -> None:
    send(handler, status, json.dumps(payload).encode("utf-8"))


def trickle(every: float = 0.5, *, headers_too: bool = True, body: bytes = b'{"a": 1}' + b" " * 400) -> Answer:
    """An answer sent one byte every ``every`` seconds (the status line and headers too, unless
    ``headers_too`` is false): minutes for the whole, though no single read waits a second."""

    def answer(handler: BaseHTTPRequestHandler, _: bytes) -> None:
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode("ascii")
        if not headers_too:
            handler.wfile.write(head)
            handler.wfile.flush()
            head = b""
        for byte in head + body:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(every)

    return answer


def gzip_bomb(inflated: int = 200 * 1024 * 1024) -> bytes:
    """A JSON-looking gzip body of ``inflated`` bytes that is about 0.1% of that on the wire: a
    valid gzip member (``gzip.decompress`` gives ``{"content": "<inflated spaces>"}``). Built
    without deflating the whole (1.5 s for 200 MB): after a full flush the compressor starts
    afresh, so every 1 MiB block of spaces compresses to the same bytes, which are repeated; the
    trailer's CRC and length are those of the whole inflated body."""
    head, tail, block = b'{"content": "', b'"}', 1 << 20
    blocks, rest = divmod(inflated, block)
    spaces = b" " * block
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the gzip framing is written here
    start = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    one_block = deflate.compress(spaces) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.compress(b" " * rest + tail) + deflate.flush()
    crc = zlib.crc32(head)
    for _ in range(blocks):
        crc = zlib.crc32(spaces, crc)
    crc = zlib.crc32(b" " * rest + tail, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name, no mtime
    trailer = struct.pack("<II", crc & 0xFFFFFFFF, (len(head) + inflated + len(tail)) & 0xFFFFFFFF)
    return header + start + one_block * blocks + end + trailer


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``'s result (or its exception, raised here), run in a thread; an ``AssertionError``
    if it has not returned after ``seconds`` -- a generous bound that only keeps a broken client
    from hanging the test, not a timing claim."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s: the client's timeout does not bound the request"
    if "error" in box:
        raise box["error"]
    return box["value"]
