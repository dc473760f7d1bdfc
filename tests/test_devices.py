"""equiv.devices: one meaning for ``device``/``dtype`` settings, clear errors (the layering rule
is checked in tests/test_architecture.py)."""

from __future__ import annotations

import pytest
import torch

from equiv.devices import padded_rows, resolve_autocast_dtype, resolve_device, resolve_load_dtype
from equiv.errors import InputError


def test_resolve_device():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(InputError, match="field 'policy.device': unknown device 'gpu0'"):
        resolve_device("gpu0", field="policy.device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_cuda_without_a_gpu_is_an_input_error():
    with pytest.raises(InputError, match="field 'reward.device'.*no CUDA GPU is visible"):
        resolve_device("cuda:0", field="reward.device")


def test_load_dtype():
    assert resolve_load_dtype("auto", "cpu") is torch.float32
    assert resolve_load_dtype("auto", torch.device("cpu")) is torch.float32
    assert resolve_load_dtype("auto", "cuda") == "auto"  # the checkpoint's own dtype
    assert resolve_load_dtype("bfloat16", "cpu") is torch.bfloat16
    assert resolve_load_dtype("fp16", "cpu") is torch.float16
    with pytest.raises(InputError, match="field 'policy.dtype': unknown dtype 'half'"):
        resolve_load_dtype("half", "cpu", field="policy.dtype")


def test_autocast_dtype():
    assert resolve_autocast_dtype("auto", "cpu") is None
    assert resolve_autocast_dtype("auto", "cuda:1") is torch.bfloat16
    assert resolve_autocast_dtype("float32", "cuda") is None
    assert resolve_autocast_dtype("bf16", "cpu") is torch.bfloat16
    with pytest.raises(InputError, match="field 'dtype'"):
        resolve_autocast_dtype("int8", "cpu")


def test_padded_rows_pads_on_either_side():
    ids, mask = padded_rows([[1, 2, 3], [4]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = padded_rows([[1, 2, 3], [4]], pad_id=9, side="left")
    assert ids.tolist() == [[1, 2, 3], [9, 9, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_policy_and_reward_configs_take_every_dtype_name_devices_knows():
    from equiv.devices import DTYPE_NAMES
    from equiv.search.policies import PolicyConfig
    from equiv.search.rewards import RewardConfig

    for name in ("auto", *DTYPE_NAMES, "bf16", "fp16", "fp32"):
        PolicyConfig(model="m", dtype=name).validate()
        RewardConfig(dtype=name).validate()
    with pytest.raises(InputError, match="field 'reward.dtype': unknown dtype 'half'"):
        RewardConfig(dtype="half").validate()
