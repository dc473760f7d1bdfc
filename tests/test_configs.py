"""Every YAML under configs/ is parsed, so no recipe can rot.

Trainer recipes go through the real CLI parser (``trainer_cli.py fit --config ... --print_config``:
parsing and validation, no model download); fragments (loggers, EM, DDP strategies) are composed
after the demo recipe. Search recipes go through ``search_cli.py eval``'s parser. The W&B sweep is
checked against the paper's search space and its parameters against the CLI.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pytest
import yaml

from equiv.judge.cli import main

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
ALL_YAML = sorted(p for p in itertools.chain(CONFIGS.rglob("*.yaml"), CONFIGS.rglob("*.yml")))
TRAINER_KEYS = {"trainer", "model", "data", "seed_everything", "ckpt_path", "checkpoint", "export_dir",
                "threshold_from_val", "guard",
                "floor", "plan_floor", "plan_items"}
SWEEPS = {"sweep_mathequiv.yaml"}


def kind_of(path: Path) -> str:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and data, f"{path} is empty or not a mapping"
    if path.name in SWEEPS or {"method", "parameters"} <= set(data):
        return "sweep"
    if path.parent.name == "search" or "search" in data or "algo" in data:
        return "search"
    keys = {k.rstrip("+") for k in data}
    assert keys <= TRAINER_KEYS, f"{path}: unknown top-level keys {sorted(keys - TRAINER_KEYS)}"
    # an overlay (em.yaml, gsm8k_equiv_seed1.yaml) names no training data
    return "recipe" if "train" in (data.get("data") or {}) else "fragment"


def print_config(capsys: pytest.CaptureFixture[str], *configs: str, extra: tuple[str, ...] = ()) -> dict:
    args = ["fit"]
    for config in configs:
        args += ["--config", config]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, *extra, "--print_config"])
    assert exit_info.value.code in (0, None), capsys.readouterr().err
    return yaml.safe_load(capsys.readouterr().out)


def test_configs_exist() -> None:
    names = {p.relative_to(CONFIGS).as_posix() for p in ALL_YAML}
    for required in ["demo.yaml", "gsm8k_equiv.yaml", "longformer_mathequiv.yaml", "sweep_mathequiv.yaml",
                     "logger/csv.yaml", "logger/wandb_offline.yaml", "logger/wandb_online.yaml"]:  # fmt: skip
        assert required in names


@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: p.relative_to(CONFIGS).as_posix())
def test_every_yaml_parses(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kind = kind_of(path)
    rel = path.relative_to(REPO).as_posix()
    if kind == "recipe":
        config = print_config(capsys, rel)
        # Validation data: a file, or a calibration split held out of the training problems.
        assert config["model"]["model_name"] and config["data"]["train"]
        assert config["data"]["val"] or config["data"]["calibration_fraction"] > 0
        assert config["checkpoint"]["monitor"] == "val/f1" and config["checkpoint"]["mode"] == "max"
    elif kind == "fragment":
        config = print_config(capsys, "configs/demo.yaml", rel)
        assert config["model"]["model_name"] == "bundled:all-MiniLM-L6-v2"
    elif kind == "search":
        _eval_parser().parse_args(["--config", str(path)])
    else:
        check_sweep(path, capsys)


@functools.cache
def _eval_parser():
    """``search_cli.py eval``'s parser, built once for the search recipes (a parse leaves it as it was)."""
    from equiv.search.cli import build_eval_parser

    return build_eval_parser()


def check_sweep(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert sweep["method"] == "bayes"
    assert sweep["metric"] == {"name": "val/f1", "goal": "maximize"}
    assert sweep["run_cap"] == 10
    params = sweep["parameters"]
    lr = params["model.learning_rate"]
    assert lr["distribution"] == "log_uniform_values" and float(lr["min"]) == 1e-6 and float(lr["max"]) == 5e-5
    assert params["trainer.max_epochs"]["values"] == [2, 3, 5]
    wd = params["model.weight_decay"]
    assert wd["distribution"] == "uniform" and float(wd["min"]) == 0.0 and float(wd["max"]) == 0.1
    command = sweep["command"]
    recipe = command[command.index("--config") + 1]
    # The agent passes ${args} as --name=value: each sampled parameter must be a CLI option.
    values = {"model.learning_rate": "1e-5", "trainer.max_epochs": "3", "model.weight_decay": "0.05"}
    config = print_config(capsys, recipe, extra=tuple(f"--{k}={v}" for k, v in values.items()))
    assert config["model"]["learning_rate"] == 1e-5 and config["trainer"]["max_epochs"] == 3


def test_several_configs_compose_and_links_hold(capsys: pytest.CaptureFixture[str]) -> None:
    config = print_config(capsys, "configs/demo.yaml", "configs/logger/wandb_offline.yaml", extra=("--data.batch_size=5",))
    assert config["model"]["learning_rate"] == 1e-4  # from the first file, untouched by the second
    assert config["trainer"]["logger"]["class_path"].endswith("WandbLogger")
    assert config["trainer"]["logger"]["init_args"]["offline"] is True
    assert config["data"]["batch_size"] == 5


def test_links_reach_the_instantiated_objects(tmp_path: Path) -> None:
    from equiv.judge.cli import JudgeCLI
    from equiv.judge.tiny import build_tiny_longformer

    tiny = build_tiny_longformer(tmp_path / "tiny")
    cli = JudgeCLI(
        args=["--config", "configs/demo.yaml", f"--model.model_name={tiny}", "--model.max_length=96",
              "--data.batch_size=5", "--data.label_equivalent=[4]", "--data.label_not_equivalent=[0]",
              "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}"],
        run=False,
    )  # fmt: skip
    assert cli.datamodule.model_name == cli.model.model_name == str(tiny)
    assert cli.datamodule.max_length == cli.model.max_length == 96
    assert cli.model.hparams.batch_size == 5
    assert cli.model.label_mapping == cli.datamodule.label_mapping
    assert cli.model.label_mapping.to_dict() == {"equivalent": [4], "not_equivalent": [0]}


def test_paper_recipe_matches_the_paper(capsys: pytest.CaptureFixture[str]) -> None:
    config = print_config(capsys, "configs/longformer_mathequiv.yaml")
    assert config["model"]["model_name"] == "allenai/longformer-base-4096"
    assert config["data"]["train"] == "Jiawei1222/MathEquiv" and config["data"]["hub_config"] == "{split}"
    assert config["data"]["batch_size"] == 4
    assert config["trainer"]["precision"] == "bf16-mixed"
    assert config["trainer"]["logger"]["class_path"].endswith("WandbLogger")
    assert 1e-6 <= config["model"]["learning_rate"] <= 5e-5 and 0 <= config["model"]["weight_decay"] <= 0.1
    assert config["model"]["warmup_ratio"] > 0
