"""k-fold cross-validation by problem: the judge-quality yardstick that does not wear out.

One held-out file scored again and again stops being held out: every lever chosen by its figure
is tuned to it, and at a few hundred pairs one F1 figure moves by about +-0.02 from sampling alone.
So judge choices are made here instead, over *every* labelled training pair:

1. the pairs of ``data.train`` + ``data.train_more`` of a recipe (plus ``--data`` files, e.g.
   labelled sibling pairs from search) are grouped by problem
   (:func:`equiv.data.records.problem_key`) and the problems dealt into ``k`` folds by a salted
   hash (stable across machines, file order and runs; independent of the recipe's own
   calibration split, which is drawn inside each fold's training part);
2. for each fold the recipe is fitted on the other folds exactly as ``trainer_cli.py fit`` does
   (a subprocess: its own calibration split, threshold and export), and the held-out
   fold is scored as ``search_cli.py pairs --strategy model`` would;
3. every pair's out-of-fold scores are written to ``oof.jsonl``, and
   :mod:`equiv.prune.yardstick` turns them into the table: mean +- spread over folds of precision,
   recall, F1 and the false-merge rate for the trained judge, its guarded form and the rules --
   pooled, and with ``--data`` (or ``--score_apart`` for a file the recipe already trains on) also
   one table per distribution (each such file, and the rest: ``recipe``).

A labelled file no fold may train on -- siblings of problems nobody fitted on, say -- is scored
with ``--unseen FILE``: each pair by the judge of its problem's fold (which never saw that
problem), decided with that fold's calibration rows, and tabled on its own (``unseen.jsonl``). It
only scores, so it can be added to a finished run.

A fold whose export exists is not refitted, so an interrupted run resumes. Fits can run side by
side (``--workers``), each with its share of the CPU threads.

An ensemble (:mod:`equiv.judge.ensemble`, such as the recipe's two seeds) is
cross-validated from finished runs, with no new fit: ``--members A B`` names two ``--out``
directories of the same folds (for example the recipe with two seeds); each fold's judges are averaged and calibrated on
that fold's calibration split, exactly as ``python -m equiv.judge.ensemble`` does for the shipped
fits, and scored like any fold judge.

    equiv crossval --recipe configs/gsm8k_equiv.yaml --folds 5 --out outputs/cv
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence


from equiv.cliargs import add_recipe, as_lists, command_parser, parse_or_refuse
from equiv.data.records import LabelMapping, PairRecord, problem_key, question_of, read_pair_records, write_pair_records
from equiv.errors import InputError, exit_on_input_error, writable_directory
from equiv.judge.ensemble import build_ensemble, calibrate_ensemble, read_recipe, threshold_choice
from equiv.judge.policy import policy_from_settings
from equiv.prune import build_judge, ModelJudge, PrunerConfig
from equiv.prune.yardstick import (format_ranking, format_table, pooled_table, ranking_table, read_oof,
                                   source_file, split_by_source, yardstick_table)

OOF = "oof.jsonl"
UNSEEN = "unseen.jsonl"
FOLDS = "folds.json"
ROOT = Path(__file__).resolve().parents[2]


def fold_of(problem: str, folds: int, seed: int) -> int:
    """The fold a problem belongs to: a salted hash, so it never lines up with the recipe's own
    hash-based calibration split (which would leave some fold without calibration problems)."""
    digest = hashlib.sha1(f"equiv-cv:{seed}:{problem}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % folds


def assign_folds(records: Sequence[PairRecord], folds: int, seed: int = 0) -> list[int]:
    """The fold of each record (whole problems stay together)."""
    if folds < 2:
        raise InputError(f"must be >= 2, got {folds}", field="folds")
    out = [fold_of(problem_key(r), folds, seed) for r in records]
    empty = sorted(set(range(folds)) - set(out))
    if empty:
        raise InputError(f"folds {empty} got no problem: {len({problem_key(r) for r in records})} problems "
                         f"for {folds} folds; use fewer folds", field="folds")
    return out


def _recipe(config: Path) -> dict[str, Any]:
    data = read_recipe(config)
    if not isinstance(data.get("data"), dict) or not data["data"].get("train"):
        raise InputError("a recipe with a data.train file is needed", path=config, field="data.train")
    return data


def recipe_files(config: Path) -> list[Path]:
    """The recipe's ``data.train`` and ``data.train_more`` files (relative paths: from the repository root)."""
    data = _recipe(config)["data"]
    return [Path(p) if Path(p).is_absolute() else ROOT / p for p in [data["train"], *(data.get("train_more") or [])]]


def check_score_apart(config: Path, data: Sequence[str | Path], apart: Sequence[str | Path]) -> None:
    """Each ``--score_apart`` file must be one the folds are dealt from (the recipe's or a ``--data``
    file): any other would silently print no table."""
    pooled = {p.resolve() for p in recipe_files(config)} | {Path(p).resolve() for p in data}
    for name in apart:
        if Path(name).resolve() not in pooled:
            raise InputError("is neither a file of the recipe's data.train / data.train_more nor a --data file",
                             path=name, field="score_apart")


def check_unseen(config: Path, data: Sequence[str | Path], unseen: Sequence[str | Path]) -> None:
    """An ``--unseen`` file must be one no fold trains on: not the recipe's, not a ``--data`` file."""
    pooled = {p.resolve() for p in recipe_files(config)} | {Path(p).resolve() for p in data}
    for name in unseen:
        if Path(name).resolve() in pooled:
            raise InputError("is trained on by the folds (the recipe's data or --data); --unseen takes a file "
                             "no fold trains on (--score_apart scores a pooled file on its own)", path=name, field="unseen")
        if not Path(name).is_file():
            raise InputError("no such file", path=name, field="unseen")


def recipe_records(config: Path, extra: Sequence[str | Path] = ()) -> tuple[list[PairRecord], LabelMapping]:
    """Every labelled pair the recipe trains on (``data.train`` + ``data.train_more``, paths relative
    to the repository root as in the recipes) plus ``extra`` files, and the recipe's label mapping."""
    data = _recipe(config)["data"]
    paths = recipe_files(config) + [Path(p) for p in extra]
    records: list[PairRecord] = []
    for path in paths:
        if not Path(path).is_file():
            raise InputError("no such file", path=path, field="data.train")
        found, _ = read_pair_records(path)
        records.extend(found)
    mapping = LabelMapping(tuple(data.get("label_equivalent") or (3, 4)), tuple(data.get("label_not_equivalent") or (0, 1)))
    return records, mapping


def write_fold_files(records: Sequence[PairRecord], folds: Sequence[int], k: int, out: Path) -> tuple[Path, Path]:
    """``fold<k>/train.jsonl`` (every other fold) and ``fold<k>/test.jsonl``; the same content is
    never rewritten, so a resumed run sees the files its fits were trained on."""
    fold_dir = out / f"fold{k}"
    fold_dir.mkdir(parents=True, exist_ok=True)
    train, test = fold_dir / "train.jsonl", fold_dir / "test.jsonl"
    write_pair_records([r for r, f in zip(records, folds) if f != k], train)
    write_pair_records([r for r, f in zip(records, folds) if f == k], test)
    return train, test


def fit_command(config: Path, overlays: Sequence[Path], train: Path, fold_dir: Path, fit_args: Sequence[str]) -> list[str]:
    """The ``trainer_cli.py fit`` command of one fold: the recipe on the fold's training part."""
    cmd = [sys.executable, str(ROOT / "trainer_cli.py"), "fit", "--config", str(config)]
    for overlay in overlays:
        cmd += ["--config", str(overlay)]
    cmd += [f"--data.train={train}", "--data.train_more=[]", f"--trainer.default_root_dir={fold_dir}",
            f"--export_dir={fold_dir / 'judge'}", "--trainer.logger=false", "--trainer.enable_progress_bar=false"]
    return cmd + list(fit_args)


def run_fit(cmd: list[str], fold_dir: Path, threads: int) -> Path:
    """Run one fold's fit (log in ``fold<k>/fit.log``); an existing export is reused."""
    judge = fold_dir / "judge"
    if (judge / "config.json").is_file():
        return judge
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="offline")
    start = time.time()
    with (fold_dir / "fit.log").open("w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        status = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    if status != 0 or not (judge / "config.json").is_file():
        raise InputError(f"the fit failed (exit {status}); see its log", path=fold_dir / "fit.log")
    print(f"{fold_dir.name}: fitted in {time.time() - start:.0f} s", flush=True)
    return judge


def ensemble_fold(members: Sequence[Path], fold_dir: Path, calibration: Sequence[PairRecord], mapping: LabelMapping,
                  choice: dict[str, Any]) -> Path:
    """One fold's ensemble: the members' judges of this fold averaged (``fold<k>/judge`` of each
    member run) and calibrated on the fold's calibration split as the recipe's ``fit`` chooses a
    threshold (``choice``: :func:`equiv.judge.ensemble.threshold_choice`); an existing one is reused. Each
    member must have been fitted on exactly this fold's training part (its ``train.jsonl`` is
    compared byte for byte), or the ensemble would be scored on pairs a member trained on."""
    judge = fold_dir / "judge"
    if (judge / "config.json").is_file():
        return judge
    mine = (fold_dir / "train.jsonl").read_bytes()
    for member in members:
        theirs = member / fold_dir.name / "train.jsonl"
        if not theirs.is_file() or not (member / fold_dir.name / "judge" / "config.json").is_file():
            raise InputError(f"has no fitted {fold_dir.name}; finish that cross-validation first", path=member,
                             field="members")
        if theirs.read_bytes() != mine:
            raise InputError(f"{fold_dir.name} was fitted on other pairs than this cross-validation deals "
                             "(another recipe, --data or --fold_seed)", path=member, field="members")
    kept = [(r, y) for r in calibration if (y := mapping.label(r.result)) is not None]
    partial = fold_dir / "judge.partial"  # renamed once calibrated: an interrupted build is never reused
    shutil.rmtree(partial, ignore_errors=True)
    build_ensemble([member / fold_dir.name / "judge" for member in members], partial)
    calibrate_ensemble(partial, [(r.sentence1, r.sentence2) for r, _ in kept], [int(y) for _, y in kept],
                       questions=[question_of(r) for r, _ in kept], fixed_threshold=choice["fixed_threshold"])
    shutil.rmtree(judge, ignore_errors=True)
    partial.rename(judge)
    print(f"{fold_dir.name}: ensemble of {len(members)} judges calibrated on {len(kept)} pairs", flush=True)
    return judge


def score_fold(judge_dir: Path, records: Sequence[PairRecord], mapping: LabelMapping, fold: int,
               part: str = "test") -> list[dict[str, Any]]:
    """Rows of one fold: the judge as ``--strategy model`` builds it and its raw classifier, each with its stored threshold and without the guard (the
    ``+guard`` policies of :mod:`equiv.prune.yardstick` add it), and the export's stored
    ``policy``, which :func:`equiv.prune.yardstick.shipped_policy` decides with. ``part`` says which pairs:
    ``test`` (the held-out fold) or ``calibration`` (the fold fit's own calibration split, on which a
    threshold policy may be chosen again without touching the held-out fold)."""
    kept = [(r, y) for r in records if (y := mapping.label(r.result)) is not None]
    pairs = [(r.sentence1, r.sentence2) for r, _ in kept]
    # Unguarded, unfloored scores, whatever the export stores: the yardstick applies the claim guard
    # itself, with each pair's question (a judge asked without questions would guard on numbers
    # alone), and its ``+floorS`` policies the statement floor; each row records the floor the
    # export stores (``statement_threshold``), for the reader.
    judge = build_judge(PrunerConfig(strategy="model", model=str(judge_dir), device="cpu", guard=False, floor=0.0))
    raw = ModelJudge(judge_dir, device="cpu", guard=False, floor=0.0)
    stored = policy_from_settings(raw.settings, source=Path(judge_dir) / "config.json")
    floor = stored.floor
    assert judge is not None
    found = judge.pair_verdicts(pairs, score_ruled=True)  # every pair scored, as pair_probabilities does
    raw_probs = raw.pair_probabilities(pairs)
    return [{
        "id": r.extra.get("id"), "problem": problem_key(r), "fold": fold, "label": y, "result": r.result,
        "sentence1": r.sentence1, "sentence2": r.sentence2, "question": r.extra.get("question", ""),
        **v.to_json(), "threshold": judge.threshold, "raw_prob": q, "raw_threshold": raw.threshold,
        "judge": judge.name, "source": r.source, "part": part, "statement_threshold": floor,
        "policy": stored.to_dict(),
    } for (r, y), v, q in zip(kept, found, raw_probs)]


def build_parser() -> Any:
    """The command's parser (jsonargparse through :func:`equiv.cliargs.command_parser`: the same
    ``--help`` layout and one-line errors as every command). ``--recipe`` is the trainer recipe
    each fold fits with; ``--config`` is a YAML of these options, as in every command (a recipe
    given to it is refused with the fix, :func:`equiv.cliargs.refuse_recipe_as_config`);
    :func:`parse` gives the paths as :class:`~pathlib.Path`."""
    p = command_parser("python -m equiv.prune.crossval", __doc__.splitlines()[0])
    add_recipe(p, "the one each fold fits with (its data.train + data.train_more are pooled)")
    p.add_argument("--overlay", action="append", default=[],
                   help="a further recipe file layered on --recipe for each fit (fit --config RECIPE --config OVERLAY)")
    p.add_argument("--data", action="append", default=[], help="more labelled pair files to pool (e.g. labelled siblings); "
                   "each is also scored on its own")
    p.add_argument("--score_apart", "--score-apart", action="append", default=[],
                   help="a file the recipe already trains on (e.g. its sibling pairs) to score on its own as well")
    p.add_argument("--unseen", action="append", default=[],
                   help="a labelled file no fold trains on (e.g. siblings of other problems): each pair scored by "
                   "the judge of its problem's fold, tabled on its own in unseen.jsonl; scoring only, so it may be "
                   "added to a finished run")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--fold_seed", type=int, default=0, help="salt of the problem-to-fold hash")
    p.add_argument("--only", type=int, nargs="*", help="run these folds only (the rest later, or elsewhere)")
    p.add_argument("--workers", type=int, default=1, help="fits side by side (each gets cpu_count / workers threads)")
    p.add_argument("--members", nargs="+", default=[],
                   help="finished cross-validations (--out directories) of the same folds: each fold's judges "
                   "are averaged and calibrated as python -m equiv.judge.ensemble does; nothing is fitted, "
                   "so --overlay and the fit arguments are not used")
    p.add_argument("--out", required=True, help="directory of the folds' fits and scores (a run resumes in it)")
    fit_args = p.add_argument("fit_args", nargs=argparse.REMAINDER, help="after --: extra trainer_cli.py fit "
                              "arguments, e.g. -- --trainer.max_epochs=2 --threshold_from_val=true")
    fit_args.required = False  # none is fine; argparse marks every positional required, and --help would say so
    return p


def parse(argv: Sequence[str]) -> Any:
    """The command line (:func:`build_parser`), a bad option or value refused in one line (exit 2),
    with ``--recipe``, ``--overlay``, ``--members`` and ``--out`` as paths: jsonargparse checks a
    ``type`` against each default, and ``Path([])`` is no path. A repeatable option a config file
    gives as one value (``data: siblings.jsonl``) is a list of that one."""
    args = as_lists(parse_or_refuse(build_parser(), argv), "overlay", "data", "score_apart", "unseen", "members",
                    "only")
    args.recipe, args.out = Path(args.recipe), Path(args.out)
    args.overlay, args.members = [Path(o) for o in args.overlay], [Path(m) for m in args.members]
    return args


def crossval(args: Any) -> Path:
    """Fit and score every fold; returns the ``oof.jsonl`` path."""
    config = args.recipe.resolve()
    check_score_apart(config, args.data, args.score_apart)
    check_unseen(config, args.data, args.unseen)
    records, mapping = recipe_records(config, args.data)
    folds = assign_folds(records, args.folds, args.fold_seed)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError("is a file; give a directory", path=out, field="out")
    writable_directory(out)  # created, and the one output rule: never a FIFO, a device or a dangling link
    fit_args = [a for a in args.fit_args if a != "--"]
    # "config": the recipe, under the key it had before --recipe was its option's name, so a run
    # begun then still resumes in its --out
    plan = {"config": str(config), "overlays": [str(o) for o in args.overlay], "data": [str(d) for d in args.data],
            "folds": args.folds, "fold_seed": args.fold_seed, "fit_args": fit_args, "pairs": len(records),
            "problems": len({problem_key(r) for r in records})}
    if args.members:
        plan["members"] = [str(m.resolve()) for m in args.members]
    plan_file = out / FOLDS
    if plan_file.is_file():
        old = json.loads(plan_file.read_text())
        if old != plan:
            raise InputError(f"holds a cross-validation with other settings ({FOLDS}); use a new --out", path=out)
    else:
        plan_file.write_text(json.dumps(plan, indent=1) + "\n")
    wanted = list(range(args.folds)) if not args.only else sorted(set(args.only))
    from equiv.data.datamodule import split_by_problem  # Lightning: imported for a run, not for `--help`

    recipe = _recipe(config)
    fraction = float(recipe["data"].get("calibration_fraction") or 0.0)
    jobs = []
    for k in wanted:
        train, _ = write_fold_files(records, folds, k, out)
        jobs.append((k, fit_command(config, args.overlay, train, out / f"fold{k}", fit_args)))
    if args.members:
        if fraction <= 0:
            raise InputError("an ensemble is calibrated on the recipe's calibration split; set data.calibration_fraction",
                             path=config, field="data.calibration_fraction")
        judges = {k: ensemble_fold(args.members, out / f"fold{k}",
                                   split_by_problem([r for r, f in zip(records, folds) if f != k], fraction)[1],
                                   mapping, threshold_choice(config, recipe)) for k, _ in jobs}
    else:
        threads = max(1, (os.cpu_count() or 1) // max(1, args.workers))
        with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
            judges = dict(zip([k for k, _ in jobs],
                              pool.map(lambda job: run_fit(job[1], out / f"fold{job[0]}", threads), jobs)))
    rows: list[dict[str, Any]] = []
    for k in range(args.folds):
        judge = out / f"fold{k}" / "judge"
        if k not in judges and not (judge / "config.json").is_file():
            continue
        rows.extend(score_fold(judge, [r for r, f in zip(records, folds) if f == k], mapping, k))
        if fraction > 0:  # the fit's own calibration split, drawn exactly as the data module draws it
            _, calibration = split_by_problem([r for r, f in zip(records, folds) if f != k], fraction)
            rows.extend(score_fold(judge, calibration, mapping, k, part="calibration"))
    oof = out / OOF
    write_rows(oof, rows)
    print(f"out-of-fold scores of {len(rows)} pairs in {len({r['fold'] for r in rows})} folds: {oof}", flush=True)
    if args.unseen:
        unseen = score_unseen(args.unseen, out, args.folds, args.fold_seed, mapping)
        print(f"scores of {sum(1 for _ in unseen.open())} pairs no fold trained on, each by its problem's fold judge: "
              f"{unseen}", flush=True)
    return oof


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Score rows as JSON Lines (``oof.jsonl``, ``unseen.jsonl``): what the yardstick reads back."""
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def score_unseen(files: Sequence[str | Path], out: Path, k: int, fold_seed: int, mapping: LabelMapping) -> Path:
    """``unseen.jsonl``: every pair of ``files`` scored by the judge of its problem's fold (dealt by
    the same hash as the pooled pairs), which trained on none of that problem's pairs. A fold with
    no judge yet is refused by name rather than silently leaving its pairs out."""
    rows: list[dict[str, Any]] = []
    for name in files:
        records, _ = read_pair_records(name)
        folds = assign_folds(records, k, fold_seed)
        for fold in sorted(set(folds)):
            judge = out / f"fold{fold}" / "judge"
            if not (judge / "config.json").is_file():
                raise InputError(f"fold {fold} has no judge yet; run every fold before scoring --unseen", path=name,
                                 field="unseen")
            rows.extend(score_fold(judge, [r for r, f in zip(records, folds) if f == fold], mapping, fold))
    path = out / UNSEEN
    write_rows(path, rows)
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    with exit_on_input_error():
        oof = crossval(args)

        rows = read_oof(oof)
        print(format_table(yardstick_table(rows)))
        print("\nthe scores themselves, threshold-free: average precision per held-out fold")
        print(format_ranking(ranking_table(rows)))
        apart = [*args.data, *args.score_apart]
        if apart:  # pooled distributions, each also on its own (e.g. siblings from search)
            for name, group in split_by_source(rows, apart).items():
                held_out = [r for r in group if r.get("part", "test") == "test"]
                print(f"\n{name}: {len(held_out)} held-out pairs; mean ± spread over folds")
                print(format_table(yardstick_table(group)))
                print(format_ranking(ranking_table(group)))
                print(f"{name}: pooled over folds, ± bootstrap over problems")
                print(format_table(pooled_table(group), count="problems"))
        if args.unseen:  # each fold's verdicts use its own calibration rows, as for the pooled pairs
            calibration = [r for r in rows if r.get("part") == "calibration"]
            unseen = read_oof(args.out / UNSEEN)
            for name in args.unseen:
                group = [r for r in unseen if source_file(r) == str(Path(name).resolve())]
                print(f"\n{name}: {len(group)} pairs no fold trained on, each scored by its problem's fold judge; "
                      "pooled over folds, ± bootstrap over problems")
                print(format_table(pooled_table(group + calibration), count="problems"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
