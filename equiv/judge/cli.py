"""JudgeCLI: ``trainer_cli.py fit|validate|test|predict`` for the equivalence judge.

A thin LightningCLI subclass. What it adds to the stock CLI, and why:

* links, so a value is given once: ``model.model_name`` / ``model.max_length`` feed the data
  module's tokenizer, ``data.batch_size`` and the label mapping feed the model's hparams (the
  mapping is exported with the judge);
* a ``checkpoint`` group (ModelCheckpoint on ``val/f1``, mode max) that is always present, so the
  best epoch is well defined;
* after ``fit``: the best checkpoint is written as a Hugging Face directory (``--export_dir``,
  default ``<trainer.default_root_dir>/judge``) and the validation F1/accuracy/precision/recall
  of that epoch are printed;
* after ``fit``, the export's decision policy (``equiv.policy``) decided on the calibration split
  by the one evaluator, with a count per reason;
* after ``predict``: one JSON line per input pair with its verdict in the one JSON form
  (:meth:`equiv.judge.decide.Verdict.to_json`: ``probability``, ``merged``, ``reason``), decided by the one evaluator (:func:`equiv.judge.decide.decide`) with the judge's
  policy and the command's ``--guard`` / ``--floor`` / ``--plan_floor``;
* bad input (data files, model names, options) ends with one ``error: ...`` line and exit 2;
  options are never matched by prefix (``--trainer.max_epoch`` is refused with "did you mean
  --trainer.max_epochs?", not taken as it), and ``fit`` does not replace a judge already in its
  export folder unless ``--overwrite true``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from equiv.data.datamodule import MathEquivDataModule
from equiv.data.records import question_of
from equiv.cliargs import did_you_mean, typed_prog
from equiv.errors import InputError, check_config_files, check_fraction, exit_on_input_error, one_line, writable_file
from equiv.judge.calibrate import calibration_summary, fixed_threshold_summary, policy_summary
from equiv.judge.decide import decide
from equiv.judge.export import export_judge, export_metrics, read_checkpoint, stored_policy, update_policy
from equiv.judge.members import score_judge_dir
from equiv.judge.module import METRIC_NAMES, PairClassifier
from equiv.judge.policy import policy_from_settings


UNSET_SAVE_DIRS = (None, ".")
"""A logger ``save_dir`` that was not given: CSV/TensorBoard have no default (None after
parsing), WandbLogger's default is ``.``."""


def logger_save_dir(root: Any, logger: Any) -> Any:
    """The logger's ``save_dir``, a parser link's value: the one given (``--trainer.logger.save_dir``,
    ``--trainer.logger.init_args.save_dir`` or a ``--config`` file's, whichever the parser took
    last), else ``trainer.default_root_dir`` (None when no root is given either: it becomes the
    working directory before the classes are built)."""
    init_args = logger.get("init_args") if hasattr(logger, "get") else None
    given = init_args.get("save_dir") if hasattr(init_args, "get") else None
    return given if given not in UNSET_SAVE_DIRS else root


SUBCOMMAND_HELP = {
    "fit": "train the judge, then export its best epoch (--export_dir) and print that epoch's validation metrics",
    "validate": "score a model or checkpoint (--ckpt_path) on the validation split",
    "test": "score a model or checkpoint (--ckpt_path) on the test split (--data.test)",
    "predict": "write each pair's probability and verdict as JSON lines (--predictions_out)",
}
RECIPE_HELP = ("Also: 'recipe gsm8k' builds the recommended judge in one resumable command (both fits "
               "and their ensemble, about 20 minutes on 2 cores; 'recipe --help').")
"""Each subcommand's line in ``--help``: Lightning's are the trainer methods' docstrings cut at
their first line break, mid-sentence ("It's separated from fit to make sure you never run on your")."""


def holds_judge(folder: str | Path) -> bool:
    """Whether ``folder`` holds an exported model (its ``config.json``), which an export would replace."""
    return (Path(folder) / "config.json").is_file()


class JudgeCLI(LightningCLI):
    """LightningCLI for :class:`PairClassifier` + :class:`MathEquivDataModule`."""

    def __init__(self, args: list[str] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("auto_configure_optimizers", False)  # AdamW + linear warm-up live in the module
        argv = list(sys.argv[1:] if args is None else args) if isinstance(args, (list, tuple)) or args is None else []
        self._named_subcommand = argv[0] if argv and argv[0] in LightningCLI.subcommands() else None
        super().__init__(PairClassifier, MathEquivDataModule, args=args, **kwargs)

    def subcommands(self) -> dict[str, set[str]]:  # type: ignore[override]
        """The named subcommand only, when the command line names one (``fit ...``), else all four.

        LightningCLI builds a parser from the trainer's, model's and data module's signatures for
        every subcommand it offers; building only the one that runs halves start-up (0.45 -> 0.2 s
        per ``fit --print_config`` here). ``trainer_cli.py --help`` or an unknown name still gets all four."""
        every = LightningCLI.subcommands()
        named = getattr(self, "_named_subcommand", None)
        return {named: every[named]} if named in every else every

    def init_parser(self, **kwargs: Any) -> LightningArgumentParser:
        # A parse error raises (and main prints one line) instead of ~100 lines of usage first.
        kwargs.setdefault("exit_on_error", False)
        # No prefix matching: `--trainer.max_epoch 1` was taken as max_epochs. The main parser and
        # every subcommand's are built here (subcommand parsers also inherit it from the main one).
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("description", "Train, validate, test or run the equivalence judge.")  # subcommands set their own
        kwargs.setdefault("prog", typed_prog("trainer_cli.py"))  # the door typed: equiv, equiv-train, trainer_cli.py
        return super().init_parser(**kwargs)

    def _add_subcommands(self, parser: LightningArgumentParser, **kwargs: Any) -> None:
        """Lightning's subcommands, each described in one whole sentence (:data:`SUBCOMMAND_HELP`)."""
        for name in self.subcommands():
            if name in SUBCOMMAND_HELP:
                kwargs.setdefault(name, {}).setdefault("description", SUBCOMMAND_HELP[name])
        super()._add_subcommands(parser, **kwargs)
        # `recipe` is not a Lightning subcommand (train_main sends it to equiv.judge.recipe before
        # this parser exists), so the main help names it here, or a user would never find it
        parser.epilog = RECIPE_HELP
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    choice.help = SUBCOMMAND_HELP.get(choice.dest, choice.help)

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        """Parse ``args`` as LightningCLI does, without its warning: Lightning warns ("args
        parameter ... not recommended") whenever ``args`` is given and ``sys.argv`` has arguments
        -- that is every call of the installed command, which passes its own argv on purpose."""
        argv = list(sys.argv[1:] if args is None else args) if not isinstance(args, dict) else []
        check_config_files(argv)  # a YAML error names the file, not "<unicode string>"
        try:
            if isinstance(args, dict):
                self.config = parser.parse_object(args)
            else:
                self.config = parser.parse_args(args)
        except argparse.ArgumentError as err:
            script = typed_prog("trainer_cli.py")
            command = f"{script} {argv[0]}" if argv and argv[0] in self.subcommands() else script
            raise InputError(f"{one_line(err)}{did_you_mean(str(err), parser)} (options: {command} --help)") from None

    def before_instantiate_classes(self) -> None:
        """Put the logger under the root directory; refuse settings that would train nothing,
        before any model is loaded."""
        self._logger_follows_root_dir()
        if self.subcommand != "fit":
            return
        self._fraction_setting("floor")  # a floor out of range is refused before hours of fitting, not after
        self._fraction_setting("plan_items")
        if self._fraction_setting("plan_floor") and not self._fraction_setting("floor"):
            raise InputError("a floor for numbered plans needs the statement floor (--floor) beside it",
                             field="plan_floor")
        self._check_export_dir()
        trainer = self.config["fit"].get("trainer") or {}
        epochs, steps = trainer.get("max_epochs"), trainer.get("max_steps")
        if trainer.get("fast_dev_run"):
            return
        if epochs is not None and (epochs == 0 or epochs < -1):
            raise InputError(
                f"must be >= 1 (or -1: no limit), got {epochs}; fit with {epochs} epochs would export an untrained judge",
                field="trainer.max_epochs",
            )
        if steps is not None and (steps == 0 or steps < -1):
            raise InputError(f"must be >= 1 (or -1: no limit), got {steps}; it would export an untrained judge",
                             field="trainer.max_steps")

    def export_dir(self) -> str:
        """Where ``fit`` exports the judge: ``--export_dir``, else ``<trainer.default_root_dir>/judge``."""
        trainer = self._subcommand_value("trainer") or {}
        root = (trainer.get("default_root_dir") if hasattr(trainer, "get") else None) or os.getcwd()
        return self._subcommand_value("export_dir") or str(Path(root) / "judge")

    def _check_export_dir(self) -> None:
        """Refuse, before anything is trained, a fit whose export folder already holds a judge,
        unless ``--overwrite true``. Why: a typo'd run (once ``--trainer.max_epoch 1``) replaced
        the trained ``outputs/demo/judge`` with a judge at F1 0.026 without a word. A fit resumed
        from a checkpoint (``--ckpt_path``) into the same folder is asked the same: the folder's
        judge may be another run's."""
        folder = self.export_dir()
        if holds_judge(folder) and not self._subcommand_value("overwrite"):
            raise InputError(f"{folder} holds a judge; pass --overwrite true to replace it, or --export_dir NEW",
                             field="export_dir")

    def _parse_ckpt_path(self) -> None:
        """``--ckpt_path`` is read as :func:`read_checkpoint` reads a judge (tensors and plain data
        only) before Lightning loads it for its hyper-parameters: a missing, crafted or
        non-checkpoint file is one line naming it, not Lightning's traceback (issue #44, item 7)."""
        self._check_ckpt_path()
        super()._parse_ckpt_path()

    def _check_ckpt_path(self) -> None:
        subcommand = self.config.get("subcommand")
        config = self.config.get(subcommand) if subcommand else None
        ckpt = config.get("ckpt_path") if config is not None else None
        if not ckpt or ckpt in ("last", "best", "hpc", "registry"):  # Lightning's names for its own checkpoints
            return
        if not Path(ckpt).is_file():
            raise InputError("no such checkpoint file", path=ckpt, field="ckpt_path")
        try:
            read_checkpoint(ckpt)
        except InputError as err:
            raise InputError(err.message, path=ckpt, field="ckpt_path") from None

    def _logger_follows_root_dir(self) -> None:
        """The logger writes under ``trainer.default_root_dir``, also when none was given.

        Lightning's default logger does that already, but a logger named in a config needs its own
        ``save_dir``; fixed in the config (``outputs/demo``), ``--trainer.default_root_dir``
        moved the checkpoints and not the logs (issue #44, item 8: a probe's fit wrote 270 MB
        into the checkout). So the recipes leave ``save_dir`` out and a parser link
        (:func:`logger_save_dir`) gives it the root directory unless one is given; when no root
        directory is given either, it is empty (or WandbLogger's ``.``) and becomes the working
        directory here, Lightning's own default root."""
        config = self.config.get(self.subcommand) if self.subcommand else self.config
        trainer = (config or {}).get("trainer") if config is not None else None
        if not trainer:
            return
        root = trainer.get("default_root_dir") or os.getcwd()
        loggers = trainer.get("logger")
        for logger in loggers if isinstance(loggers, list) else [loggers]:
            init_args = logger.get("init_args") if hasattr(logger, "get") else None
            if init_args is not None and "save_dir" in init_args and init_args.get("save_dir") in UNSET_SAVE_DIRS:
                init_args["save_dir"] = str(root)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # The logger's directory is the root directory unless one is given (docs/training.md): one
        # flag moves all output. The link reads the parsed logger, so a save_dir given in either
        # spelling or in a --config file is kept (it used to overwrite it, and argv was read a
        # second time to put it back: issue 67).
        parser.link_arguments(("trainer.default_root_dir", "trainer.logger"), "trainer.logger.init_args.save_dir",
                              compute_fn=logger_save_dir)
        parser.link_arguments("model.model_name", "data.model_name")
        parser.link_arguments("model.max_length", "data.max_length")
        parser.link_arguments("data.batch_size", "model.batch_size")
        parser.link_arguments("data.label_equivalent", "model.label_equivalent")
        parser.link_arguments("data.label_not_equivalent", "model.label_not_equivalent")
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                "checkpoint.monitor": "val/f1",
                "checkpoint.mode": "max",
                "checkpoint.save_top_k": 1,
                "checkpoint.filename": "best-epoch{epoch}-step{step}",
                "checkpoint.auto_insert_metric_name": False,
            }
        )
        parser.add_argument(
            "--export_dir",
            type=str | None,
            default=None,
            help="where fit writes the best judge as a Hugging Face directory (default: <trainer.default_root_dir>/judge)",
        )
        parser.add_argument(
            "--overwrite",
            type=bool,
            default=False,
            help="fit: replace a judge already in the export folder (without it, fit refuses to start)",
        )
        parser.add_argument(
            "--threshold_from_val",
            type=bool,
            default=False,
            help="after fit, choose the decision threshold on the validation (calibration) split with the "
            "best weights and store it in the exported judge",
        )
        parser.add_argument(
            "--guard",
            type=bool,
            default=False,
            help="store every guard rule in the export's policy (a merge is vetoed when the steps state or conclude "
            "different numbers, or swap or name different things: equiv.text.guard); thresholds are still chosen on the "
            "judge's own scores, and the policy's figures at them are reported",
        )
        parser.add_argument(
            "--floor",
            type=float | None,
            default=None,
            help="store a statement floor in the export: a pair of steps that both compute nothing merges only at this "
            "probability or above (equiv.text.guard.computes_nothing); thresholds are still chosen without it",
        )
        parser.add_argument(
            "--plan_floor",
            type=float | None,
            default=None,
            help="store a floor of their own for such pairs where a step is a numbered plan "
            "(equiv.text.guard.numbered_plan); unset: plans are held to --floor",
        )
        parser.add_argument(
            "--plan_items",
            type=float | None,
            default=None,
            help="store the aligned-plan stage: two numbered plans that compute nothing merge when every pair of their "
            "sub-goals, in order, reads alike at this sentence-embedding cosine or above (equiv.judge.decide); unset: off",
        )
        parser.add_argument(
            "--predictions_out",
            type=str | None,
            default=None,
            help="JSONL written by predict (default: <trainer.default_root_dir>/predictions.jsonl)",
        )

    # -- fit ------------------------------------------------------------------------------
    def after_fit(self) -> None:
        trainer, module = self.trainer, self.model
        if not trainer.is_global_zero:
            return
        # The `checkpoint` group's callback (monitor val/f1), even if a config adds other ones.
        on_f1 = [cb for cb in trainer.checkpoint_callbacks if getattr(cb, "monitor", None) == "val/f1"]
        callback = on_f1[0] if on_f1 else trainer.checkpoint_callback
        best_path = getattr(callback, "best_model_path", "") if callback is not None else ""
        metrics = module.best_val_metrics or module.last_val_metrics
        if best_path:
            checkpoint = read_checkpoint(best_path)
            module.load_state_dict(checkpoint["state_dict"])
            source = best_path
            # The exported numbers must be those of the exported weights' epoch, even when this
            # process resumed from another checkpoint and never saw that epoch's validation.
            metrics = dict(checkpoint.get("equiv_val_metrics") or metrics)
        else:
            source = "the final weights (no checkpoint was saved: fast_dev_run or checkpointing off)"
        if self._subcommand_value("threshold_from_val"):
            metrics = dict(metrics, **calibrate_threshold(module, self.datamodule))
        else:
            metrics = dict(metrics, **measure_fixed_threshold(module, self.datamodule))
        export_dir = self._subcommand_value("export_dir") or str(Path(trainer.default_root_dir) / "judge")
        if holds_judge(export_dir) and not self._subcommand_value("overwrite"):  # another run exported meanwhile
            raise InputError(f"{export_dir} holds a judge; pass --overwrite true to replace it, or --export_dir NEW",
                             field="export_dir")
        out = export_judge(module, export_dir, metrics=metrics)
        guard = bool(self._subcommand_value("guard"))
        pairs = self.datamodule.labelled_pairs("val")[0]
        # the export's calibration-split probabilities, scored once for the policy's report
        probs = score_judge_dir(out, pairs) if pairs else None
        if guard:
            update_policy(out, guard=True)
        floor = self._fraction_setting("floor")
        if floor is not None:
            attach_statement_floor(out, floor, self._fraction_setting("plan_floor"))
        plan_items = self._fraction_setting("plan_items")
        if plan_items is not None:
            update_policy(out, plan_items=plan_items)
            print(f"aligned plans: two numbered plans merge when every pair of sub-goals reads alike at cosine >= "
                  f"{plan_items}", flush=True)
        if probs is not None:
            metrics = dict(metrics, **report_policy(out, self.datamodule, probs))
            export_metrics(out, metrics)
        print(f"exported judge from {source}", flush=True)
        print(f"judge directory: {out}", flush=True)
        print(format_metrics("best validation epoch" if module.best_val_metrics else "validation", metrics), flush=True)

    # -- predict --------------------------------------------------------------------------
    def predict(self, **kwargs: Any) -> None:
        """Run ``trainer.predict`` and write every pair with its probability, in input order.

        One process only: under DDP each rank predicts its share and only rank 0's would be
        written (then the missing indices fail), so a multi-process trainer is refused up front.
        """
        if self.trainer.world_size > 1:
            raise InputError(
                f"predict runs in one process, this trainer has {self.trainer.world_size}; "
                "use --trainer.devices=1 (the judge scores thousands of pairs a minute on one device)",
                field="trainer.devices",
            )
        out = Path(self._subcommand_value("predictions_out") or Path(self.trainer.default_root_dir) / "predictions.jsonl")
        writable_file(out, option="--predictions_out")  # the one output rule, before any pair is scored
        kwargs["return_predictions"] = True
        outputs = self.trainer.predict(**kwargs) or []
        if not self.trainer.is_global_zero:
            return
        datamodule = kwargs.get("datamodule") or self.datamodule
        records = datamodule.records["predict"]
        probs: dict[int, float] = {}
        for batch in outputs:
            for index, prob in zip(batch["index"].tolist(), batch["prob"].tolist()):
                probs[index] = prob
        policy = policy_from_settings(self.model.equiv_settings()).with_knobs(
            guard=bool(self._subcommand_value("guard")), floor=self._fraction_setting("floor"),
            plan_floor=self._fraction_setting("plan_floor"), plan_items=self._fraction_setting("plan_items"))
        pairs = [(r.sentence1, r.sentence2) for r in records]
        verdicts = decide(pairs, policy, [probs[i] for i in range(len(records))], [question_of(r) for r in records])
        with out.open("w", encoding="utf-8") as fh:
            for index, record in enumerate(records):
                row = {**record.to_json(), **verdicts[index].to_json()}  # the verdict's one JSON form
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"predictions: {out} ({len(records)} pairs)", flush=True)

    def _subcommand_value(self, key: str) -> Any:
        config = self.config.get(self.subcommand) if self.subcommand else self.config
        return config.get(key) if config is not None else None

    def _fraction_setting(self, key: str) -> float | None:
        """A setting that must lie in [0, 1] (``--floor``, ``--plan_floor``: probabilities; ``--plan_items``:
        a cosine), checked: one line naming the field when out of range; None when not given."""
        floor = self._subcommand_value(key)
        return None if floor is None else check_fraction(float(floor), key)


def calibrate_threshold(module: PairClassifier, datamodule: Any) -> dict[str, float]:
    """Set ``module``'s decision threshold to the best-F1 one on the validation split; returns a summary.

    The validation split should be a calibration split (``data.calibration_fraction``): data the
    weights were not trained on, and not the file the judge is finally reported on.
    """
    probs, labels = _validation_scores(module, datamodule)
    summary = calibration_summary(probs, labels)
    if summary is None:
        return {}
    module.hparams.decision_threshold = summary["decision_threshold"]
    print(f"decision threshold {summary['decision_threshold']} chosen on {len(labels)} validation pairs "
          "(best F1): "
          f"precision={summary['calibration_precision']:.4f} recall={summary['calibration_recall']:.4f} "
          f"f1={summary['calibration_f1']:.4f}", flush=True)
    return summary


def measure_fixed_threshold(module: PairClassifier, datamodule: Any) -> dict[str, float]:
    """Without ``threshold_from_val`` the export keeps ``model.decision_threshold``; its figures on
    the validation (calibration) split are still stored, in the keys a chosen threshold's are, so
    ``python -m equiv.judge.ensemble`` can check that its members share one calibration split."""
    if not datamodule.labelled_pairs("val")[0]:
        return {}
    probs, labels = _validation_scores(module, datamodule)
    summary = fixed_threshold_summary(probs, labels, float(module.hparams.decision_threshold))
    print(f"decision threshold {summary['decision_threshold']} kept (threshold_from_val: false); on "
          f"{len(labels)} validation pairs: precision={summary['calibration_precision']:.4f} "
          f"recall={summary['calibration_recall']:.4f} f1={summary['calibration_f1']:.4f}", flush=True)
    return summary


def _validation_scores(module: PairClassifier, datamodule: Any) -> tuple[list[float], list[int]]:
    """The module's probability of "equivalent" for each validation pair, and the pairs' labels."""
    was_training = module.training
    module.eval()
    probs: list[float] = []
    labels: list[int] = []
    with torch.inference_mode():
        for batch in datamodule.val_dataloader():
            batch = {k: v.to(module.device) for k, v in batch.items()}
            logits = module(batch).float()
            probs.extend(torch.softmax(logits, dim=-1)[:, 1].tolist())
            labels.extend(int(y) for y in batch["labels"].tolist())
    module.train(was_training)
    return probs, labels


def report_policy(judge_dir: Path, datamodule: Any, probs: Sequence[float]) -> dict[str, float]:
    """The export's stored policy (threshold, guard, floor, shortcut, prefilter) decided by
    :func:`equiv.judge.decide.decide` on the validation (calibration) split; printed with a count
    per reason and returned as ``policy_calibration_*`` (and, when a guard rule is on, the
    ``guard_calibration_*`` figures: the policy against the same policy without the guard).

    Whatever chose the threshold: a recipe that keeps a fixed threshold reports these as well.
    The threshold itself is never chosen with the guard in force. Chosen *with* the vetoes applied,
    the best-F1 threshold falls to almost zero (0.004 for the GSM8K recipe): on solution pairs the
    guard already rejects most non-equivalent pairs, so the score stops mattering and every pair the
    guard cannot read is merged -- on 101 labelled sibling steps from real search that judge's
    precision was 0.375 (docs/experiments/2026-11-24-the-yardsticks-that-do-not-wear-out.md).
    """
    pairs, labels, _ = datamodule.labelled_pairs("val")
    out, counts = policy_summary(stored_policy(judge_dir), pairs, probs, labels, datamodule.labelled_questions("val"))
    print(f"decision policy on {len(labels)} validation pairs: precision={out['policy_calibration_precision']:.4f} "
          f"recall={out['policy_calibration_recall']:.4f} f1={out['policy_calibration_f1']:.4f}; "
          + ", ".join(f"{reason} {n}" for reason, n in counts.items()), flush=True)
    if "guard_calibration_vetoes" in out:
        print(f"guard: it vetoes {int(out['guard_calibration_vetoes'])} pairs; precision "
              f"{out['unguarded_calibration_precision']:.4f} -> {out['guard_calibration_precision']:.4f}, f1 "
              f"{out['unguarded_calibration_f1']:.4f} -> {out['guard_calibration_f1']:.4f}", flush=True)
    return out


def attach_statement_floor(judge_dir: Path, floor: float, plan_floor: float | None = None) -> None:
    """Store the statement floor in the export's policy. Not chosen here: a calibration split holds too
    few pairs of two steps that compute nothing (solution pairs nearly always compute) to pick it
    on; the recipe's value was chosen by cross-validation over labelled sibling steps
    (docs/results.md).

    The restatement rule goes with the floor (two statements that restate each other merge
    without the model: what the floor was adopted with, docs/experiments/2026-11-27-restated-
    statements-pass-the-floor.md). Since the rule became its own knob (a314fbd) the export,
    written without a floor, had resolved it off and the floor set here left it off: every fit
    after 2026-11-28 exported the floor without its restatement rule (issue 65).

    ``plan_floor``: the floor of such pairs where a step is a numbered plan (None: ``floor``)."""
    update_policy(judge_dir, floor=floor, restate=True, **({"plan_floor": plan_floor} if plan_floor else {}))
    plans = f" ({plan_floor} where a step is a numbered plan)" if plan_floor else ""
    print(f"statement floor: pairs of steps that both compute nothing merge at probability >= {floor}{plans}",
          flush=True)


def format_metrics(title: str, metrics: dict[str, float]) -> str:
    """``title: f1=0.9123 accuracy=... precision=... recall=...`` (the judge's headline numbers)."""
    if not metrics:
        return f"{title}: no validation ran (limit_val_batches=0 or no validation data)"
    parts = [f"{name}={metrics[name]:.4f}" for name in METRIC_NAMES if name in metrics]
    if "epoch" in metrics:
        parts.append(f"(epoch {int(metrics['epoch'])})")
    return f"{title}: " + " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``trainer_cli.py``; returns the exit status."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with exit_on_input_error():
        JudgeCLI(args=argv)
    return 0
