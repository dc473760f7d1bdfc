"""A loopback OpenAI-compatible chat endpoint for the labeller's tests: real HTTP, scripted answers.

``search_cli.py label`` speaks to it through the official ``openai`` client exactly as to ``vllm
serve``, so a test runs the real command in a subprocess without a model. Each request's last user
message (the pair) is passed to ``answer``, which returns the assistant's text; ``delay`` holds every
answer that many seconds, and ``requests`` counts them. ``hold_first`` keeps the first request
unanswered until :attr:`ChatStub.release` is set, or until a second request arrives (which can then
only come from another client while the first waits), so a test can start a second labeller while
the first one is certainly still running, whatever the machine's load."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator

GOOD = '{"reasoning_step": "the same computation", "result": 4}'


class ChatStub:
    """What the running endpoint is told and has seen (see :func:`chat_stub`)."""

    def __init__(self, answer: Callable[[str], str], delay: float, hold_first: bool) -> None:
        self.answer = answer
        self.delay = delay
        self.requests = 0
        self.url = ""
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:
            self.requests += 1
            if self.requests > 1:
                self.release.set()


@contextmanager
def chat_stub(answer: Callable[[str], str] = lambda _: GOOD, *, delay: float = 0.0,
              hold_first: bool = False) -> Iterator[ChatStub]:
    """Serve ``POST /v1/chat/completions`` on a free loopback port for the block."""
    stub = ChatStub(answer, delay, hold_first)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 -- http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            stub.count()
            stub.release.wait(timeout=300)
            if stub.delay:
                time.sleep(stub.delay)
            prompt = str((body.get("messages") or [{}])[-1].get("content", ""))
            reply = json.dumps({
                "id": "stub", "object": "chat.completion", "created": 0, "model": body.get("model", "stub"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": stub.answer(prompt)}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # A short poll: ``shutdown()`` waits up to one poll interval, and the default 0.5 s was most
    # of a quick test's time.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        stub.release.set()
        server.shutdown()
        server.server_close()
