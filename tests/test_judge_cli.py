"""trainer_cli.py end to end: one real process, W&B offline records, bad input, predict/validate/test.

The CLI runs in this process (``main(argv)``) except in the smoke test, which starts the script
itself, and the W&B test, whose offline run is finalised when its process exits."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.data.demo import DEMO_DIR, MULTIPLY_SAME, _facts
from equiv.judge.cli import main
from equiv.judge.decide import Verdict, verdict_from_json
from tests.helpers.cli import trainer_cli

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="offline", WANDB_SILENT="true")
    return subprocess.run(
        [sys.executable, "trainer_cli.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def separable_pairs(n: int, seed: int) -> list[dict]:
    """Half identical steps (level 4), half a step against an unrelated one (level 0)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        f = _facts(rng)
        step = MULTIPLY_SAME[0](f, rng)
        if i % 2 == 0:
            rows.append({"sentence1": step, "sentence2": step, "result": 4})
        else:
            g = _facts(rng)
            other = f"{g.name} reads {g.a + g.b} pages of a book about {g.item}."
            rows.append({"sentence1": step, "sentence2": other, "result": 0})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def wandb_history(run_dir: Path) -> list[dict[str, float]]:
    """History rows of an offline W&B run, read from its ``run-*.wandb`` record log."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = next(run_dir.glob("run-*.wandb")).read_bytes()
    assert data[:4] == b":W&B"
    rows, pos, block, buf = [], 7, 32768, b""
    while pos + 7 <= len(data):
        room = block - pos % block
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7]) if room >= 7 else (0, 0, 0)
        if room < 7 or (length == 0 and kind == 0):
            pos += room
            continue
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record or the last fragment of one
            record = pb.Record()
            record.ParseFromString(buf)
            buf = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item})
    return rows


@pytest.mark.slow  # a real fit process (about 9 s of CPU); the default suite runs fit in real processes in
# test_input_refusals (the logger save_dir test, short spelling) and in-process here
def test_fast_dev_run_subprocess_exports_a_judge(tiny_longformer: Path, tmp_path: Path) -> None:
    result = run_cli(
        "fit", "--config", "configs/demo.yaml",
        "--trainer.fast_dev_run=true", f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false",
        f"--model.model_name={tiny_longformer}", "--model.max_length=64",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"judge directory: {tmp_path / 'judge'}" in result.stdout
    assert "validation epoch: f1=" in result.stdout and "recall=" in result.stdout
    assert (tmp_path / "judge" / "config.json").exists() and (tmp_path / "judge" / "model.safetensors").exists()


@pytest.mark.slow  # a real MiniLM epoch: about a minute on 2 cores
def test_short_minilm_run_improves_f1_and_logs_to_wandb_offline(tmp_path: Path) -> None:
    import torch
    from lightning.pytorch import seed_everything
    from torchmetrics.functional.classification import binary_f1_score

    from equiv.judge.inference import score_pairs
    from equiv.judge.module import PairClassifier

    train = write_jsonl(tmp_path / "train.jsonl", separable_pairs(64, 1))
    val_rows = separable_pairs(32, 2)
    val = write_jsonl(tmp_path / "valid.jsonl", val_rows)
    # F1 before training: the same seeded initialisation the CLI makes (seed_everything: 42).
    seed_everything(42)
    untrained = PairClassifier(model_name="bundled:all-MiniLM-L6-v2", max_length=64)
    probs = score_pairs(untrained.model, untrained.tokenizer, [(r["sentence1"], r["sentence2"]) for r in val_rows], max_length=64)
    labels = torch.tensor([1 if r["result"] >= 3 else 0 for r in val_rows])
    f1_before = float(binary_f1_score(probs, labels))
    del untrained

    out = tmp_path / "out"
    result = run_cli(
        "fit", "--config", "configs/demo.yaml", "--config", "configs/logger/wandb_offline.yaml",
        f"--trainer.default_root_dir={out}", f"--trainer.logger.init_args.save_dir={out}",
        f"--data.train={train}", f"--data.val={val}", "--data.batch_size=8",
        "--trainer.max_epochs=1", "--trainer.val_check_interval=4", "--trainer.log_every_n_steps=2",
        "--trainer.enable_progress_bar=false", "--model.max_length=64", "--model.learning_rate=2e-4",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    history = wandb_history(next((out / "wandb").glob("offline-run-*")))
    val_f1 = [row["val/f1"] for row in history if "val/f1" in row]
    assert len(val_f1) == 2
    for key in ("val/accuracy", "val/precision", "val/recall", "val/f1_best", "val/loss"):
        assert any(key in row for row in history), key
    assert any("train/loss_step" in row for row in history)
    assert val_f1[-1] >= 0.8 and val_f1[-1] > f1_before + 0.15, (f1_before, val_f1)
    assert f"best validation epoch: f1={max(val_f1):.4f}" in result.stdout


def test_bad_data_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sentence1": "a", "sentence2": "b", "result": 3}) + "\n" + json.dumps({"sentence1": "a", "result": 1}) + "\n")
    result = trainer_cli("fit", "--config", "configs/demo.yaml", f"--data.train={bad}", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"error: {bad}:2: field 'sentence2': is missing"
    assert "Traceback" not in result.stderr


def test_unknown_option_exits_2() -> None:
    result = trainer_cli("fit", "--config", "configs/demo.yaml", "--model.no_such_option=1")
    assert result.returncode == 2
    assert "no_such_option" in result.stderr


BAD_CASES = {
    "malformed": ("{oops", "bad.jsonl:2: malformed JSON"),
    "missing_field": (json.dumps({"sentence1": "a", "result": 1}), "bad.jsonl:2: field 'sentence2': is missing"),
    "out_of_range": (json.dumps({"sentence1": "a", "sentence2": "b", "result": 7}), "bad.jsonl:2: field 'result': must be in 0-4"),
    "empty": (json.dumps({"sentence1": "", "sentence2": "b", "result": 1}), "bad.jsonl:2: field 'sentence1': is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_each_bad_input_case_through_the_cli(case: str, tiny_longformer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line, expected = BAD_CASES[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sentence1": "a", "sentence2": "b", "result": 3}) + "\n" + line + "\n")
    args = ["fit", "--config", "configs/demo.yaml", f"--data.train={bad}", "--trainer.logger=false",
            f"--trainer.default_root_dir={tmp_path}", f"--model.model_name={tiny_longformer}"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and expected in err


def test_missing_file_through_the_cli(tiny_longformer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["validate", "--config", "configs/demo.yaml", f"--data.val={tmp_path / 'none.jsonl'}", "--trainer.logger=false",
            f"--trainer.default_root_dir={tmp_path}", f"--model.model_name={tiny_longformer}"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().endswith("none.jsonl: file not found")


def test_skip_invalid_through_the_cli_reports_and_trains(tiny_longformer: Path, demo_val_small: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """(Validated on the 32-pair ``demo_val_small``: the export scores the validation file after
    the fit, and nothing here reads its figures.)"""
    rows = (DEMO_DIR / "train.jsonl").read_text().splitlines()[:40] + ["{oops", json.dumps({"sentence1": "a", "result": 9})]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(rows) + "\n")
    status = main(["fit", "--config", "configs/demo.yaml", f"--data.train={mixed}", "--data.skip_invalid=true",
                   "--trainer.fast_dev_run=true", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}",
                   f"--model.model_name={tiny_longformer}", "--model.max_length=64",
                   f"--data.val={demo_val_small}"])  # fmt: skip
    assert status == 0
    err = capsys.readouterr().err
    assert "mixed.jsonl: skipped 2 invalid record(s)" in err


def test_predict_validate_and_test_subcommands(tiny_longformer: Path, demo_val_small: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}",
              f"--model.model_name={tiny_longformer}", "--model.max_length=64", "--trainer.limit_val_batches=1",
              "--trainer.limit_test_batches=1", f"--data.val={demo_val_small}"]  # fmt: skip
    out = tmp_path / "preds.jsonl"
    assert main(["predict", *common, f"--data.predict={demo_val_small}", f"--predictions_out={out}"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    source = demo_val_small.read_text().splitlines()
    assert len(rows) == len(source)  # every record, level 2 included, in input order
    assert [r["sentence1"] for r in rows] == [json.loads(s)["sentence1"] for s in source]
    # each verdict in its one JSON form, decided by the one evaluator with the judge's policy
    assert all(0.0 <= r["probability"] <= 1.0 and isinstance(r["merged"], bool) for r in rows)
    assert all(r["merged"] == (r["reason"] in ("identical", "threshold")) for r in rows)
    assert [verdict_from_json(r) for r in rows] == [Verdict(r["probability"], r["merged"], r["reason"]) for r in rows]
    assert {r["reason"] for r in rows} <= {"identical", "prefiltered", "below_threshold", "threshold"}
    assert main(["validate", *common]) == 0
    assert main(["test", *common, f"--data.test={demo_val_small}"]) == 0
    printed = capsys.readouterr().out
    assert "val/f1" in printed and "test/f1" in printed


def test_resumed_fit_exports_the_metrics_of_the_exported_epoch(tiny_longformer: Path, demo_val_small: Path,
                                                                tmp_path: Path) -> None:
    """After ``fit --ckpt_path`` the exported metrics are those of the best checkpoint.

    With learning rate 0 every epoch scores the same F1, so the best checkpoint stays at epoch 0
    (ModelCheckpoint keeps the first of equal scores) while the resumed process validates epoch 1
    only; the export must still report epoch 0.
    """
    common = ["--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}",
              f"--model.model_name={tiny_longformer}", "--model.max_length=64", "--model.learning_rate=0",
              "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=2", "--checkpoint.save_last=true",
              "--trainer.enable_progress_bar=false", f"--export_dir={tmp_path / 'judge'}",
              f"--data.val={demo_val_small}"]  # fmt: skip
    assert main(["fit", *common, "--trainer.max_epochs=1"]) == 0
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert last.is_file()
    # the first fit's export is in the folder: resuming into it replaces it, so it is asked for
    assert main(["fit", *common, "--trainer.max_epochs=2", f"--ckpt_path={last}", "--overwrite=true"]) == 0
    best = list((tmp_path / "checkpoints").glob("best-epoch*.ckpt"))
    assert len(best) == 1 and best[0].name.startswith("best-epoch0-")
    exported = json.loads((tmp_path / "judge" / "equiv_metrics.json").read_text())
    assert exported["epoch"] == 0.0
    from equiv.judge.export import read_checkpoint

    stored = read_checkpoint(best[0])["equiv_val_metrics"]  # a real fit's checkpoint loads weights_only
    assert exported["f1"] == pytest.approx(stored["f1"]) and stored["epoch"] == 0.0


def _fit_with_a_calibration_split(tiny_longformer: Path, tmp_path: Path, *options: str) -> tuple[Path, Path]:
    """One short fit of the demo recipe on 48 separable pairs (24 problems of two pairs each), 30%
    of the problems held out as the calibration split; ``options`` decide the threshold. Returns
    the training file and the run directory (its export in ``judge``)."""
    rows = [dict(row, id=f"toy-{i // 2}-{i % 2}") for i, row in enumerate(separable_pairs(48, seed=3))]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "run"
    assert main(["fit", "--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={out}",
                 f"--model.model_name={tiny_longformer}", "--model.max_length=64", "--trainer.max_epochs=1",
                 "--trainer.limit_train_batches=2", "--trainer.enable_progress_bar=false", f"--data.train={train}",
                 "--data.val=null", "--data.calibration_fraction=0.3", *options,
                 f"--export_dir={out / 'judge'}"]) == 0  # fmt: skip
    return train, out


def test_threshold_from_calibration_split_is_exported_and_used_by_pairs(tiny_longformer: Path, tmp_path: Path) -> None:
    """fit --threshold_from_val stores the calibrated threshold; pairs applies it by default."""
    train, out = _fit_with_a_calibration_split(tiny_longformer, tmp_path, "--threshold_from_val=true")
    metrics = json.loads((out / "judge" / "equiv_metrics.json").read_text())
    config = json.loads((out / "judge" / "config.json").read_text())
    assert 0.0 < metrics["decision_threshold"] < 1.0
    assert config["equiv"]["policy"]["threshold"] == metrics["decision_threshold"]
    assert metrics["calibration_pairs"] < 48

    from equiv.prune.cli import build_parser, run_pairs

    args = build_parser().parse_args(["--data", str(train), "--strategy", "model", "--model", str(out / "judge")])
    result = run_pairs(args)
    assert result["threshold"] == metrics["decision_threshold"] and result["threshold_source"] == "default"


def test_without_threshold_from_val_fit_keeps_its_threshold_and_stores_the_split_at_it(tiny_longformer: Path,
                                                                                      tmp_path: Path) -> None:
    """No pick: the export keeps model.decision_threshold, and equiv_metrics.json still holds the
    calibration figures at it (with calibration_pairs, which the ensemble command checks members by)."""
    from equiv.judge.calibrate import fixed_threshold_summary
    from equiv.judge.members import score_judge_dir

    train, out = _fit_with_a_calibration_split(tiny_longformer, tmp_path, "--threshold_from_val=false",
                                               "--model.decision_threshold=0.37")
    metrics = json.loads((out / "judge" / "equiv_metrics.json").read_text())
    config = json.loads((out / "judge" / "config.json").read_text())
    assert config["equiv"]["policy"]["threshold"] == metrics["decision_threshold"] == 0.37
    from equiv.data.datamodule import MathEquivDataModule

    datamodule = MathEquivDataModule(train=str(train), calibration_fraction=0.3)
    datamodule.setup("validate")
    pairs, labels, _ = datamodule.labelled_pairs("val")
    assert 0 < metrics["calibration_pairs"] == len(labels) < 48
    expected = fixed_threshold_summary(score_judge_dir(out / "judge", pairs), labels, 0.37)
    assert metrics["calibration_f1"] == pytest.approx(expected["calibration_f1"])
    assert metrics["calibration_precision"] == pytest.approx(expected["calibration_precision"])


def test_fit_refuses_the_removed_hybrid_option(tmp_path: Path) -> None:
    """The hybrid combiner was removed in 2026-11: ``fit --hybrid`` is an error naming the option,
    before any fitting."""
    result = trainer_cli("fit", "--config", "configs/demo.yaml", "--hybrid=true",
                         f"--trainer.default_root_dir={tmp_path / 'run'}")
    assert result.returncode == 2 and "hybrid" in result.stderr
    assert not (tmp_path / "run").exists()


def test_fit_claim_guard_is_exported_on_thresholds_chosen_without_it(tiny_longformer: Path, tmp_path: Path) -> None:
    """fit --guard true stores the guard; the raw threshold is still the best one on the judge's
    own calibration scores (chosen with the vetoes applied it collapses towards 0 and the score stops
    mattering), the guard's effect at it is reported, and `--strategy model` applies it with each
    record's question."""
    from equiv.data.datamodule import split_by_problem
    from equiv.data.records import read_pair_records
    from equiv.judge.calibrate import binary_metrics, calibration_summary
    from equiv.judge.members import score_judge_dir
    from equiv.judge.decide import decide
    from equiv.judge.policy import policy_from_settings
    from equiv.text.guard import guard_veto

    rows = separable_pairs(48, seed=5)
    for i, row in enumerate(rows):
        row["id"] = f"toy-{i // 2}-{i % 2}"
        row["question"] = "How many pages are there?"
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    vetoed = sum(guard_veto(r["sentence1"], r["sentence2"], r["question"]) is not None for r in rows)
    assert 0 < vetoed < len(rows)  # the unrelated steps state other numbers
    out = tmp_path / "run"
    assert main(["fit", "--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={out}",
                 f"--model.model_name={tiny_longformer}", "--model.max_length=64", "--trainer.max_epochs=1",
                 "--trainer.limit_train_batches=2", "--trainer.enable_progress_bar=false", f"--data.train={train}",
                 "--data.val=null", "--data.calibration_fraction=0.3", "--threshold_from_val=true",
                 "--guard=true", "--floor=0.9", "--plan_floor=0.95", "--plan_items=0.85",
                 f"--export_dir={out / 'judge'}"]) == 0  # fmt: skip
    metrics = json.loads((out / "judge" / "equiv_metrics.json").read_text())
    settings = json.loads((out / "judge" / "config.json").read_text())["equiv"]
    policy = policy_from_settings(settings)  # the stored policy: every guard rule, the floor, the threshold
    assert policy.guard and policy.floor == 0.9 and policy.threshold == metrics["decision_threshold"]
    assert policy.plan_floor == 0.95 and policy.restate
    assert policy.plan_items == 0.85 and policy.paraphrase_model == "bundled:all-MiniLM-L6-v2"
    assert "guard_calibration_f1" in metrics and "hybrid_threshold" not in metrics

    # the stored threshold is the best F1 on the plain calibration scores, not on the guarded ones
    _, calibration = split_by_problem(read_pair_records(train)[0], 0.3)
    cal = [r for r in calibration if r.result in (0, 1, 3, 4)]
    labels = [int(r.result >= 3) for r in cal]
    probs = score_judge_dir(out / "judge", [(r.sentence1, r.sentence2) for r in cal])  # no prefilter, as fit scores
    vetoes = [guard_veto(r.sentence1, r.sentence2, r.extra["question"]) is not None for r in cal]
    plain = calibration_summary(probs, labels)
    guarded = calibration_summary([0.0 if v else p for p, v in zip(probs, vetoes)], labels)
    assert plain is not None and guarded is not None
    assert policy.threshold == pytest.approx(plain["decision_threshold"], abs=1e-5)
    assert plain["decision_threshold"] != pytest.approx(guarded["decision_threshold"], abs=1e-5)  # the test can tell
    # fit reports the stored policy, every stage in force, on its calibration split
    verdicts = decide([(r.sentence1, r.sentence2) for r in cal], policy, probs, [r.extra["question"] for r in cal])
    at_stored = binary_metrics([v.merged for v in verdicts], labels)
    assert metrics["policy_calibration_precision"] == pytest.approx(at_stored.precision, abs=1e-6)
    assert metrics["guard_calibration_precision"] == metrics["policy_calibration_precision"]
    assert metrics["guard_calibration_vetoes"] == sum(v.reason.startswith("guard:") for v in verdicts) > 0

    from equiv.prune.cli import build_parser, run_pairs

    result = run_pairs(build_parser().parse_args(["--data", str(train), "--strategy", "model", "--model", str(out / "judge")]))
    assert result["guard"] and result["judge_stats"]["guarded"] >= 0
    assert result["floor"] == 0.9
    # every vetoed pair is "not equivalent", whatever the model said
    assert result["fp"] + result["tp"] <= len(rows) - vetoed


@pytest.mark.parametrize(
    "option, expected",
    [
        ("--trainer.max_epochs=0", "error: field 'trainer.max_epochs': must be >= 1 (or -1: no limit), got 0"),
        ("--trainer.max_epochs=-3", "error: field 'trainer.max_epochs': must be >= 1 (or -1: no limit), got -3"),
        ("--trainer.max_steps=0", "error: field 'trainer.max_steps': must be >= 1 (or -1: no limit), got 0"),
        ("--model.learning_rate=-0.001", "error: field 'learning_rate': must be >= 0, got -0.001"),
        ("--model.weight_decay=-1", "error: field 'weight_decay': must be >= 0, got -1.0"),
        ("--floor=1.5", "error: field 'floor': must be in [0, 1], got 1.5"),
        ("--plan_floor=1.5", "error: field 'plan_floor': must be in [0, 1], got 1.5"),
        ("--plan_items=-0.5", "error: field 'plan_items': must be in [0, 1], got -0.5"),
        ("--plan_floor=0.9", "error: field 'plan_floor': a floor for numbered plans needs the statement floor (--floor) "
                             "beside it"),
    ],
)
def test_fit_settings_that_train_nothing_or_diverge_are_one_line(tmp_path: Path, option: str, expected: str) -> None:
    result = trainer_cli("fit", "--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}",
                         "--trainer.max_epochs=1", option)  # fmt: skip
    assert result.returncode == 2, result.stderr[-1500:]
    assert result.stderr.strip().splitlines()[-1].startswith(expected)
    assert "Traceback" not in result.stderr and not (tmp_path / "judge").exists()


@pytest.mark.parametrize("cli", ["trainer", "search"])
def test_config_errors_are_short_and_name_the_file(tmp_path: Path, cli: str) -> None:
    from tests.helpers.cli import search_cli

    bad = tmp_path / "recipe.yaml"
    bad.write_text("trainer:\n  max_epochs: [1\n" if cli == "trainer" else "search:\n  width: [1\n")
    run = trainer_cli if cli == "trainer" else lambda *a: search_cli("eval", *a)
    head = ("fit", "--config", "configs/demo.yaml") if cli == "trainer" else ("--algo", "sbs")
    result = run(*head, "--config", str(bad))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, lines[:5]
    assert lines[0].startswith(f"error: {bad}:") and "malformed YAML" in lines[0] and "<unicode string>" not in lines[0]
    # an option the parser rejects: the error alone, not the ~100-line usage before it
    option = "--trainer.max_epochz=1" if cli == "trainer" else "--search.widht=1"
    result = run(*head, option)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines[:5]
    assert option.split("=")[0] in lines[0] and "usage:" not in result.stderr


def test_predict_under_ddp_is_refused_in_one_line(tiny_longformer: Path, tmp_path: Path) -> None:
    """Each DDP rank predicts a share and only rank 0 wrote its own; refused before anything runs."""
    out = tmp_path / "preds.jsonl"
    result = trainer_cli("predict", "--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}",
                         f"--model.model_name={tiny_longformer}", "--model.max_length=64", "--trainer.accelerator=cpu",
                         "--trainer.strategy=ddp", "--trainer.devices=2", f"--data.predict={DEMO_DIR / 'valid.jsonl'}",
                         f"--predictions_out={out}")  # fmt: skip
    assert result.returncode == 2, result.stderr[-1500:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: field 'trainer.devices': predict runs in one process")
    assert not out.exists()


def test_only_the_named_subcommand_is_built(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`fit ...` builds the fit parser alone (start-up), while a command line that names no known
    subcommand still offers all four, so the error lists them."""
    from lightning.pytorch.cli import LightningCLI

    built: list[list[str]] = []
    add = LightningCLI._add_subcommands

    def recording(self, parser, **kwargs):  # type: ignore[no-untyped-def]
        built.append(list(self.subcommands()))
        return add(self, parser, **kwargs)

    monkeypatch.setattr(LightningCLI, "_add_subcommands", recording)
    with pytest.raises(SystemExit):
        main(["fit", "--config", "configs/demo.yaml", "--print_config"])
    assert "model_name" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "{fit,validate,test,predict}" in capsys.readouterr().out
    assert built == [["fit"], ["fit", "validate", "test", "predict"]]
    result = trainer_cli("fitt")
    assert result.returncode == 2 and "invalid choice: 'fitt' (choose from 'fit', 'validate', 'test', 'predict')" in result.stderr


@pytest.mark.parametrize("option", ["--threshold_f1_tolerance=0.005", "--threshold_target_precision=0.95"])
def test_fit_refuses_the_removed_threshold_picks(tmp_path: Path, option: str) -> None:
    """The f1-tolerance and target-precision picks were removed in 2026-11 (issue #45): the option
    is an error naming it, before any fitting; best F1 (``--threshold_from_val``) is the one pick."""
    result = trainer_cli("fit", "--config", "configs/demo.yaml", option, f"--trainer.default_root_dir={tmp_path / 'run'}")
    assert result.returncode == 2 and option.split("=")[0].lstrip("-") in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()
