"""A judge made of several trained judges: their logits averaged, one threshold chosen for all.

Two fits of the same recipe make different mistakes: one fit's precision on sibling steps
depends on its seed, and the average of two seeds' logits merges a pair only when both lean that
way (docs/training.md, "The recommended judge: two seeds averaged"). So an ensemble is a first-class judge here, built from exports that
``trainer_cli.py fit`` wrote and used by search exactly like one of them:

- on disk it is the first member's exported directory (still a Hugging Face classifier that
  ``from_pretrained`` loads), with the other members copied under ``members/`` and listed in
  ``config.json`` as ``equiv.members``; each member keeps its own settings (``max_length``), so
  each is fed what it was trained on;
- its probability is ``sigmoid(mean of the members' logits)``;
- its threshold (``equiv.policy``) is chosen on the
  calibration split exactly as ``fit --threshold_from_val true`` chooses one judge's (best F1),
  and the members' stored claim guard and statement floor (which must agree) stay in force. A
  recipe that says ``threshold_from_val: false`` keeps its
  ``model.decision_threshold`` (0.5 when it sets none) for the ensemble too, as ``fit`` keeps it
  for each member; the calibration split then only reports the figures at that threshold.

Two seeds of the recipe averaged is the recommended GSM8K judge: one fit's precision on sibling
steps from search depends on its seed (0.94 or 0.91 on the 561 labelled siblings, cross-validated),
the average's does not (docs/results.md).

``equiv ensemble --members A/judge B/judge --out DIR --recipe configs/gsm8k_equiv.yaml``
builds one; ``search_cli.py pairs/eval --strategy model --model DIR`` uses it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from equiv.cliargs import add_recipe, as_lists, command_parser, parse_or_refuse
from equiv.errors import InputError, check_config_files, check_fraction, exit_on_input_error, output_directory_kind
from equiv.judge.calibrate import calibration_summary, fixed_threshold_summary, policy_summary
from equiv.judge.export_keys import MEMBERS_KEY, METRICS_FILE, SETTINGS_KEY
from equiv.judge.policy import policy_from_settings

MEMBERS_DIR = "members"


def build_ensemble(members: Sequence[str | Path], out_dir: str | Path) -> Path:
    """Copy exported judges into one ensemble directory (see the module docstring); not calibrated yet."""
    from equiv.judge.export import update_settings  # torch: imported when used, so `--help` starts at once

    if len(members) < 2:
        raise InputError(f"an ensemble needs at least 2 members, got {len(members)}", field="members")
    sources = [Path(m) for m in members]
    mappings, decisions = [], []
    for source in sources:
        if not (source / "config.json").is_file():
            raise InputError("is not an exported judge directory (no config.json)", path=source, field="members")
        settings = json.loads((source / "config.json").read_text(encoding="utf-8")).get(SETTINGS_KEY) or {}
        if settings.get(MEMBERS_KEY):
            raise InputError("is an ensemble already; give its members instead", path=source, field="members")
        mappings.append(settings.get("label_mapping"))
        # The policy decides merges after the model's score: an ensemble keeps the first member's, so
        # every member must store the same one (its threshold aside: the ensemble chooses its own).
        decisions.append(replace(policy_from_settings(settings, source=source / "config.json"), threshold=0.5))
    if any(m != mappings[0] for m in mappings):
        raise InputError("members were trained with different label mappings", field="members")
    for field in ("guard", "floor", "plan_floor", "plan_items", "paraphrase_model", "prefilter", "same_step", "compare"):
        if any(getattr(d, field) != getattr(decisions[0], field) for d in decisions):
            found = ", ".join(f"{source}: {getattr(d, field)}" for source, d in zip(sources, decisions))
            raise InputError(f"members store different policy {field} settings ({found}); fit them with the same "
                             "recipe", field="members")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise InputError("exists and is not empty; choose a new directory for the ensemble", path=out, field="out")
    shutil.copytree(sources[0], out, dirs_exist_ok=True)
    names = []
    for index, source in enumerate(sources[1:], start=1):
        name = f"{MEMBERS_DIR}/{index}"
        shutil.copytree(source, out / name)
        (out / name / METRICS_FILE).unlink(missing_ok=True)
        names.append(name)
    # The first member's combiner belongs to its own logit, not the ensemble's.
    update_settings(out, {MEMBERS_KEY: names, "ensemble_of": [str(s) for s in sources]})
    (out / METRICS_FILE).unlink(missing_ok=True)
    return out


def calibrate_ensemble(
    judge_dir: str | Path,
    pairs: Sequence[tuple[str, str]],
    labels: Sequence[int],
    *,
    questions: Sequence[str] | None = None,
    fixed_threshold: float | None = None,
) -> dict[str, float]:
    """Choose the ensemble's ``decision_threshold`` on a calibration split
    as ``fit`` chooses one judge's (best F1; ``questions``: the pairs' questions, for the claim guard's report).
    ``fixed_threshold``: keep this threshold instead (a recipe without ``threshold_from_val``) and
    only measure the split at it."""
    # torch and transformers: imported when a judge is scored, not for `--help` or a refused option
    from equiv.judge.export import export_metrics, stored_policy, update_policy
    from equiv.judge.members import member_dirs, score_judge_dir

    directory = Path(judge_dir)
    probs = score_judge_dir(directory, pairs)  # once: the threshold and the report read them
    if fixed_threshold is not None:
        summary = fixed_threshold_summary(probs, labels, fixed_threshold)
    else:
        summary = calibration_summary(probs, labels)
    if summary is None:
        raise InputError("no decision threshold can be chosen on the calibration split (no pairs to sweep)", field="recipe")
    update_policy(directory, threshold=summary["decision_threshold"])
    metrics = dict(summary, members=float(len(member_dirs(directory))))
    metrics.update(policy_summary(stored_policy(directory), pairs, probs, labels, questions)[0])
    export_metrics(directory, metrics)
    return metrics


def read_recipe(config: str | Path) -> dict[str, Any]:
    """A training config (``trainer_cli.py fit --config``) as a mapping; one line naming it when
    it cannot be read or is not one."""
    import yaml

    path = Path(config)
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise InputError(f"cannot read the training config: {str(err).splitlines()[0]}", path=path, field="recipe") from None
    if not isinstance(recipe, dict):
        raise InputError("is not a training config (a mapping of fit options)", path=path, field="recipe")
    return recipe


#: recipe keys of threshold picks measured and not adopted (docs/experiments/2026-11-27-removed-levers.md)
REMOVED_RECIPE_KEYS = {
    "hybrid": "fits the hybrid combiner",
    "threshold_f1_tolerance": "sets the f1-tolerance threshold pick",
    "threshold_target_precision": "sets the target-precision threshold pick",
}


def threshold_choice(config: str | Path, recipe: dict[str, Any] | None = None, *,
                     from_val: bool | None = None) -> dict[str, Any]:
    """How the recipe's ``fit`` chooses a judge's threshold, for an ensemble of its fits to choose
    alike: ``threshold_from_val`` (absent: True, this command's historical default: best F1 on the
    calibration split; false: ``fixed_threshold`` is the recipe's ``model.decision_threshold``, 0.5
    when it sets none, and nothing is chosen). ``recipe``: the config already read
    (:func:`read_recipe`); ``from_val``, when given, overrides the recipe (the command line's). A
    recipe that still sets a removed lever is refused in one line naming the key (``hybrid: false``
    changes nothing and is accepted)."""
    recipe = read_recipe(config) if recipe is None else recipe
    for key, what in REMOVED_RECIPE_KEYS.items():
        if key in recipe and not (key == "hybrid" and recipe[key] is False):
            raise InputError(f"this config {what}, removed in 2026-11; delete the key (the shipped recipe decides "
                             "without it)", path=config, field=key)
    if from_val is None:
        from_val = recipe.get("threshold_from_val", True)
    if not isinstance(from_val, bool):
        raise InputError(f"must be true or false, got {from_val!r}", path=config, field="threshold_from_val")
    fixed = None
    if not from_val:
        model = recipe.get("model") if isinstance(recipe.get("model"), dict) else {}
        fixed = check_fraction(model.get("decision_threshold", 0.5), "model.decision_threshold", config)
    return {"fixed_threshold": fixed}


def calibration_split(config: str | Path) -> tuple[list[tuple[str, str]], list[int], list[str], list[str]]:
    """The labelled validation (calibration) pairs of a training config's ``data`` block: pairs,
    labels, problem keys and questions."""
    from equiv.data.datamodule import MathEquivDataModule

    data = read_recipe(config).get("data") or {}
    keep = ("train", "val", "train_split", "val_split", "hub_config", "label_equivalent", "label_not_equivalent",
            "skip_invalid", "max_chars", "train_more", "calibration_fraction")
    datamodule = MathEquivDataModule(**{k: v for k, v in data.items() if k in keep})
    datamodule.setup("validate")
    return (*datamodule.labelled_pairs("val"), datamodule.labelled_questions("val"))


def build_parser() -> Any:
    """The command's parser (jsonargparse through :func:`equiv.cliargs.command_parser`: the same
    ``--help`` layout and one-line errors as every command). ``--recipe`` is the training recipe
    the members were fitted with; ``--config`` is a YAML of these options, as in every command (a
    recipe given to it is refused with the fix, :func:`equiv.cliargs.refuse_recipe_as_config`)."""
    parser = command_parser(
        "python -m equiv.judge.ensemble",
        "Combine exported judges into one (logits averaged) and calibrate it on the recipe's calibration split.")
    parser.add_argument("--members", nargs="+", required=True, help="exported judge directories (trainer_cli.py fit)")
    parser.add_argument("--out", required=True, help="new directory for the ensemble judge")
    add_recipe(parser, "the one the members were fitted with; its data block gives the calibration split")
    parser.add_argument("--threshold_from_val", action=argparse.BooleanOptionalAction, default=None,
                        help="choose the threshold on the calibration split (default: the recipe's "
                        "threshold_from_val; on when it has none); --no-threshold_from_val keeps the recipe's "
                        "model.decision_threshold (0.5 when it sets none), as fit does")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_or_refuse(build_parser(), sys.argv[1:] if argv is None else argv)  # a bad option: one line, exit 2
    as_lists(args, "members")  # a config file's `members: DIR` is one member, not one per character
    with exit_on_input_error():
        check_config_files(["--config", args.recipe])  # malformed or an alias bomb: one line naming it
        output_directory_kind(args.out)  # the one output rule, before any member is read
        choice = threshold_choice(args.recipe, from_val=args.threshold_from_val)
        pairs, labels, _, questions = calibration_split(args.recipe)
        if not pairs:
            raise InputError("the recipe has no calibration split (data.calibration_fraction or data.val)",
                             path=args.recipe, field="data")
        for member in args.members:
            stored = _stored_calibration_pairs(Path(member))
            if stored is not None and stored != len(pairs):
                raise InputError(f"was calibrated on {stored} pairs, but this recipe's split has {len(pairs)}: "
                                 "fit every member with the same data settings", path=member, field="members")
        out = build_ensemble(args.members, args.out)
        metrics = calibrate_ensemble(out, pairs, labels, questions=questions,
                                     fixed_threshold=choice["fixed_threshold"])
        print(f"ensemble of {len(args.members)} judges: {out}")
        how = ", kept from the recipe (threshold_from_val: false)," if choice["fixed_threshold"] is not None else ""
        print(f"decision threshold {metrics['decision_threshold']}{how} on {len(labels)} calibration pairs: "
              f"precision={metrics['calibration_precision']:.4f} recall={metrics['calibration_recall']:.4f} "
              f"f1={metrics['calibration_f1']:.4f}")
        print(f"its decision policy (equiv.policy, every stage in force) there: "
              f"precision={metrics['policy_calibration_precision']:.4f} "
              f"recall={metrics['policy_calibration_recall']:.4f} f1={metrics['policy_calibration_f1']:.4f}")
    return 0


def _stored_calibration_pairs(member: Path) -> int | None:
    path = member / METRICS_FILE
    if not path.is_file():
        return None
    value = json.loads(path.read_text(encoding="utf-8")).get("calibration_pairs")
    return None if value is None else int(value)


if __name__ == "__main__":
    sys.exit(main())
