"""The labeller's client is bounded in time and in size (issue 66, holes 5 and 11).

``search_cli.py label`` against small hostile servers on loopback (the official ``openai`` client,
the real command): ``--timeout`` bounds each HTTP request as a whole, so a server trickling its
answer a byte at a time costs the pair a failed try after ``--timeout`` seconds, not minutes; an
answer past the cap -- a long body, or a gzip bomb of 200 KB that inflates to 200 MB -- is
refused as it streams in, and is the pair's failed try, named in ``<out>.failed.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import search_cli
from tests.helpers.hostile_http import gzip_bomb, send, serving, trickle, within
from tests.helpers.openai_backoff import short_backoff

pytest.importorskip("openai")


def _label(tmp_path: Path, url: str, *extra: str):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p-1", "sentence1": "3 + 4 = 7", "sentence2": "4 + 3 = 7"}) + "\n")
    return search_cli("label", pairs, "--out", tmp_path / "labels.jsonl", "--model", "m", "--base_url", f"{url}/v1",
                      "--tries", "1", *extra)


def _failed_reasons(tmp_path: Path) -> list[str]:
    (row,) = [json.loads(line) for line in (tmp_path / "labels.failed.jsonl").read_text().splitlines()]
    return [raw["error"] for raw in row["label_raw"]]


def test_label_timeout_bounds_the_whole_request_not_each_read(tmp_path, monkeypatch):
    """Before: ``--timeout 5`` against a server trickling a byte every 2 s took 64 s per request
    (a per-read timeout that a trickle never trips); here a byte every 0.1 s of a 400-byte answer
    would hold each of the client's three tries for 40 s. Now each try ends at ``--timeout``
    (0.3 s: no single read waits that long). The openai client's back-off between its tries
    (0.5 s, then 1 s) is shortened here: it is the library's, not the bound under test."""
    short_backoff(monkeypatch)
    with serving(trickle(0.1)) as (url, asked):
        result = within(120, lambda: _label(tmp_path, url, "--timeout", "0.3"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert _failed_reasons(tmp_path) == ["the server timed out on this request"]
    assert len(asked) == 3  # the openai client's own two retries, each bounded the same way
    assert not (tmp_path / "labels.jsonl").read_text()


@pytest.mark.parametrize("bomb", [True, False], ids=["gzip-bomb", "long-body"])
def test_label_an_answer_past_the_cap_is_the_pairs_failed_try(tmp_path, bomb):
    """Before: a 102 KB gzip answer inflated to 100 MB (376 MB resident) before anyone looked at
    it. Now the answer is refused once it passes 8 MiB decoded, and never inflated further."""
    if bomb:
        body, headers = gzip_bomb(200 * 1024 * 1024), {"Content-Encoding": "gzip"}
    else:
        body, headers = b'{"choices": [], "pad": "' + b"x" * (9 * 1024 * 1024) + b'"}', {}
    with serving(lambda handler, _: send(handler, 200, body, headers)) as (url, asked):
        result = _label(tmp_path, url, "--timeout", "60")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (reason,) = _failed_reasons(tmp_path)
    assert "more than 8,388,608 bytes" in reason and "refused" in reason and url in reason
    assert len(asked) == 1  # not retried: the server would send it again


def test_label_an_encoding_that_was_not_asked_for_is_refused_not_inflated(tmp_path):
    """The client asks for gzip only; a body in another encoding (here a made-up one) would reach a
    decoder without a cap, so it is the pair's failed try."""
    with serving(lambda handler, _: send(handler, 200, b"\x00" * 64, {"Content-Encoding": "br"})) as (url, _):
        result = _label(tmp_path, url, "--timeout", "60")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (reason,) = _failed_reasons(tmp_path)
    assert "encoding 'br', which was not asked for" in reason
