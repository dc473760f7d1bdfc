"""The one-line checks that settings share: every fraction (equiv.errors.check_fraction) and every fixed
choice (equiv.errors.check_choice)."""

import math

import pytest

from equiv.data.datamodule import MathEquivDataModule
from equiv.data.problems import load_problems
from equiv.errors import InputError, check_fraction
from equiv.rundir.siblings import sibling_pairs
from equiv.search.policies.prompts import resolve_format
from equiv.search.rewards.likelihood import LikelihoodReward, LogprobLedger


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 1, 1.0])
def test_a_fraction_in_the_closed_range_comes_back_as_a_float(value):
    out = check_fraction(value, "prefilter")
    assert out == float(value) and isinstance(out, float)


@pytest.mark.parametrize("value", [-0.01, 1.01, math.nan, math.inf, True, "0.5", None])
def test_anything_else_is_one_line_naming_the_field_and_file(value):
    with pytest.raises(InputError) as err:
        check_fraction(value, "scale.prm_gpu_memory_fraction", path="run.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("run.yaml: field 'scale.prm_gpu_memory_fraction': must be in [0, 1], got ")


def test_the_half_open_range_refuses_one():
    assert check_fraction(0.99, "calibration_fraction", closed=False) == 0.99
    with pytest.raises(InputError, match=r"field 'calibration_fraction': must be in \[0, 1\), got 1"):
        check_fraction(1.0, "calibration_fraction", closed=False)


@pytest.mark.parametrize(("build", "field"), [
    (lambda: MathEquivDataModule(train_fraction=1.5), "train_fraction"),
    (lambda: MathEquivDataModule(calibration_fraction=1.0), "calibration_fraction"),
    (lambda: sibling_pairs([], prefilter=1.0), "prefilter"),
])
def test_the_settings_that_share_it_say_which_field(build, field):
    with pytest.raises(InputError, match=f"field '{field}': must be in"):
        build()


@pytest.mark.parametrize("call, field, start", [
    pytest.param(lambda: LikelihoodReward(LogprobLedger(), scope="all"), "reward.options.scope",
                 "unknown scope 'all'; choose from ", id="scope"),
    pytest.param(lambda: LikelihoodReward(LogprobLedger(), transform="exp"), "reward.options.transform",
                 "unknown transform 'exp'; choose from ", id="transform"),
    pytest.param(lambda: resolve_format("chatml", "some/model"), "policy.prompt_format",
                 "unknown prompt format 'chatml'; choose from auto, ", id="prompt_format"),
    pytest.param(lambda: load_problems("gsm9k"), "data.dataset", "unknown dataset 'gsm9k'; choose from math500, gsm8k, ",
                 id="dataset"),
])
def test_a_choice_outside_its_values_is_one_line_naming_what_it_is_and_the_values(call, field, start):
    """Every fixed-choice setting goes through check_choice, which names the thing ("scope", not
    "value") and the field."""
    with pytest.raises(InputError) as err:
        call()
    assert err.value.field == field and err.value.message.startswith(start), str(err.value)
