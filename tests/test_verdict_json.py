"""One JSON form of a verdict (issue 67, item 2): ``Verdict.to_json`` writes it for every consumer
(the pair log, ``pairs --output``, predict, cross-validation's rows, the service), and
``verdict_from_json`` reads it back -- and the keys files written before it used (``prob``,
``prob_equivalent``, ``prediction``), so old files still read."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from equiv.errors import InputError
from equiv.judge.decide import Verdict, VerdictJSONError, verdict_from_json
from equiv.prune.yardstick import read_oof, row_score
from equiv.search.pairlog import notable_pairs
from tests.helpers.cli import search_cli

REPO = Path(__file__).resolve().parents[1]
FORM = {"probability", "merged", "reason", "model_call"}


@pytest.mark.parametrize("verdict", [
    Verdict(0.912345678, True, "threshold", model_call=True),
    Verdict(None, False, "guard:different_numbers", "12 vs 15"),
    Verdict(1.0, True, "identical"),
    Verdict(0.0, False, "prefiltered"),
])
def test_a_verdict_written_reads_back_as_itself(verdict):
    row = json.loads(json.dumps(verdict.to_json()))
    assert FORM <= set(row) and ("detail" in row) == bool(verdict.detail)
    assert verdict_from_json(row) == verdict


def test_old_files_still_read():
    # a pair log before the one form: "prob", the reason says whether the pair's verdict merged
    assert verdict_from_json({"kind": "kept_apart", "reason": "floor", "prob": 0.83, "threshold": 0.5}) == \
        Verdict(0.83, False, "floor")
    assert verdict_from_json({"kind": "merged", "reason": "restated", "prob": None}) == Verdict(None, True, "restated")
    # every merging reason reads as a merge without a "merged" field, aligned plans included
    assert verdict_from_json({"reason": "aligned_plan", "probability": None}) == Verdict(None, True, "aligned_plan")
    # the first pair logs had no reason: the probability against the row's threshold
    first = [json.loads(line) for line in (REPO / "tests/data/rundir_v1/pruned/judge_pairs.jsonl").read_text().splitlines()]
    read = [verdict_from_json(row) for row in first]
    assert [v.probability for v in read] == [row["prob"] for row in first]
    assert [v.merged for v in read] == [row["prob"] >= row["threshold"] for row in first]
    # predict before the one form: prob_equivalent, prediction 0/1, reason
    assert verdict_from_json({"sentence1": "a", "sentence2": "b", "result": 4, "prob_equivalent": 0.7,
                              "prediction": 1, "reason": "threshold"}) == Verdict(0.7, True, "threshold")
    # cross-validation's rows before it: prob and the judge's threshold
    assert verdict_from_json({"prob": 0.3, "threshold": 0.5, "raw_prob": 0.4}) == Verdict(0.3, False, "below_threshold")


@pytest.mark.parametrize("row, field", [
    ({"merged": True, "reason": "threshold"}, "probability"),
    ({"probability": 1.5, "merged": True}, "probability"),
    ({"probability": "0.5", "merged": True}, "probability"),
    ({"probability": 0.5}, "merged"),
    ({"probability": 0.5, "merged": "yes"}, "merged"),
    ({"probability": 0.5, "merged": True, "reason": 3}, "reason"),
    ({"probability": 0.5, "merged": True, "model_call": 1}, "model_call"),
])
def test_what_is_not_a_verdict_is_refused_naming_the_field(row, field):
    with pytest.raises(VerdictJSONError) as err:
        verdict_from_json(row)
    assert err.value.field == field


def test_the_pair_log_writes_the_one_form():
    family = [SimpleNamespace(id=10 + i, depth=2, text=f"s{i}") for i in range(3)]
    verdicts = {(0, 1): Verdict(0.9, True, "threshold", model_call=True),
                (0, 2): Verdict(None, False, "guard:extra_number", "5 on one side only")}
    rows = notable_pairs(family, verdicts, [0, 0, 2], 0.5)
    assert all(FORM <= set(row) and "prob" not in row for row in rows)
    assert [verdict_from_json(row) for row in rows] == list(verdicts.values())
    assert [row["kind"] for row in rows] == ["merged", "kept_apart"]


def test_pairs_output_writes_the_one_form(tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"sentence1": "He has 3 eggs.", "sentence2": "He has 3 eggs.", "result": 4},
        {"sentence1": "He has 3 eggs.", "sentence2": "The robe takes 2 bolts.", "result": 0}]), encoding="utf-8")
    out = tmp_path / "metrics.json"
    proc = search_cli("pairs", "--data", str(data), "--strategy", "levenshtein", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["pairs"]
    assert all(FORM <= set(row) for row in rows)
    assert [(v.merged, v.reason) for v in map(verdict_from_json, rows)] == [(True, "threshold"), (False, "below_threshold")]


def oof_row(**verdict: object) -> dict:
    return {"fold": 0, "part": "test", "label": 1, "threshold": 0.5, "raw_prob": 0.6, "raw_threshold": 0.5,
            "sentence1": "a", "sentence2": "b", **verdict}


def test_cross_validation_rows_old_and_new_read_alike(tmp_path):
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    new.write_text(json.dumps(oof_row(**Verdict(0.75, True, "threshold", model_call=True).to_json())) + "\n")
    old.write_text(json.dumps(oof_row(prob=0.75)) + "\n")
    assert row_score(read_oof(new)[0], "prob") == row_score(read_oof(old)[0], "prob") == 0.75
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(oof_row()) + "\n")
    with pytest.raises(InputError) as err:
        read_oof(bad)
    assert str(err.value) == f"{bad}:1: field 'probability': missing"
