"""Ensemble judges: exported judges combined by their mean logit, calibrated on the calibration
split, and loaded by search exactly like one judge (``--strategy model``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.judge.ensemble import build_ensemble
from equiv.judge.ensemble import main as ensemble_main
from equiv.judge.members import average_logits, member_dirs, score_judge_dir
from equiv.prune import ModelJudge
from tests.helpers.cli import invoke
from tests.helpers.judges import SETTINGS, demo_search_argv, make_tiny_judge
from tests.test_judge_cli import separable_pairs, write_jsonl

REPO = Path(__file__).resolve().parents[1]
PAIRS = [("He earns 5*6=30 dollars.", "He works 5*6=30 times."), ("She has 3*25=75 roses", "She has 75 roses: 3*25=75")]
NO_PREFILTER = dict(SETTINGS, prefilter_threshold=0.0)


def _two_judges(root: Path) -> tuple[Path, Path]:
    plain = make_tiny_judge(root / "plain", settings=NO_PREFILTER, seed=0)
    marked = make_tiny_judge(root / "marked", settings=NO_PREFILTER, seed=1)  # another seed: other scores
    return plain, marked


@pytest.fixture()
def two_judges(tmp_path: Path) -> tuple[Path, Path]:
    """Two tiny judges of this test's own: for the tests that rewrite a member's config."""
    return _two_judges(tmp_path)


@pytest.fixture(scope="module")
def shared_judges(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same two judges built once for the module's tests that only read them (every ensemble
    they build, every file they write, goes to their own ``tmp_path``)."""
    return _two_judges(tmp_path_factory.mktemp("judges"))


def test_average_logits_is_the_sigmoid_of_the_mean_logit():
    assert average_logits([[0.9, 0.5], [0.9, 0.5]]) == pytest.approx([0.9, 0.5])
    expected = 1 / (1 + math.exp(-(math.log(9) + math.log(1 / 3)) / 2))  # logits of 0.9 and 0.25
    assert average_logits([[0.9], [0.25]]) == pytest.approx([expected])
    assert average_logits([]) == []


def test_model_judge_scores_an_ensemble_as_the_mean_logit_of_its_members(shared_judges, tmp_path):
    plain, marked = shared_judges
    ensemble = build_ensemble([plain, marked], tmp_path / "ensemble")
    assert member_dirs(ensemble) == [ensemble, ensemble / "members" / "1"]
    settings = json.loads((ensemble / "config.json").read_text())["equiv"]
    assert settings["members"] == ["members/1"]
    judge = ModelJudge(ensemble)
    assert len(judge.members) == 2
    each = [ModelJudge(plain).pair_probabilities(PAIRS), ModelJudge(marked).pair_probabilities(PAIRS)]
    assert each[0] != pytest.approx(each[1])
    assert judge.pair_probabilities(PAIRS) == pytest.approx(average_logits(each), abs=1e-6)
    assert judge.stats.scored == 2 and judge.stats.forward_batches == 2  # one batch per member
    assert score_judge_dir(ensemble, PAIRS) == pytest.approx(average_logits(each), abs=1e-6)
    assert judge.describe()["members"] == 2


def test_bad_ensembles_are_one_clear_error(shared_judges, tmp_path):
    plain, marked = shared_judges
    with pytest.raises(InputError, match="at least 2 members"):
        build_ensemble([plain], tmp_path / "one")
    other_mapping = make_tiny_judge(tmp_path / "other", settings=dict(SETTINGS, label_mapping={"equivalent": [4], "not_equivalent": [0, 1]}))
    with pytest.raises(InputError, match="different label mappings"):
        build_ensemble([plain, other_mapping], tmp_path / "mixed")
    ensemble = build_ensemble([plain, marked], tmp_path / "ensemble")
    with pytest.raises(InputError, match="not empty"):
        build_ensemble([plain, marked], ensemble)
    with pytest.raises(InputError, match="is an ensemble already"):
        build_ensemble([ensemble, plain], tmp_path / "nested")
    config = json.loads((ensemble / "config.json").read_text())
    config["equiv"]["members"] = ["members/7"]
    (ensemble / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="member 'members/7' is missing") as err:
        ModelJudge(ensemble)
    assert err.value.field == "equiv.members" and str(ensemble / "config.json") in str(err.value)


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


# The command's logic in process (the default suite); its own interpreter (`python -m`, about 10 s
# of imports on 2 cores) in the slow suite, as every other script's real-process run.
@pytest.mark.parametrize("how", ["in_process", pytest.param("python -m", marks=pytest.mark.slow)])
def test_the_ensemble_command_calibrates_and_pairs_uses_it(shared_judges, tmp_path, how):
    plain, marked = shared_judges
    rows = separable_pairs(40, seed=6)
    for i, row in enumerate(rows):
        row["id"] = f"toy-{i // 2}-{i % 2}"
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    config = tmp_path / "recipe.yaml"
    config.write_text(f"model:\n  max_length: 64\ndata:\n  train: {train}\n  calibration_fraction: 0.3\n  batch_size: 4\n")
    out = tmp_path / "ensemble"
    argv = ["--members", str(plain), str(marked), "--out", str(out), "--recipe", str(config)]
    done = invoke(ensemble_main, argv) if how == "in_process" else _run("-m", "equiv.judge.ensemble", *argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ensemble of 2 judges" in done.stdout and "hybrid" not in done.stdout
    settings = json.loads((out / "config.json").read_text())["equiv"]
    metrics = json.loads((out / "equiv_metrics.json").read_text())
    assert settings["policy"]["threshold"] == metrics["decision_threshold"] and "decision_threshold" not in settings
    assert "hybrid" not in settings and "hybrid_threshold" not in metrics
    assert metrics["members"] == 2 and 0 < metrics["calibration_pairs"] < len(rows)

    from equiv.prune.cli import build_parser, run_pairs

    result = run_pairs(build_parser().parse_args(["--data", str(train), "--strategy", "model", "--model", str(out)]))
    assert result["strategy"] == "model" and result["threshold"] == metrics["decision_threshold"]


def test_a_member_calibrated_on_another_split_is_refused(two_judges, tmp_path):
    plain, marked = two_judges
    (marked / "equiv_metrics.json").write_text(json.dumps({"calibration_pairs": 999}))
    train = write_jsonl(tmp_path / "train.jsonl", [dict(r, id=f"toy-{i // 2}-{i % 2}") for i, r in enumerate(separable_pairs(20, 7))])
    config = tmp_path / "recipe.yaml"
    config.write_text(f"data:\n  train: {train}\n  calibration_fraction: 0.3\n")
    # In process (the command's real-process run is the test above): the refusal is in main().
    done = invoke(ensemble_main, ["--members", plain, marked, "--out", tmp_path / "e", "--recipe", config])
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(marked) in lines[0] and "999" in lines[0] and "members" in lines[0]
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize(("key", "value"), [
    ("mark_differences", True),
    ("hybrid", {"features": ["model_logit"], "weights": [1.0], "bias": 0.0, "threshold": 0.5}),
    ("with_question", True),
])
def test_an_export_with_a_removed_lever_is_refused_in_one_line(two_judges, tmp_path, key, value):
    """``mark_differences`` and ``with_question`` changed what the classifier reads and ``hybrid``
    what its score means (all removed 2026-11): an export that turns one on, alone or as an ensemble member, is
    refused naming the file and the field; one that stores it switched off loads as before."""
    plain, marked = two_judges
    config = marked / "config.json"
    raw = json.loads(config.read_text())
    raw["equiv"][key] = False
    config.write_text(json.dumps(raw))
    assert len(ModelJudge(marked).pair_probabilities(PAIRS)) == 2
    raw["equiv"][key] = value
    config.write_text(json.dumps(raw))
    for build in (lambda: ModelJudge(marked), lambda: score_judge_dir(marked, PAIRS),
                  lambda: ModelJudge(build_ensemble([plain, marked], tmp_path / "ensemble"))):
        with pytest.raises(InputError) as err:
            build()
        assert "\n" not in str(err.value) and f"field 'equiv.{key}'" in str(err.value)
        assert "removed in 2026-11" in str(err.value) and "config.json" in str(err.value)


def test_search_eval_prunes_with_an_ensemble_unchanged(shared_judges, tmp_path, shared_data):
    """`search_cli.py eval --pruner.model <ensemble>`: the same strategy option as one judge; the
    run records the judge's stats with one forward batch per member."""
    from search_cli import main as search_main

    plain, marked = shared_judges
    ensemble = build_ensemble([plain, marked], tmp_path / "ensemble")
    one_judge = ModelJudge(ensemble)
    out = tmp_path / "run"
    # width 5: enough usable siblings that pairs reach the members (the tiny policy's steps are
    # often cut by the token limit)
    argv = demo_search_argv(shared_data / "gsm8k" / "test.jsonl", ensemble, out) + ["--search.width", "5"]
    assert search_main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pruner"] == "model" and len(one_judge.members) == 2
    stats = summary["judge_stats"]
    assert stats["scored"] > 0 and stats["forward_batches"] % 2 == 0  # each scoring call: a batch per member


def _two_seeds_and_a_recipe(tmp_path: Path, settings: dict, head: str) -> tuple[list[Path], Path, Path]:
    """Two tiny judges (seeds 0 and 1) and a recipe: ``head`` (its decision settings) over a data
    block of 40 separable pairs with a calibration split."""
    seeds = [make_tiny_judge(tmp_path / f"s{seed}", settings=settings, seed=seed) for seed in (0, 1)]
    rows = [dict(r, id=f"toy-{i // 2}-{i % 2}") for i, r in enumerate(separable_pairs(40, seed=6))]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    config = tmp_path / "recipe.yaml"
    config.write_text(f"{head}data:\n  train: {train}\n  calibration_fraction: 0.3\n")
    return seeds, config, train


def test_the_ensemble_chooses_its_threshold_as_the_recipes_fit_does(tmp_path):
    """A recipe with ``threshold_from_val`` (absent means on, for this command): the ensemble's
    threshold is the best F1 on the calibration split (as ``fit`` decides one judge's), and the
    members' claim guard and statement floor stay in force: two seeds of the GSM8K recipe averaged
    are the recommended judge. The removed picks are refused on the command line."""
    from equiv.judge.calibrate import calibration_summary
    from equiv.judge.ensemble import calibration_split

    floored = dict(NO_PREFILTER, claim_guard=True, statement_threshold=0.9)
    seeds, config, _ = _two_seeds_and_a_recipe(tmp_path, floored, "model:\n  max_length: 64\n")
    done = invoke(ensemble_main, ["--members", *seeds, "--out", tmp_path / "e", "--recipe", config])
    assert done.returncode == 0, done.stderr[-2000:]
    settings = json.loads((tmp_path / "e" / "config.json").read_text())["equiv"]
    assert "hybrid" not in settings and settings["policy"]["guard"] and settings["policy"]["floor"] == 0.9
    pairs, labels, _, _ = calibration_split(config)
    probs = score_judge_dir(tmp_path / "e", pairs)
    assert settings["policy"]["threshold"] == calibration_summary(probs, labels)["decision_threshold"]
    judge = ModelJudge(tmp_path / "e")
    assert judge.policy.floor == 0.9 and judge.policy.guard
    for option in ("--threshold_f1_tolerance", "--target_precision"):
        done = invoke(ensemble_main, ["--members", *seeds, "--out", tmp_path / "bad", "--recipe", config, option, "0.9"])
        assert done.returncode == 2 and "unrecognized arguments" in done.stderr and option in done.stderr
        assert not (tmp_path / "bad").exists()


def test_a_recipe_without_threshold_from_val_keeps_its_threshold_for_the_ensemble(tmp_path):
    """``threshold_from_val: false``: ``fit`` keeps ``model.decision_threshold`` for each member, so
    the ensemble keeps it too and only reports the calibration split at it; the command line can
    still ask for a chosen one."""
    from equiv.judge.calibrate import binary_metrics, calibration_summary
    from equiv.judge.ensemble import calibration_split

    seeds, config, train = _two_seeds_and_a_recipe(
        tmp_path, NO_PREFILTER, "threshold_from_val: false\nmodel:\n  max_length: 64\n  decision_threshold: 0.37\n")
    done = invoke(ensemble_main, ["--members", *seeds, "--out", tmp_path / "e", "--recipe", config])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "decision threshold 0.37, kept from the recipe (threshold_from_val: false), on" in done.stdout
    settings = json.loads((tmp_path / "e" / "config.json").read_text())["equiv"]
    metrics = json.loads((tmp_path / "e" / "equiv_metrics.json").read_text())
    assert settings["policy"]["threshold"] == metrics["decision_threshold"] == 0.37
    pairs, labels, _, _ = calibration_split(config)
    probs = score_judge_dir(tmp_path / "e", pairs)
    at_fixed = binary_metrics([p >= 0.37 for p in probs], labels)
    assert (metrics["calibration_f1"], metrics["calibration_precision"]) == (at_fixed.f1, at_fixed.precision)
    assert metrics["calibration_pairs"] == len(labels)

    done = invoke(ensemble_main, ["--members", *seeds, "--out", tmp_path / "chosen", "--recipe", config,
                                  "--threshold_from_val"])
    assert done.returncode == 0, done.stderr[-2000:]
    chosen = json.loads((tmp_path / "chosen" / "config.json").read_text())["equiv"]["policy"]["threshold"]
    assert chosen == calibration_summary(probs, labels)["decision_threshold"]

    # no model.decision_threshold in the recipe: fit's default, 0.5
    config.write_text(f"threshold_from_val: false\ndata:\n  train: {train}\n  calibration_fraction: 0.3\n")
    done = invoke(ensemble_main, ["--members", *seeds, "--out", tmp_path / "half", "--recipe", config])
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "half" / "config.json").read_text())["equiv"]["policy"]["threshold"] == 0.5


def test_members_with_different_floors_or_guards_are_refused(tmp_path):
    first = make_tiny_judge(tmp_path / "a", settings=dict(NO_PREFILTER, statement_threshold=0.9), seed=0)
    other = make_tiny_judge(tmp_path / "b", settings=dict(NO_PREFILTER, statement_threshold=0.7), seed=1)
    with pytest.raises(InputError, match="different policy floor settings") as err:
        build_ensemble([first, other], tmp_path / "e")
    assert "0.9" in str(err.value) and "0.7" in str(err.value) and not (tmp_path / "e").exists()
    unguarded = make_tiny_judge(tmp_path / "c", settings=dict(NO_PREFILTER, statement_threshold=0.9, claim_guard=True))
    with pytest.raises(InputError, match="different policy guard settings"):
        build_ensemble([first, unguarded], tmp_path / "e")


def test_the_recipes_seed_overlay_changes_only_the_seeds_and_the_folders(capsys, monkeypatch):
    """The second member of the recommended judge: the recipe with other seeds, nothing else."""
    from tests.test_em_configs import resolved

    plain = resolved(capsys, monkeypatch, "configs/gsm8k_equiv.yaml")
    seed1 = resolved(capsys, monkeypatch, "configs/gsm8k_equiv.yaml", "configs/gsm8k_equiv_seed1.yaml")
    assert (plain["seed_everything"], seed1["seed_everything"]) == (42, 1)
    assert seed1["data"]["seed"] == 1 and plain["data"]["seed"] != 1
    assert {k for k in seed1["data"] if seed1["data"][k] != plain["data"][k]} == {"seed"}
    assert seed1["model"] == plain["model"]
    assert seed1["trainer"]["default_root_dir"] == "outputs/gsm8k_equiv_seed1"
    assert "save_dir" not in seed1["trainer"]["logger"]["init_args"]  # linked to default_root_dir
    decisions = ("threshold_from_val", "guard", "floor", "plan_floor", "plan_items")
    assert {k: seed1[k] for k in decisions} == {k: plain[k] for k in decisions}


@pytest.mark.parametrize("line", ["threshold_f1_tolerance: 0.005",  # the picks removed in 2026-11 (issue #45)
                                  "threshold_target_precision: 0.95", "threshold_from_val: maybe",
                                  "threshold_from_val: false\nmodel:\n  decision_threshold: 2",
                                  "hybrid: true"])  # the combiner, removed in 2026-11
def test_a_bad_threshold_setting_in_the_recipe_is_one_line_naming_it(shared_judges, tmp_path, line):
    plain, marked = shared_judges
    config = tmp_path / "recipe.yaml"
    config.write_text(f"{line}\ndata:\n  train: unused.jsonl\n")
    done = invoke(ensemble_main, ["--members", plain, marked, "--out", tmp_path / "e", "--recipe", config])
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode == 2 and len(lines) == 1
    field = "model.decision_threshold" if "decision_threshold" in line else line.split(":")[0]
    assert str(config) in lines[0] and field in lines[0] and not (tmp_path / "e").exists()
