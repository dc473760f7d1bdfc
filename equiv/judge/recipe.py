"""``equiv-train recipe gsm8k``: the recommended GSM8K judge in one command.

Why: the recommended judge (docs/training.md, "The recommended judge: two seeds averaged") is
two fits of ``configs/gsm8k_equiv.yaml`` with different seeds and an ensemble of them -- four
commands and about 20 minutes on 2 CPU cores, which a newcomer had to find and type in order
(issue 68). This runs exactly those steps, with the same configs, seeds and ensemble, so it
reaches the same judge:

1. ``fit --config configs/gsm8k_equiv.yaml`` -> ``<root>/gsm8k_equiv/judge``
2. ``fit --config configs/gsm8k_equiv.yaml --config configs/gsm8k_equiv_seed1.yaml`` ->
   ``<root>/gsm8k_equiv_seed1/judge``
3. ``equiv ensemble --recipe configs/gsm8k_equiv.yaml`` of the two -> ``<root>/gsm8k_equiv/ensemble``

Resumable, as ``make`` is: the state file ``<root>/recipe-gsm8k.json`` records each step's
settings and whether it finished. A rerun skips a finished step whose settings match and whose
output is whole; a step this recipe started and did not finish (interrupted) restarts cleanly
(its partial output is the recipe's own, so it is removed first); a step after one that ran is
rebuilt. An output folder holding a judge the recipe did not build with these settings (a hand
fit, a shrunk run) is refused in one line unless ``--overwrite true``: a trained judge is never
replaced without being told.

Each fit runs in its own process (Lightning, W&B and the seeds start clean) under one progress
bar, :class:`equiv.judge.recipe_bar.RecipeBar`, that names the step and counts its training batches.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from equiv.cliargs import command_parser, parse_or_refuse
from equiv.errors import InputError, exit_on_input_error

RECIPES = ("gsm8k",)
"""The recipes this command builds (one today: the recommended GSM8K judge)."""

CONFIG = "configs/gsm8k_equiv.yaml"
SEED1_OVERLAY = "configs/gsm8k_equiv_seed1.yaml"
TRAINING_DATA = ("../shared/data/gsm8k_equiv/train.jsonl", "../shared/data/gsm8k_equiv/train_more.jsonl")
"""What the recipe's configs train on, relative to the repository root (the configs' own paths)."""

STATE_FILE = "recipe-gsm8k.json"
TIME_STATED = "about 20 minutes on 2 idle CPU cores (two fits of about 10 minutes, 20 s for the ensemble)"
"""As measured for the documented commands (docs/training.md); a GPU makes the fits minutes."""

FIT_CODE = "import sys; from equiv.commands import train_main; sys.exit(train_main(sys.argv[1:]))"
"""A fit in a fresh interpreter: the same code as ``equiv-train fit`` (this checkout's equiv)."""


@dataclass(frozen=True)
class Step:
    """One step of the recipe: its name, what it builds and the command line that builds it."""

    name: str
    output: Path
    argv: list[str]
    kind: str  # "fit" or "ensemble"


def plan(root: Path, fit_options: Sequence[str]) -> list[Step]:
    """The three steps, with every output under ``root`` (``outputs`` writes where the documented
    commands write). ``fit_options``: extra ``fit`` options given to both fits (a shrunk run)."""
    first, second = root / "gsm8k_equiv", root / "gsm8k_equiv_seed1"
    fit = ["fit", "--config", CONFIG]
    return [
        Step("fit seed 42", first / "judge", [*fit, "--trainer.default_root_dir", str(first), *fit_options], "fit"),
        Step("fit seed 1", second / "judge",
             [*fit, "--config", SEED1_OVERLAY, "--trainer.default_root_dir", str(second), *fit_options], "fit"),
        Step("ensemble", first / "ensemble",
             ["--recipe", CONFIG, "--members", str(first / "judge"), str(second / "judge"), "--out",
              str(first / "ensemble")], "ensemble"),
    ]


RENAMED_OPTIONS = {"--recipe": "--config"}
"""Options renamed since a state file may have recorded a step (``ensemble --config RECIPE`` is
``--recipe RECIPE`` since issue 67): :func:`fingerprint` reads them under their old names."""


def fingerprint(step: Step) -> str:
    """What makes a step's output what it is: its command line and the configs' settings (read
    as YAML, so an edited comment does not make a finished fit stale). A renamed option counts
    under its old name (:data:`RENAMED_OPTIONS`): a new spelling of the same step must not make an
    ensemble built before it stale, or refuse it as "built with other settings".

    The claim guard's rule names count too: the configs say ``guard: true``, which an export stores
    as the list of rules this code has, so a judge built before a rule was added (issue 65's
    ``changed_comparison``) is a judge with other settings and a rerun rebuilds it."""
    import yaml

    from equiv.text.guard import rule_names

    argv = [RENAMED_OPTIONS.get(word, word) for word in step.argv]
    digest = hashlib.sha256(json.dumps(argv).encode())
    for name in (CONFIG, SEED1_OVERLAY):
        settings = yaml.safe_load(Path(name).read_text(encoding="utf-8"))
        digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(json.dumps(list(rule_names())).encode())
    return digest.hexdigest()


def read_state(path: Path) -> dict[str, Any]:
    """The state file (``{}`` when there is none); one line naming it when it is not ours."""
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read the recipe's state ({err}); delete it to start over", path=path) from None
    if not isinstance(state, dict) or not isinstance(state.get("steps", {}), dict):
        raise InputError("is not this recipe's state file; delete it to start over", path=path)
    return state


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Replace the state file in one rename, so an interrupt leaves the old or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    scratch.replace(path)


def is_whole(output: Path) -> bool:
    """Whether ``output`` is a whole exported judge (weights, tokenizer, settings)."""
    from equiv.judge.export import check_export_whole

    try:
        check_export_whole(output)
    except (InputError, OSError):
        return False
    return True


def check_inputs(root: Path) -> None:
    """The configs and the training data are where the configs say, before anything runs."""
    for name in (CONFIG, SEED1_OVERLAY):
        if not Path(name).is_file():
            raise InputError("not found: run the recipe from the root of the equiv checkout", path=name,
                             field="recipe")
    for name in TRAINING_DATA:
        if not Path(name).is_file():
            raise InputError("not found: the recipe trains on the labelled GSM8K step pairs in ../shared/data/"
                             "gsm8k_equiv/ beside the checkout (README, Data and licence)", path=name, field="recipe")
    if root.exists() and not root.is_dir():
        raise InputError("--root names a file, not a directory", path=root)


def run_step(step: Step, index: int, total: int) -> None:
    """Run one step; a failed fit or ensemble stops the recipe with its exit status."""
    if step.kind == "fit":
        bar = ["--trainer.callbacks+=equiv.judge.recipe_bar.RecipeBar", f"--trainer.callbacks.label={step.name}",
               f"--trainer.callbacks.step={index}", f"--trainer.callbacks.steps={total}"]
        argv = [sys.executable, "-c", FIT_CODE, *step.argv, *bar]
        done = subprocess.run(argv, check=False)
        if done.returncode != 0:
            raise SystemExit(done.returncode)
    else:
        from equiv.judge import ensemble

        code = ensemble.main(step.argv)
        if code:
            raise SystemExit(code)


def build(root: Path, fit_options: Sequence[str], *, overwrite: bool = False) -> Path:
    """Run the recipe's steps that are not finished (module docstring); returns the ensemble."""
    check_inputs(root)
    steps = plan(root, fit_options)
    state_path = root / STATE_FILE
    state = read_state(state_path)
    state.setdefault("steps", {})
    print(f"recipe gsm8k: the recommended GSM8K judge, {len(steps)} steps, {TIME_STATED}", flush=True)
    rebuilt = False
    for index, step in enumerate(steps, start=1):
        key, mark = step.name, fingerprint(step)
        recorded = state["steps"].get(key) or {}
        ours = recorded.get("fingerprint") == mark
        if ours and recorded.get("finished") and is_whole(step.output) and not rebuilt:
            print(f"recipe {index}/{len(steps)} {step.name}: done before, kept ({step.output})", flush=True)
            continue
        occupied = step.output.is_file() or (step.output.is_dir() and any(step.output.iterdir()))
        if occupied:
            if not (ours or overwrite):
                why = ("built by this recipe with other settings" if recorded else "not built by this recipe")
                raise InputError(f"holds a judge {why}; pass --overwrite true to replace it, or --root a new "
                                 "folder", path=step.output, field="recipe")
            shutil.rmtree(step.output) if step.output.is_dir() else step.output.unlink()
        state["steps"][key] = {"fingerprint": mark, "finished": False, "argv": step.argv}
        write_state(state_path, state)
        print(f"recipe {index}/{len(steps)} {step.name} -> {step.output}", flush=True)
        started = time.monotonic()
        run_step(step, index, len(steps))
        state["steps"][key].update(finished=True, seconds=round(time.monotonic() - started, 1))
        write_state(state_path, state)
        rebuilt = True
    final = steps[-1].output
    print(f"recommended judge: {final} (use it with --pruner.strategy model --pruner.model {final})", flush=True)
    return final


def build_parser() -> Any:
    """``equiv-train recipe``'s parser (the one command-line stack of :mod:`equiv.cliargs`)."""
    parser = command_parser(
        "trainer_cli.py recipe",
        f"Build the recommended GSM8K judge: two fits of {CONFIG} (seeds 42 and 1) and their ensemble, "
        f"as docs/training.md's four commands do; {TIME_STATED}. Resumable: a rerun skips finished steps.")
    parser.add_argument("name", choices=list(RECIPES), help="the recipe to build")
    parser.add_argument("--root", default="outputs",
                        help="folder for the fits and the ensemble (default outputs: the ensemble is "
                        "outputs/gsm8k_equiv/ensemble, where the docs name it)")
    parser.add_argument("--overwrite", type=bool, default=False,
                        help="replace a judge in the recipe's folders that this recipe did not build with these settings")
    parser.add_argument("--fit_options", default="",
                        help="extra trainer_cli.py fit options for both fits, in one quoted string (a shrunk "
                        "run: '--trainer.max_epochs 1 --trainer.limit_train_batches 2'); the judge is then not "
                        "the recommended one")
    return parser


def recipe_main(argv: list[str] | None = None) -> int:
    """``equiv-train recipe NAME`` / ``trainer_cli.py recipe NAME``; returns the exit status."""
    args = parse_or_refuse(build_parser(), sys.argv[1:] if argv is None else argv)
    with exit_on_input_error():
        try:
            build(Path(args.root), shlex.split(args.fit_options), overwrite=args.overwrite)
        except KeyboardInterrupt:  # Ctrl-C reaches the fit too; the state file says where it stopped
            print("\ninterrupted; run the same command again to resume (finished steps are kept)", file=sys.stderr)
            return 130
    return 0
