"""The one-line range check that every fraction setting shares (equiv.errors.check_fraction)."""

import math

import pytest

from equiv.data.datamodule import MathEquivDataModule
from equiv.errors import InputError, check_fraction
from equiv.rundir.siblings import sibling_pairs


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
