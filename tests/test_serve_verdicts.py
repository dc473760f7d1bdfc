"""The service's two light parts, without a server: the one judge adapter (a verdict and the rule
that decided it, per pair, from a real tiny judge) and the request checks (no torch)."""

from __future__ import annotations

import pytest

from equiv.prune.model_judge import ModelJudge
from equiv.serve.protocol import Limits, RequestError, decode_json, parse_request
from equiv.serve.verdicts import group, verdicts
from tests.helpers.judges import SETTINGS, make_tiny_judge

QUESTION = "Janet has 3 apples and buys 4 more. How many apples does she have?"


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    # threshold 0.01: the model alone would merge every pair it scores, so each "no" below is a rule's
    settings = {**SETTINGS, "prefilter_threshold": 0.5, "decision_threshold": 0.01,
                "policy": {"threshold": 0.01, "prefilter": 0.5, "guard": True, "floor": 0.999}}
    return ModelJudge(make_tiny_judge(tmp_path_factory.mktemp("j") / "judge", settings=settings), device="cpu")


def test_each_verdict_names_the_rule_that_decided_it(judge):
    pairs = [("3 + 4 = 7 apples.", "3+4 = 7 apples"),          # the same step up to formatting
             ("3 + 4 = 7", "She walks to the market today."),  # Levenshtein ratio under the prefilter
             ("She has 3 + 4 = 7 apples.", "She has 3 + 4 = 8 apples."),  # different results: the guard
             ("She buys more apples.", "Janet buys more apples."),        # two statements: the floor
             ("She has 3 + 4 = 7 apples.", "So she has 3 + 4 = 7 apples.")]  # the model, over the threshold
    found = verdicts(judge, pairs, [QUESTION] * len(pairs))
    assert [v.reason for v in found] == ["identical", "prefiltered", "guard:different_numbers", "floor", "threshold"]
    assert [v.merged for v in found] == [True, False, False, False, True]
    assert [v.model_call for v in found] == [False, False, False, True, True]  # the guard decides before the model
    assert found[2].probability is None and found[2].detail
    asked = verdicts(judge, pairs, [QUESTION] * len(pairs), score_ruled=True)  # its probability, asked for
    assert asked[2].probability > judge.threshold and asked[2].model_call  # vetoed although the model would merge it
    assert [(v.merged, v.reason) for v in asked] == [(v.merged, v.reason) for v in found]
    # the same decisions search groups by: the judge's own verdicts
    assert [(v.merged, v.reason) for v in found] == [
        (v.merged, v.reason) for v in judge.pair_verdicts(pairs, [QUESTION] * len(pairs))]


def test_group_is_search_grouping_over_the_verdicts(judge):
    result = group(judge, ["3 + 4 = 7 apples.", "3+4 = 7 apples", "She walks to the market today."], QUESTION)
    assert result.grouping.classes == [[0, 1], [2]] and result.pairs == [(0, 1), (0, 2), (1, 2)]


@pytest.mark.parametrize("route, body, status, words", [
    ("group", {"steps": []}, 400, "'steps'"),
    ("group", {"steps": ["a"] * 100}, 413, "pairs"),
    ("verdicts", {"pairs": [["a", 1]]}, 400, "pairs[0][1]"),
    ("verdicts", {"pairs": [["x" * 30_000, "b"]]}, 413, "pairs[0][0]"),
    ("predict", {"inputs": []}, 400, "empty"),
    ("merge_model_inference", [], 400, "JSON object"),
])
def test_bad_requests_are_refused_with_one_line_naming_the_field(route, body, status, words):
    with pytest.raises(RequestError) as refused:
        parse_request(route, body, Limits(max_pairs=1000))
    assert refused.value.status == status and words in refused.value.message and "\n" not in refused.value.message


def test_malformed_json_is_a_400():
    with pytest.raises(RequestError, match="malformed JSON") as refused:
        decode_json(b'{"steps": [', Limits())
    assert refused.value.status == 400
    assert parse_request("predict", {"inputs": ["a", "b"]}) == {"route": "predict", "pairs": [["a", "b"]], "single": True}


@pytest.mark.parametrize("raw", [b"[" * 200_000, b'{"grouping": ' + b"9" * 5000 + b"}"], ids=["deep", "huge-int"])
def test_json_python_cannot_read_is_a_400_not_a_500(raw):
    with pytest.raises(RequestError, match="malformed JSON") as refused:
        decode_json(raw, Limits())
    assert refused.value.status == 400


def test_a_step_with_a_huge_number_is_judged_not_a_crash(judge):
    """A weak model's 23-digit (or 5,000-digit) number reached the guard's Decimal quantize and int()
    and raised; one such step must not fail a batch of other clients' pairs."""
    pairs = [("He has 12345678901234567890123 apples.", "He has 5 apples."),
             ("It is " + "9" * 5000 + "/" + "7" * 5000 + " of it.", "It is 3/7 of it.")]
    found = verdicts(judge, pairs, [QUESTION] * len(pairs))
    assert len(found) == 2 and all(isinstance(v.merged, bool) for v in found)



def test_requests_are_checked_by_pydantic_models_with_the_servers_limits():
    """The request shapes are pydantic models (issue #54 item 5): one line naming the first bad
    field by its place, with the count of the others; the limits are the server's settings
    (the validation context), not constants; ``output_type`` null is the server's default."""
    from equiv.serve.protocol import GroupRequest, MergeRequest, PredictRequest, VerdictsRequest

    with pytest.raises(RequestError) as refused:
        parse_request("verdicts", {"pairs": [["a", 1], [2, "b"]], "score_ruled": "yes"})
    assert refused.value.status == 400
    assert refused.value.message == "field 'pairs[0][1]': input should be a valid string, got 1 (and 2 more errors)"
    small = Limits(max_pairs=2, max_chars=5)
    for route, body, field in [("verdicts", {"pairs": [["a", "b"]] * 3}, "pairs"),
                               ("group", {"steps": ["a", "b", "c"]}, "steps"),
                               ("predict", {"inputs": ["abcdef", "b"]}, "inputs[0]"),
                               ("merge_model_inference", {"input_pairs": [["a", "b"], ["c", "abcdef"]]}, "input_pairs[1][1]")]:
        with pytest.raises(RequestError) as refused:
            parse_request(route, body, small)
        assert refused.value.status == 413 and refused.value.message.startswith(f"field '{field}': ")
        assert parse_request(route, body)["route"] == route  # within the default limits
    assert parse_request("merge_model_inference", {"input_pairs": ["a", "b"], "output_type": None},
                         default_output="similarity")["output_type"] == "similarity"
    assert {"pairs", "questions", "score_ruled"} <= set(VerdictsRequest.model_json_schema()["properties"])
    assert all(hasattr(m, "model_validate") for m in (GroupRequest, PredictRequest, MergeRequest))
