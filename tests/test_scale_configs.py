"""Every multi-GPU / Ray recipe parses, validates, and yields a placement that fits its GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from equiv.search.placement import plan_placement

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted((REPO / "configs" / "search").glob("ray_*.yaml"))
GPUS = {"ray_node8gpu": 8, "ray_cluster": 16}


def test_there_are_scale_recipes():
    names = {p.stem for p in RECIPES}
    assert any(n.startswith("ray_node8gpu_mcts") for n in names)
    assert any(n.startswith("ray_cluster") for n in names)
    assert any("_tp" in n for n in names)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_scale_recipe_parses_and_places(recipe):
    from equiv.search.cli import build_eval_parser

    parser = build_eval_parser()
    init = parser.instantiate(parser.parse_args(["--config", str(recipe)]))
    init.scale.validate()
    assert init.scale.distributed
    gpus = next(v for k, v in GPUS.items() if recipe.stem.startswith(k))
    tp = init.policy.tensor_parallel_size
    placement = plan_placement(init.scale, gpus_available=gpus, tensor_parallel_size=tp)
    assert placement.num_gpus == tp and init.scale.workers * tp == gpus  # every GPU used, none oversubscribed
    # the policy's own setting agrees with the split the workers will apply
    assert init.policy.gpu_memory_utilization == placement.policy_gpu_memory_utilization
