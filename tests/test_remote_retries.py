"""The ``remote`` strategy's HTTP (equiv/prune/remote.py) against small real servers on loopback:
which failures are retried and how often, one pooled connection, and the one-line
:class:`~equiv.errors.ServiceError` naming the URL. Standard-library servers, no LitServe."""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator

import pytest

from equiv.errors import ServiceError
from equiv.prune.remote import RemoteJudge, service_info

INFO = {"model": {"judge_fingerprint": "sha256:test", "policy": {"threshold": 0.5}}}


@contextmanager
def serving(answer: Callable[[BaseHTTPRequestHandler], tuple[int, bytes]]) -> Iterator[tuple[str, list, list]]:
    """A keep-alive HTTP/1.1 server answering ``answer(handler)``; yields its URL, the paths asked
    and the client ports that connected (one per connection)."""
    asked: list[str] = []
    connections: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            connections.append(self.client_address[1])

        def _serve(self) -> None:
            if self.headers.get("Content-Length"):
                self.rfile.read(int(self.headers["Content-Length"]))
            asked.append(self.path)
            status, body = answer(self)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _serve

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    # A short poll: ``shutdown()`` waits up to one poll interval (0.5 s by default, per test).
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", asked, connections
    finally:
        httpd.shutdown()
        httpd.server_close()


def _json(status: int, payload: object) -> tuple[int, bytes]:
    return status, json.dumps(payload).encode()


@pytest.mark.parametrize("status, tries", [(500, 4), (503, 4), (404, 1), (422, 1)])
def test_a_5xx_is_retried_a_bounded_number_of_times_a_4xx_not(status, tries):
    with serving(lambda h: _json(status, {"error": f"answer {status}"})) as (url, asked, _):
        with pytest.raises(ServiceError) as failed:
            service_info(url, retries=3, backoff=0.01)
    message = str(failed.value)
    assert len(asked) == tries and set(asked) == {"/info"}
    assert f"{url}/info" in message and f"HTTP {status}" in message and f"answer {status}" in message
    assert f"after {tries} tr{'y' if tries == 1 else 'ies'}" in message and "pruner.url" in message
    assert "\n" not in message


def test_a_service_that_recovers_within_the_retries_is_used():
    failures = [500, 502]

    def flaky(handler):
        return _json(failures.pop(0), {"error": "starting"}) if failures else _json(200, INFO)

    with serving(flaky) as (url, asked, _):
        assert service_info(url, retries=3, backoff=0.01)["judge_fingerprint"] == "sha256:test"
    assert len(asked) == 3


def test_a_service_that_is_down_is_one_line_after_the_transports_retries(monkeypatch):
    import httpcore._sync.connection

    # httpcore's own back-off between connection tries (0, 0.5, 1, ... s), shortened: every try still happens
    monkeypatch.setattr(httpcore._sync.connection, "RETRIES_BACKOFF_FACTOR", 0.01)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(ServiceError) as failed:
            service_info(url, retries=2, backoff=0.01)
    message = str(failed.value)
    assert url in message and "after 3 tries" in message and "\n" not in message


def test_an_answer_slower_than_the_timeout_is_retried_then_one_line():
    def slow(handler):
        time.sleep(0.5)
        return _json(200, INFO)

    with serving(slow) as (url, asked, _):
        with pytest.raises(ServiceError) as failed:
            service_info(url, timeout=0.1, retries=1, backoff=0.01)
    assert len(asked) == 2 and "after 2 tries" in str(failed.value) and url in str(failed.value)


def test_an_answer_that_is_not_json_is_not_retried():
    with serving(lambda h: (200, b"<html>a proxy's page</html>")) as (url, asked, _):
        with pytest.raises(ServiceError, match="after 1 try: not JSON"):
            service_info(url, retries=3, backoff=0.01)
    assert len(asked) == 1


def test_the_judge_asks_over_one_kept_alive_connection():
    """Before (urllib): a new connection for every request; httpx pools one per judge."""
    def service(handler):
        if handler.path == "/info":
            return _json(200, INFO)
        return _json(200, {"threshold": 0.5, "verdicts": [
            {"probability": 0.9, "merged": True, "reason": "threshold", "model_call": True}]})

    with serving(service) as (url, asked, connections):
        judge = RemoteJudge(url, retries=0)
        for i in range(3):
            assert judge.pair_verdicts([(f"a{i}", f"b{i}")], ["q"])[0].merged
    assert asked == ["/info", "/verdicts", "/verdicts", "/verdicts"]
    assert len(connections) == 1, connections


@pytest.mark.parametrize("headers_too", [True, False], ids=["trickled-headers", "trickled-body"])
def test_a_trickled_answer_fails_each_try_at_the_timeout_then_one_line(headers_too):
    """Issue 66, hole 5: httpx's timeout is per read, so an answer trickled a byte every 0.5 s
    (minutes in all) never tripped the judge's timeout. Now each try ends at ``timeout`` as a
    whole, the retries follow, then the one line. (Here a byte every 0.1 s against a 0.3 s
    timeout: no single read waits as long as the timeout.)"""
    from tests.helpers.hostile_http import serving as hostile, trickle, within

    with hostile(trickle(0.1, headers_too=headers_too)) as (url, asked):
        with pytest.raises(ServiceError) as failed:
            within(60, lambda: service_info(url, timeout=0.3, retries=1, backoff=0.01))
    message = str(failed.value)
    assert len(asked) == 2 and "after 2 tries" in message and f"{url}/info" in message and "\n" not in message


def test_a_huge_answer_is_refused_in_one_line_not_read_whole(monkeypatch):
    """A body past the judge's cap (here lowered to 1 MB) is refused as it streams in, once."""
    from equiv.prune import remote
    from tests.helpers.hostile_http import gzip_bomb, send, serving as hostile

    monkeypatch.setattr(remote, "MAX_ANSWER_BYTES", 1_000_000)
    bomb = gzip_bomb(20_000_000)
    with hostile(lambda h, _: send(h, 200, bomb, {"Content-Encoding": "gzip"})) as (url, asked):
        with pytest.raises(ServiceError, match=r"after 1 try: .*more than 1,000,000 bytes"):
            service_info(url, retries=3, backoff=0.01)
    assert len(asked) == 1


def test_a_chunk_of_long_steps_is_split_to_stay_under_the_services_character_limit():
    """The service refuses a /verdicts request past --max_request_chars (2,000,000 by default) with
    a 413; the client splits by characters as well as by pairs, so a search with long steps is
    never refused for the size of its own request."""
    from equiv.prune.remote import CHUNK, CHUNK_CHARS, _chunks

    long_pairs = [("a" * 3000, "b" * 3000)] * 600  # 3.6 M characters: two requests' worth at least
    ranges = _chunks(long_pairs, ["q"] * 600)
    assert ranges[0][0] == 0 and ranges[-1][1] == 600
    assert all(prev[1] == nxt[0] for prev, nxt in zip(ranges, ranges[1:]))
    for start, end in ranges:
        assert sum(len(a) + len(b) for a, b in long_pairs[start:end]) + 1 <= CHUNK_CHARS
    short = [("x", "y")] * (CHUNK + 5)
    assert _chunks(short, ["q"] * len(short)) == [(0, CHUNK), (CHUNK, CHUNK + 5)]
    assert _chunks([("a" * CHUNK_CHARS, "b")], ["q"]) == [(0, 1)]  # one pair past the limit goes alone
