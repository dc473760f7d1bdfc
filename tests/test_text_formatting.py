"""``format_key``: formatting-only differences vanish, any change of content stays; the trained
judges decide formatting-equal pairs for free, the rules keep comparing whitespace only."""

from __future__ import annotations

import json

import pytest

from equiv.prune import ModelJudge
from equiv.text.formatting import format_key
from tests.helpers.judges import make_tiny_judge


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The tax comes out to 240000*.1=$<<240000*.1=24000.0>>24000",
         "The tax comes out to 240,000*.1=$<<240000*.1=24000.0>>24,000"),
        ("The total cost is 1090 + 157 = €<<1090+157=1247>>1247.", "The total cost is €1090 + €157 = €<<1090+157=1247>>1247"),
        ("So the grooming cost 100-30=$<<100-30=70.0>>70.0", "So the grooming cost 100 - 30 = $<<100-30=70>>70"),
        ("She needs 16*.75=<<16*.75=12.0>>12 gift bags.", "she needs 16 * .75 = <<16*.75=12.0>>12 gift bags"),
        ("2 x 8 = 16 boxes", "2*8=16 boxes"),
        ("It costs $12.50 in all.", "It costs 12.5 in all"),
        ("Half is 8 ÷ 2 = 4", "Half is 8/2=4"),
    ],
)
def test_formatting_only_differences_give_equal_keys(a, b):
    assert format_key(a) == format_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("He has 3*25=<<3*25=75>>75 roses", "He has 3*26=<<3*26=78>>78 roses"),  # a number
        ("He has 3*25=<<3*25=75>>75 roses", "He has 3+25=<<3+25=28>>28 roses"),  # an operator
        ("So he spends $110 on shoes a year", "So he spends $110 per pair"),  # a claim
        ("It costs 12.05 dollars", "It costs 12.5 dollars"),  # an inner zero is a digit
        ("The youngest son is 4 years old", "The youngest son washes 4 oranges"),
        ("It weighs 1,5 kg", "It weighs 15 kg"),  # not a thousands separator
    ],
)
def test_content_changes_keep_keys_apart(a, b):
    assert format_key(a) != format_key(b)


def test_trained_judges_decide_formatting_equal_pairs_for_free_rules_do_not(tmp_path):
    judge_dir = make_tiny_judge(tmp_path / "judge")
    config = json.loads((judge_dir / "config.json").read_text())
    config["equiv"]["prefilter_threshold"] = 0.0
    (judge_dir / "config.json").write_text(json.dumps(config))
    same = ("The tax is 240,000*.1=$24,000.", "The tax is 240000 * .1 = 24000")
    other = ("The tax is 240000*.1=24000", "The tax is 240000*.2=48000")
    judge = ModelJudge(judge_dir)
    verdicts = judge.pair_verdicts([same, other])
    v = verdicts[0]
    assert (v.probability, v.model_call, v.merged, v.reason) == (1.0, False, True, "identical")  # no forward: the shortcut
    assert verdicts[1].model_call
    assert (judge.stats.exact, judge.stats.scored) == (1, 1)
