"""configs/em.yaml and configs/trainer/*.yaml parse with the real CLI and compose with recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from equiv.judge.cli import main
from equiv.judge.em_callback import EMRefinementCallback, autocast_dtype_for

REPO = Path(__file__).resolve().parents[1]
EM_CLASS = "equiv.judge.em_callback.EMRefinementCallback"


def resolved(capsys, monkeypatch, *configs: str, extra: tuple[str, ...] = ()) -> dict:
    monkeypatch.chdir(REPO)
    args = ["fit"]
    for config in configs:
        args += ["--config", config]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, *extra, "--print_config"])
    assert exit_info.value.code in (0, None)
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize("recipe", ["configs/demo.yaml", "configs/gsm8k_equiv.yaml", "configs/longformer_mathequiv.yaml"])
def test_em_config_layers_on_every_trainer_recipe(recipe, capsys, monkeypatch) -> None:
    config = resolved(capsys, monkeypatch, recipe, "configs/em.yaml")
    trainer = config["trainer"]
    assert trainer["reload_dataloaders_every_n_epochs"] == 1
    (em,) = [c for c in trainer["callbacks"] if c["class_path"] == EM_CLASS]
    args = em["init_args"]
    assert args["threshold"] == 0.9 and args["pairing"] == "greedy" and args["refine_labels"] == [0]
    assert args["start_after_epoch"] == 0 and args["max_sentences"] == 8 and args["cumulative"] is False
    # Without the EM config the same recipe has no EM callback: the one switch.
    plain = resolved(capsys, monkeypatch, recipe)
    assert EM_CLASS not in str(plain["trainer"].get("callbacks"))


def test_em_config_appends_to_existing_callbacks(tmp_path, capsys, monkeypatch) -> None:
    other = tmp_path / "lr.yaml"
    other.write_text(
        "trainer:\n  callbacks:\n    - class_path: lightning.pytorch.callbacks.LearningRateMonitor\n",
        encoding="utf-8",
    )
    config = resolved(capsys, monkeypatch, "configs/demo.yaml", str(other), "configs/em.yaml")
    paths = [c["class_path"] for c in config["trainer"]["callbacks"]]
    assert paths == ["lightning.pytorch.callbacks.LearningRateMonitor", EM_CLASS]


@pytest.mark.parametrize("name, backend", [("ddp_cpu", "gloo"), ("ddp_gpu", "nccl")])
def test_ddp_trainer_configs_parse(name, backend, capsys, monkeypatch) -> None:
    config = resolved(capsys, monkeypatch, "configs/demo.yaml", f"configs/trainer/{name}.yaml", "configs/em.yaml")
    trainer = config["trainer"]
    assert trainer["strategy"]["class_path"] == "lightning.pytorch.strategies.DDPStrategy"
    assert trainer["strategy"]["init_args"]["process_group_backend"] == backend
    assert "num_nodes" in trainer and trainer["devices"] in (2, -1)


def test_bad_em_value_is_a_parse_error_naming_the_key(tmp_path, capsys, monkeypatch) -> None:
    bad = tmp_path / "em_bad.yaml"
    bad.write_text((REPO / "configs" / "em.yaml").read_text().replace("threshold: 0.9 ", "threshold: 1.5 "), encoding="utf-8")
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "configs/demo.yaml", "--config", str(bad), "--print_config"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "threshold" in err and "1.5" in err


def test_precision_to_autocast_dtype() -> None:
    assert autocast_dtype_for("bf16-mixed") is torch.bfloat16
    assert autocast_dtype_for("16-mixed") is torch.float16
    assert autocast_dtype_for("32-true") is None
    assert autocast_dtype_for("bf16-true") is None  # weights already bf16: no autocast needed


def test_callback_validates_direct_construction() -> None:
    from equiv.errors import InputError

    with pytest.raises(InputError):
        EMRefinementCallback(threshold=1.0)
    with pytest.raises(InputError):
        EMRefinementCallback(every_n_epochs=0)
