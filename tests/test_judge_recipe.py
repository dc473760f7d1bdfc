"""``equiv-train recipe gsm8k`` (issue 68, item 1): the recommended judge in one command.

Through the installed command, as pip's console-script wrapper runs it, with the real configs and
the real GSM8K step pairs, shrunk by ``--fit_options`` (one batch, short pairs) so the two fits
and the ensemble finish in about a minute: the ensemble loads as a judge, a rerun skips every
finished step, and a folder holding a judge the recipe did not build is refused in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

SHRUNK = ("--trainer.max_epochs 1 --trainer.limit_train_batches 2 --trainer.limit_val_batches 2 "
          "--trainer.logger false --model.max_length 24")


def _equiv_train(*argv: object, cwd: Path = REPO_ROOT, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """``equiv-train ARGV`` as its console-script wrapper runs it (this checkout's equiv)."""
    code = "import sys; from equiv.commands import train_main; sys.argv[0] = 'equiv-train'; sys.exit(train_main())"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


@pytest.mark.slow  # two real fits in processes of their own, and a third on resume
@pytest.mark.timeout(1500)  # minutes on a loaded 2-core machine
def test_the_recipe_builds_the_recommended_judge_and_a_rerun_skips_finished_steps(shared_data: Path,
                                                                                  tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    first = _equiv_train("recipe", "gsm8k", "--root", root, "--fit_options", SHRUNK)
    assert first.returncode == 0, first.stderr[-3000:]
    for step in ("recipe 1/3 fit seed 42", "recipe 2/3 fit seed 1", "recipe 3/3 ensemble"):
        assert step in first.stdout
    ensemble = root / "gsm8k_equiv" / "ensemble"
    assert f"recommended judge: {ensemble}" in first.stdout
    config = json.loads((ensemble / "config.json").read_text(encoding="utf-8"))
    # the documented commands' judge: the two seeds' fits, averaged
    assert config["equiv"]["ensemble_of"] == [str(root / "gsm8k_equiv" / "judge"),
                                              str(root / "gsm8k_equiv_seed1" / "judge")]
    from equiv.prune import PrunerConfig, build_judge

    judge = build_judge(PrunerConfig(strategy="model", model=str(ensemble)))
    verdicts = judge.pair_verdicts([("She sells 9 eggs.", "She sells 9 eggs a day.")])
    assert len(verdicts) == 1 and 0.0 <= verdicts[0].probability <= 1.0
    state = json.loads((root / "recipe-gsm8k.json").read_text(encoding="utf-8"))
    assert all(step["finished"] for step in state["steps"].values())

    again = _equiv_train("recipe", "gsm8k", "--root", root, "--fit_options", SHRUNK)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("done before, kept") == 3
    assert "exported judge" not in again.stdout  # no fit ran

    # other settings into the same folders: refused, the trained judge kept
    other = _equiv_train("recipe", "gsm8k", "--root", root, "--fit_options", SHRUNK + " --model.learning_rate 1e-3")
    assert other.returncode == 2
    assert other.stderr.strip().splitlines() == [
        f"error: {root / 'gsm8k_equiv' / 'judge'}: field 'recipe': holds a judge built by this recipe with other "
        "settings; pass --overwrite true to replace it, or --root a new folder"]
    assert (ensemble / "config.json").is_file()

    # the second fit interrupted (started, never finished, a partial export): it restarts cleanly,
    # and the ensemble after it is rebuilt; the first fit is kept
    state["steps"]["fit seed 1"]["finished"] = False
    (root / "recipe-gsm8k.json").write_text(json.dumps(state), encoding="utf-8")
    (root / "gsm8k_equiv_seed1" / "judge" / "model.safetensors").write_bytes(b"")
    resumed = _equiv_train("recipe", "gsm8k", "--root", root, "--fit_options", SHRUNK)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "recipe 1/3 fit seed 42: done before, kept" in resumed.stdout
    assert "recipe 2/3 fit seed 1 -> " in resumed.stdout and "recipe 3/3 ensemble -> " in resumed.stdout
    build_judge(PrunerConfig(strategy="model", model=str(ensemble)))


def test_a_judge_the_recipe_did_not_build_is_refused_and_kept(shared_data: Path, tmp_path: Path) -> None:
    """A folder of the recipe holding a judge it did not build (a hand fit): one line, exit 2, the
    judge untouched. (An interrupted step of the recipe's own restarts: the slow test above.)"""
    root = tmp_path / "outputs"
    hand = root / "gsm8k_equiv" / "judge"
    hand.mkdir(parents=True)
    (hand / "config.json").write_text("{}", encoding="utf-8")
    refused = _equiv_train("recipe", "gsm8k", "--root", root, "--fit_options", SHRUNK, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: {hand}: field 'recipe': holds a judge not built by this recipe; pass --overwrite true to replace "
        "it, or --root a new folder"]
    assert (hand / "config.json").read_text(encoding="utf-8") == "{}"


@pytest.mark.parametrize("missing", ["configs", "data"])
def test_the_recipe_names_what_it_cannot_find(tmp_path: Path, missing: str) -> None:
    """Run outside a checkout, or without ../shared/data/gsm8k_equiv: one line, exit 2, nothing written."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    if missing == "data":
        (checkout / "configs").symlink_to(REPO_ROOT / "configs")
    done = _equiv_train("recipe", "gsm8k", cwd=checkout, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    if missing == "configs":
        assert lines[0] == ("error: configs/gsm8k_equiv.yaml: field 'recipe': not found: run the recipe from the "
                            "root of the equiv checkout")
    else:
        assert lines[0].startswith("error: ../shared/data/gsm8k_equiv/train.jsonl: field 'recipe': not found: ")
    assert not (checkout / "outputs").exists()


def test_the_ensemble_step_names_its_recipe_as_recipe_and_keeps_its_fingerprint(tmp_path: Path, monkeypatch) -> None:
    """The recipe's ensemble step runs ``ensemble --recipe`` (issue 67: ``--config`` is the
    command's own options), and its fingerprint is the one a state file recorded when the step was
    spelled ``--config``: an ensemble built before the rename is kept on a rerun, not refused as
    built with other settings (run from the checkout: the fingerprint reads the configs)."""
    import hashlib

    import yaml

    from equiv.judge.recipe import CONFIG, SEED1_OVERLAY, fingerprint, plan
    from equiv.text.guard import rule_names

    monkeypatch.chdir(REPO_ROOT)
    (step,) = [s for s in plan(tmp_path, []) if s.kind == "ensemble"]
    assert step.argv[:2] == ["--recipe", CONFIG] and "--config" not in step.argv
    old = hashlib.sha256(json.dumps(["--config", *step.argv[1:]]).encode())  # the digest as written before
    for name in (CONFIG, SEED1_OVERLAY):
        old.update(json.dumps(yaml.safe_load(Path(name).read_text(encoding="utf-8")), sort_keys=True,
                              default=str).encode())
    old.update(json.dumps(list(rule_names())).encode())
    assert fingerprint(step) == old.hexdigest()


def test_a_new_guard_rule_makes_a_finished_step_stale(tmp_path: Path, monkeypatch) -> None:
    """An export stores ``guard: true`` as the rules the code has when it is built, so a judge built
    before a rule was added must be rebuilt, not kept as "done before" (issue 65)."""
    import equiv.text.guard as guard
    from equiv.judge.recipe import fingerprint, plan

    monkeypatch.chdir(REPO_ROOT)
    step = plan(tmp_path, [])[0]
    now = fingerprint(step)
    monkeypatch.setattr(guard, "GUARD_RULES", guard.GUARD_RULES[:-1])
    assert fingerprint(step) != now
