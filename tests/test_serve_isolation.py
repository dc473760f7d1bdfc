"""One request's failure never fails the others of its batch (issue #53, item 3), without a
server: LitServe answers a whole batch with one error when decode_request, predict or
encode_response raises, so the judge's LitAPI must not raise for one request, and the middleware
turns that request's error answer into its own status. Marker ``serve`` (needs litserve)."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("litserve")

from equiv.prune.model_judge import ModelJudge  # noqa: E402
from equiv.serve import api as serve_api  # noqa: E402
from equiv.serve.api import JudgeAPI, RouteMiddleware  # noqa: E402
from equiv.serve.protocol import ERROR_KEY  # noqa: E402
from tests.helpers.judges import make_tiny_judge  # noqa: E402

pytestmark = pytest.mark.serve

GOOD = {"route": "verdicts", "pairs": [["3 + 4 = 7", "3+4 = 7"], ["She has 5.", "He has 6."]], "questions": None}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    judge = make_tiny_judge(tmp_path_factory.mktemp("j") / "judge")
    served = JudgeAPI(lambda device: ModelJudge(judge, device="cpu"))
    served.setup("cpu")
    return served


def _serve(api: JudgeAPI, requests: list[dict]) -> list[object]:
    """What LitServe's batched loop does with one batch."""
    decoded = [api.decode_request(r) for r in requests]
    return [api.encode_response(y) for y in api.unbatch(api.predict(api.batch(decoded)))]


def test_a_request_that_is_not_text_is_answered_alone_in_its_batch(api):
    bad = {"route": "verdicts", "pairs": [["3 + 4 = 7", "\ud800"]], "questions": None}
    alone = _serve(api, [GOOD])[0]
    answers = _serve(api, [GOOD, bad, GOOD, {"route": "nothing"}])
    assert answers[0] == answers[2] == alone and "verdicts" in alone
    assert answers[1][ERROR_KEY]["status"] == 400 and "pairs[0][1]" in answers[1][ERROR_KEY]["error"]
    assert answers[3][ERROR_KEY]["status"] == 400


def test_a_judge_that_fails_on_one_request_fails_that_request_only(api, monkeypatch):
    real = serve_api.JudgeAPI._answer

    def failing(self, batch):
        if any("boom" in a for r in batch for pair in r.get("pairs") or [] for a in pair):
            raise RuntimeError("the tokenizer refused\nsecond line")
        return real(self, batch)

    monkeypatch.setattr(serve_api.JudgeAPI, "_answer", failing)
    boom = {"route": "verdicts", "pairs": [["boom", "b"]], "questions": None}
    answers = _serve(api, [GOOD, boom, {"route": "metrics"}])
    assert "verdicts" in answers[0] and "requests" in answers[2]
    assert answers[1] == {ERROR_KEY: {"status": 500, "error": "the judge failed on this request: "
                                                             "RuntimeError: the tokenizer refused"}}


def test_the_middleware_answers_a_requests_error_with_its_own_status():
    async def worker(scope, receive, send):  # LitServe's answer: 200 and the error marker
        body = json.dumps({ERROR_KEY: {"status": 400, "error": "field 'x': bad"}}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body[:5], "more_body": True})
        await send({"type": "http.response.body", "body": body[5:]})

    async def run(app, path, payload):
        sent = []

        async def receive():
            return {"type": "http.request", "body": json.dumps(payload).encode(), "more_body": False}

        async def send(message):
            sent.append(message)

        await app({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send)
        return sent

    sent = asyncio.run(run(RouteMiddleware(worker, address="http://127.0.0.1:1"), "/verdicts", {"pairs": [["a", "b"]]}))
    assert sent[0]["status"] == 400 and json.loads(sent[1]["body"]) == {"error": "field 'x': bad"}


QUESTION = "Janet has 3 apples and buys 4 more. How many apples does she have?"
# one pair the guard decides (different results), one the model decides, one the shortcut does
ASKED = {"route": "verdicts", "pairs": [["She has 3 + 4 = 7 apples.", "She has 3 + 4 = 8 apples."],
                                        ["She buys 4 more apples.", "Janet buys 4 more apples."],
                                        ["3 + 4 = 7 apples.", "3+4 = 7 apples"]],
         "questions": [QUESTION] * 3, "score_ruled": False}


@pytest.fixture
def guarded(tmp_path):
    """A fresh worker (an empty cache) whose judge has the guard on and merges what the model scores."""
    from tests.helpers.judges import SETTINGS

    settings = {**SETTINGS, "prefilter_threshold": 0.05, "decision_threshold": 0.01,
                "policy": {"threshold": 0.01, "prefilter": 0.05, "guard": True}}
    judge = make_tiny_judge(tmp_path / "judge", settings=settings)
    served = JudgeAPI(lambda device: ModelJudge(judge, device="cpu"))
    served.setup("cpu")
    return served


@pytest.mark.parametrize("company", ["predict", "similarity", "score_ruled", "group"])
def test_a_requests_verdicts_do_not_depend_on_what_shares_its_batch(guarded, company):
    """Issue 67: ``score_ruled`` was decided for a whole LitServe batch, so a ``/predict`` sharing
    a remote search's ``/verdicts`` batch made the model score the pairs the guard had settled:
    their probability and ``model_call`` (the search's ``judge_calls``) then depended on who shared
    the batch. Each request's own setting now: the same answer alone and in company."""
    pair = ASKED["pairs"][0]
    other = {"predict": {"route": "predict", "pairs": [pair], "single": True},
             "similarity": {"route": "merge_model_inference", "pairs": [pair], "single": True,
                            "output_type": "similarity"},
             "score_ruled": {**ASKED, "score_ruled": True},
             "group": {"route": "group", "steps": pair, "question": QUESTION, "grouping": "greedy"}}[company]
    together = _serve(guarded, [ASKED, other])
    alone = _serve(guarded, [ASKED])[0]
    first = together[0]["verdicts"]
    assert first[0]["reason"].startswith("guard:") and first[0]["probability"] is None
    assert not first[0]["model_call"] and first[1]["model_call"]  # the guard's pair took no forward
    assert together[0] == alone
    assert _serve(guarded, [other])[0] == together[1]  # and the company's answer is its own too
