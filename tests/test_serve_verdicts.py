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
             ("She walks to the market today.", "Then add them up."),  # Levenshtein ratio under the prefilter
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
    assert result.grouping.classes == [[0, 1], [2]] and result.pairs == [(0, 1), (0, 2)]  # 2 is asked of 0 only
    every = group(judge, ["3 + 4 = 7 apples.", "3+4 = 7 apples", "She walks to the market today."], QUESTION,
                  mode="transitive")
    assert every.grouping.classes == [[0, 1], [2]] and every.pairs == [(0, 1), (0, 2), (1, 2)]


def test_greedy_group_asks_only_the_pairs_it_reads_and_groups_as_every_pair_did(judge):
    """Issue 66 hole 1: /group judged all n(n-1)/2 pairs though greedy grouping reads only each
    step against the representatives before it; the classes, representatives and probabilities
    are those of greedy grouping over every pair's verdict."""
    from equiv.prune.grouping import group_equivalent, sibling_pairs

    steps = ["3 + 4 = 7 apples."] * 12 + ["3+4 = 7 apples", "She walks to the market today.",
                                          "She has 3 + 4 = 8 apples.", "So she has 3 + 4 = 7 apples."] * 3
    result = group(judge, steps, QUESTION)
    every = sibling_pairs(len(steps))
    found = verdicts(judge, [(steps[i], steps[j]) for i, j in every], [QUESTION] * len(every))
    assert result.grouping == group_equivalent(len(steps), {p: v.merged for p, v in zip(every, found)},
                                               probs={p: v.probability for p, v in zip(every, found)})
    reps = result.grouping.representatives
    assert len(result.pairs) == sum(sum(r < j for r in reps) for j in range(len(steps)) if j not in reps) + \
        sum(sum(r < j for r in reps) for j in reps)  # each step against the representatives before it
    assert len(result.pairs) < len(every) // 4
    by_pair = dict(zip(every, found))
    assert all(i < j and v == by_pair[(i, j)] for (i, j), v in zip(result.pairs, result.verdicts))


def test_the_default_limits_bound_the_work_of_a_request_not_only_its_body():
    """Issue 66 hole 1: a 9 KB /group of 91 distinct steps (4,095 pairs) was inside the default
    limits and held the only worker for 105 s; 91 steps of 2,000 characters, 207 s. Refused
    (413) before any work, naming the limit and the setting that raises it."""
    wide = {"steps": [f"Step {i}: she buys {i} apples and {i + 1} pears." for i in range(91)]}
    with pytest.raises(RequestError) as refused:
        parse_request("group", wide)
    assert refused.value.status == 413 and "4095 pairs" in refused.value.message
    assert "--max_pairs" in refused.value.message and "\n" not in refused.value.message
    long = {"steps": [f"{i} " + "x" * 2000 for i in range(40)]}  # 780 pairs, but 40 x 2,000 characters
    with pytest.raises(RequestError) as refused:
        parse_request("group", long)
    assert refused.value.status == 413 and "--max_request_chars" in refused.value.message
    with pytest.raises(RequestError) as refused:
        parse_request("verdicts", {"pairs": [["x" * 10_000, "y" * 10_000]] * 101})
    assert refused.value.status == 413 and "--max_request_chars" in refused.value.message
    # what search's remote client sends (1,024 pairs of steps with their question) stays within them
    assert parse_request("verdicts", {"pairs": [["3 + 4 = 7 apples." * 10, "3+4 = 7 apples" * 10]] * 1024,
                                      "questions": [QUESTION * 4] * 1024})["route"] == "verdicts"
    # a long question sent with every pair counts once (the guard's number scans read it)
    assert parse_request("verdicts", {"pairs": [["3 + 4 = 7 apples." * 20, "3+4 = 7 apples" * 20]] * 1024,
                                      "questions": [QUESTION * 40] * 1024})["route"] == "verdicts"
    assert parse_request("group", {"steps": [f"step {i}" * 20 for i in range(45)], "question": QUESTION})


def test_a_body_is_capped_at_what_the_pair_limits_allow_and_counted_before_it_is_parsed():
    """Issue 66 hole 3: a 60 MB ``{"pairs": [[], [], ...]}`` (under the 64 MiB cap) was parsed
    whole (1.9 GB, seconds of the event loop) before the pair limit refused it."""
    empties = b'{"pairs": [' + b"[]," * 1_000_000 + b"[]]}"  # 3 MB, within the byte cap
    with pytest.raises(RequestError) as refused:
        decode_json(empties, Limits())
    assert refused.value.status == 413 and "--max_pairs" in refused.value.message
    assert Limits().body_limit < 16 * 1024 * 1024  # 2,000,000 characters and 1,024 pairs, as JSON
    with pytest.raises(RequestError) as refused:
        decode_json(b" " * (Limits().body_limit + 1), Limits())
    assert refused.value.status == 413 and "--max_request_chars" in refused.value.message
    # brackets and commas inside strings are text, not items
    texty = {"pairs": [["[" * 5000 + "," * 5000, "{" * 9000]] * 3}
    import json

    assert decode_json(json.dumps(texty).encode(), Limits()) == texty


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
    # a pair limit this wide lets the 200,000 brackets reach the parser (at the default, 413 by count)
    with pytest.raises(RequestError, match="malformed JSON") as refused:
        decode_json(raw, Limits(max_pairs=1_000_000))
    assert refused.value.status == 400
    with pytest.raises(RequestError) as refused:
        decode_json(raw, Limits())
    assert refused.value.status in (400, 413)


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
