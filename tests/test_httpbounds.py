"""equiv/httpbounds.py on its own: the cap counts decoded bytes exactly, a well-formed gzip answer
still reads as its plain body (hosted APIs compress), through both transports, against a real
server on loopback."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx
import pytest

from equiv.httpbounds import AnswerTooLarge, BoundedTransport, CappedBody, bounded_async_transport
from tests.helpers.hostile_http import send, serving


@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_the_cap_counts_decoded_bytes_exactly(encoding):
    for size, fits in ((1000, True), (1001, False)):
        data = b"x" * size
        body = CappedBody(encoding, 1000, "http://s")
        wire = gzip.compress(data) if encoding else data
        if fits:
            for i in range(0, len(wire), 7):  # chunk by chunk, as it arrives
                body.feed(wire[i:i + 7])
            assert body.content() == data
        else:
            with pytest.raises(AnswerTooLarge, match="http://s answered more than 1,000 bytes"):
                for i in range(0, len(wire), 7):
                    body.feed(wire[i:i + 7])
                body.content()


def test_a_body_its_encoding_cannot_decode_is_refused():
    with pytest.raises(AnswerTooLarge, match="cannot decode"):
        body = CappedBody("gzip", 1000, "http://s")
        body.feed(b"not gzip at all")
        body.content()


def _gzip_answer(handler, _):
    send(handler, 200, gzip.compress(json.dumps({"ok": True}).encode()), {"Content-Encoding": "gzip"})


def test_a_gzip_answer_reads_as_its_plain_body_through_both_transports():
    with serving(_gzip_answer) as (url, asked):
        with httpx.Client(transport=BoundedTransport(timeout=10, max_bytes=1000)) as http:
            response = http.get(url + "/x")
            assert response.json() == {"ok": True} and "content-encoding" not in response.headers

        async def ask() -> httpx.Response:
            async with httpx.AsyncClient(transport=bounded_async_transport(httpx, timeout=10, max_bytes=1000)) as http:
                return await http.get(url + "/y")

        response = asyncio.run(ask())
        assert response.json() == {"ok": True} and "content-encoding" not in response.headers
    assert asked == ["/x", "/y"]
