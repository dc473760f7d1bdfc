"""The hybrid judge: combiner fitting, its stored form, and the strategy built from an export."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from equiv.errors import InputError
from equiv.judge.hybrid import (
    FEATURES,
    Combiner,
    attach_combiner,
    fit_combiner,
    fit_logistic,
    pair_features,
    problem_folds,
)
from equiv.prune import HybridJudge, ModelJudge, PrunerConfig, build_judge
from equiv.prune.loading import stored_judge_kind
from tests.helpers.judges import make_tiny_judge

AGREE = ("He pays 5*6 = <<5*6=30>>30 dollars.", "So the total is 6*5 = <<6*5=30>>30 dollars.")
DISAGREE = ("He pays 5*6 = <<5*6=30>>30 dollars.", "He pays 5+6 = <<5+6=11>>11 dollars.")
PROSE = ("Let x be the number of apples.", "Let a be the number of apples she has.")


def test_pair_features_read_formulas_and_fall_back_to_zero_for_prose():
    agree, disagree, prose = (pair_features(a, b, 0.5) for a, b in (AGREE, DISAGREE, PROSE))
    names = dict(zip(FEATURES, agree))
    assert names["model_logit"] == 0.0 and names["formulas_agree"] == 1.0 and names["formulas_both"] == 1.0
    assert dict(zip(FEATURES, disagree))["formulas_agree"] == 0.0
    assert dict(zip(FEATURES, disagree))["formulas_both"] == 1.0
    assert prose[1:4] == [0.0, 0.0, 0.0]  # no formulas: the model's logit and the ratio decide
    assert pair_features(*AGREE, 1.0)[0] == pytest.approx(math.log((1 - 1e-6) / 1e-6))  # clipped, finite


def test_fit_logistic_reaches_the_regularised_optimum():
    torch.manual_seed(0)
    x = torch.randn(200, 3, dtype=torch.float64)
    y = (x @ torch.tensor([2.0, -1.0, 0.0], dtype=torch.float64) + 0.3 * torch.randn(200, dtype=torch.float64) > 0).double()
    weights, bias = fit_logistic(x.tolist(), y.int().tolist(), l2=1.0)
    w = torch.tensor(weights, dtype=torch.float64)
    p = torch.sigmoid(x @ w + bias)
    # stationarity: X^T (p - y) + l2 * w = 0 and sum(p - y) = 0 (the bias is unpenalised)
    assert torch.allclose(x.T @ (p - y) + w, torch.zeros(3, dtype=torch.float64), atol=1e-4)
    assert float((p - y).sum()) == pytest.approx(0.0, abs=1e-4)
    assert weights[0] > 0 > weights[1]


def test_problem_folds_never_split_a_problem():
    groups = [f"p{i % 7}" for i in range(40)]
    folds = problem_folds(groups, 5)
    assert sorted(i for f in folds for i in f) == list(range(40))
    for a in folds:
        for b in folds:
            if a is not b:
                assert not {groups[i] for i in a} & {groups[i] for i in b}


def test_fit_combiner_learns_the_rule_and_thresholds_out_of_fold():
    # label = formulas agree, except where the model is confident; model logit is noise here
    rows, labels, groups = [], [], []
    for i in range(60):
        agree = i % 2
        rows.append([0.1 * ((i * 7) % 5 - 2), float(agree), 1.0, 0.0, 0.8])
        labels.append(agree)
        groups.append(f"q{i // 3}")
    fit = fit_combiner(rows, labels, groups)
    weights = dict(zip(FEATURES, fit.combiner.weights))
    assert weights["formulas_agree"] > 2 * abs(weights["model_logit"])
    assert fit.f1 == 1.0 and fit.pairs == 60
    assert 0.0 < fit.combiner.threshold < 1.0
    with pytest.raises(InputError, match="both equivalent and non-equivalent"):
        fit_combiner(rows, [1] * 60, groups)


def test_combiner_round_trips_and_rejects_what_it_cannot_read():
    c = Combiner((0.5, 2.0, -1.0, 0.3, 0.6), -1.2, 0.42)
    assert Combiner.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    bad = [
        (dict(c.to_dict(), features=["model_logit"]), "features"),
        (dict(c.to_dict(), weights=[1.0, 2.0]), "weights"),
        (dict(c.to_dict(), weights=[float("nan")] * 5), "weights"),
        (dict(c.to_dict(), threshold=1.5), "threshold"),
        (dict(c.to_dict(), bias="x"), "bias"),
        ([], "equiv.hybrid"),
    ]
    for block, field in bad:
        with pytest.raises(InputError) as err:
            Combiner.from_dict(block, source="j/config.json")
        assert field in str(err.value) and "j/config.json" in str(err.value)


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory) -> Path:
    out = make_tiny_judge(tmp_path_factory.mktemp("hybrid") / "export")
    pairs = [AGREE, DISAGREE, PROSE, (AGREE[1], DISAGREE[1]), (DISAGREE[0], PROSE[0]), (AGREE[0], AGREE[0] + " ")] * 3
    labels = [1, 0, 1, 0, 0, 1] * 3
    groups = [f"g{i}" for i in range(len(pairs))]
    attach_combiner(out, pairs, labels, groups)
    return out


def test_attach_stores_the_combiner_and_keeps_the_raw_threshold(hybrid_dir):
    settings = json.loads((hybrid_dir / "config.json").read_text())["equiv"]
    assert settings["decision_threshold"] == 0.5  # the plain classifier's threshold is untouched
    block = settings["hybrid"]
    assert block["features"] == list(FEATURES) and len(block["weights"]) == len(FEATURES)
    assert set(block["calibration"]) == {"precision", "recall", "f1", "pairs"}
    assert stored_judge_kind(hybrid_dir) == "hybrid"


def test_model_strategy_builds_the_kind_the_export_stores(hybrid_dir, tmp_path):
    judge = build_judge(PrunerConfig(strategy="model", model=str(hybrid_dir), device="cpu"))
    assert isinstance(judge, HybridJudge) and judge.name == "hybrid"
    assert judge.threshold == json.loads((hybrid_dir / "config.json").read_text())["equiv"]["hybrid"]["threshold"]
    assert judge.raw_threshold == 0.5 and judge.learned
    assert judge.describe()["strategy"] == "hybrid"
    plain = make_tiny_judge(tmp_path / "plain")
    assert type(build_judge(PrunerConfig(strategy="model", model=str(plain), device="cpu"))) is ModelJudge
    with pytest.raises(InputError, match="no hybrid combiner"):
        build_judge(PrunerConfig(strategy="hybrid", model=str(plain)))
    given = build_judge(PrunerConfig(strategy="hybrid", model=str(hybrid_dir), threshold=0.9, prefilter=0.0, device="cpu"))
    assert (given.threshold, given.prefilter, given.raw_threshold) == (0.9, 0.0, 0.5)


def test_hybrid_probabilities_are_the_combiner_over_the_model_with_the_same_checks(hybrid_dir):
    hybrid = HybridJudge(hybrid_dir, device="cpu")
    raw = ModelJudge(hybrid_dir, device="cpu")
    far = (AGREE[0], "The robe needs 3 bolts of blue fiber.")  # ratio <= prefilter 0.6
    same = ("x =  5", "x = 5")
    asked = [AGREE, DISAGREE, PROSE, far, same, (AGREE[1], AGREE[0])]
    probs = hybrid.pair_probabilities(asked)
    raw_probs = raw.pair_probabilities(asked)
    for (a, b), p, r in list(zip(asked, probs, raw_probs))[:3]:
        assert p == pytest.approx(hybrid.combiner.probabilities([pair_features(a, b, r)])[0], abs=1e-9)
    assert probs[3] == 0.0 and probs[4] == 1.0  # prefilter and whitespace shortcut, as for model
    assert probs[5] == probs[0]  # one cached judgement per unordered pair
    s = hybrid.stats
    assert (s.pairs, s.cache_hits, s.exact, s.prefiltered, s.scored) == (6, 1, 1, 1, 3)
    assert s.forward_batches == raw.stats.forward_batches == 1


def test_pairs_cli_uses_the_stored_hybrid(hybrid_dir, tmp_path, capsys):
    from equiv.prune.cli import pairs_main as main

    data = tmp_path / "pairs.jsonl"
    rows = [{"sentence1": a, "sentence2": b, "result": y} for (a, b), y in ((AGREE, 4), (DISAGREE, 0), (PROSE, 3))]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--strategy", "model", "--model", str(hybrid_dir), "--data", str(data), "--output", str(tmp_path / "o.json")]) == 0
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["strategy"] == "hybrid" and out["threshold_source"] == "default"
    assert out["threshold"] == json.loads((hybrid_dir / "config.json").read_text())["equiv"]["hybrid"]["threshold"]
