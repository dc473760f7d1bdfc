"""The GPU smoke test (marker ``gpu``): the model judge on CUDA scores what it scores on the CPU.

Skips without CUDA, so it costs nothing in the default suite; on a machine with a GPU run
``python -m pytest -m gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from equiv.prune import ModelJudge
from tests.helpers.judges import make_tiny_judge

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

PAIRS = [
    ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "Janet sells 16 - 7 = <<16-7=9>>9 eggs."),
    ("The robe needs 2 bolts of blue fiber.", "It takes 2 / 2 = <<2/2=1>>1 bolt of white fiber."),
    ("So the answer is 18.", "Therefore she makes 9 * 2 = $<<9*2=18>>18 every day."),
]


def test_model_judge_on_cuda_matches_the_cpu(tmp_path: Path) -> None:
    judge_dir = make_tiny_judge(tmp_path / "judge")
    cpu = ModelJudge(judge_dir, prefilter=0.0, device="cpu", dtype="float32").pair_probabilities(PAIRS)
    gpu = ModelJudge(judge_dir, prefilter=0.0, device="cuda", dtype="float32")
    assert next(gpu.model.parameters()).device.type == "cuda"
    assert gpu.pair_probabilities(PAIRS) == pytest.approx(cpu, abs=1e-4)
    assert gpu.stats.scored == len(PAIRS)
