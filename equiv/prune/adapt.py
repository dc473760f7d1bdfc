"""``equiv adapt``: set an exported judge's decision policy for a new policy's siblings.

A user prunes a policy nobody trained the judge on. Its siblings differ from the recipe's
solution-step pairs (issue 65: a real policy's plans and headers), so the threshold and the
statement floor the recipe chose are not the ones its data supports. From a few hundred of that
policy's sibling pairs (``siblings``, then ``label``) and a precision the user names, this command
chooses the two settings that move -- the threshold and the statement floor (a value, or off) --
and writes a NEW export that decides with them, with where they came from. Numbered plans keep
the export's own floor (``plan_floor``, where it stores one): the adapted floor is the other
statements'; where it chooses no floor, plans have none either.

How it chooses (why each step):

- The rules stay as the export has them (same-step shortcut, prefilter, guard, restatement):
  they read the texts only, so they are not what a policy's wording moves; only the two
  probability cut-offs are adapted.
- The model scores each pair once (its probability cached); every candidate after that is pure:
  per floor, one :func:`equiv.judge.decide.decide` over the cached probabilities and
  :func:`equiv.judge.decide.sweep_scores`, whose scores merge at threshold ``t`` exactly the pairs
  the policy would merge -- so the sweep and the live judge cannot disagree.
- A choice is "the most recall whose precision, less its sampling error, is at least the one
  named": the Wilson lower bound of the merges' precision, ``--z`` standard errors below the
  point estimate (default 1), must reach it (ties: the higher threshold, then no floor before a
  floor: fewer merges, fewer rules). Why the bound: a setting whose precision on a few hundred
  pairs *just* reaches the figure falls below it on new pairs about half the time -- on the
  development siblings the point-estimate choice reached 0.73 (gemma, 0.90 asked) and 0.94
  (Qwen, 0.95 asked) cross-validated (docs/experiments/2026-11-29-adapt.md).
- Its figures are cross-validated BY PROBLEM (pairs of one problem share a template, so a pair's
  neighbours are not independent): problems are dealt into folds by a salted hash, the choice
  is made on the other folds and scored on the held-out one, and the held-out verdicts are
  pooled: precision, recall, F1, false-merge rate, each with its spread over a bootstrap of
  problems and over folds. The export's setting is the same choice made on every pair.
- The cross-validated figure passes the SAME test as the choice: the Wilson lower bound of the
  pooled held-out merges' precision (``--z`` again; ``precision_lower``) must reach the named
  precision. Why: the point estimate of a handful of held-out merges says little -- on gemma's
  300 development pairs (23 equivalent) 8 right merges of 8 read as precision 1.000, yet their
  bound at z 1 is 0.889, and on the sealed siblings that choice merged 14 false pairs of 50
  (docs/experiments/2026-11-29-training-on-the-policys-plans.md). ``--z 0`` asks the point
  estimates, as before.
- If no setting reaches the named precision on the pairs, or the cross-validated bound falls
  below it, nothing is written: one line says so and the exit status is 1 (a judge that claims a
  precision its data does not support would be worse than none; label more pairs -- above all
  more equivalent ones, since only merges count -- or name a lower precision).

Layer: prune (it loads the judge through :class:`equiv.prune.model_judge.ModelJudge`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

from equiv.cliargs import command_parser, declare_data_file, parse_or_refuse
from equiv.data.records import LabelMapping, PairRecord, question_of, read_pair_records
from equiv.errors import InputError, exit_on_input_error, output_directory_kind
from equiv.judge.calibrate import binary_metrics, candidate_thresholds, spread_by_problem
from equiv.judge.decide import decide, sweep_scores
from equiv.judge.policy import DecisionPolicy

ADAPTED_KEY = "adapted"
"""``equiv.adapted`` in the new export's ``config.json``: the provenance of its policy."""
DEFAULT_FLOORS = (0.0, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)
"""The statement floors tried (0: off); every threshold between the pairs' scores is tried with each."""
EXIT_UNREACHABLE = 1
"""The exit status when the data cannot support the named precision (nothing is written)."""


@dataclass
class AdaptData:
    """The labelled sibling pairs of the user's policy.

    Attributes:
        path: labelled pairs (MathEquiv format: sentence1, sentence2, result 0-4, and ``problem``,
            the problem each pair belongs to; ``siblings`` writes it). --data FILE is the same setting.
    """

    path: Optional[str] = None


def build_parser() -> Any:
    """``adapt``'s parser: ``--model`` (the judge export), ``--data`` (labelled pairs),
    ``--precision``, ``--out``, and the cross-validation's folds and seed."""
    p = command_parser("search_cli.py adapt", "Set an exported judge's threshold and statement floor for your "
                       "policy's labelled sibling pairs, to a precision you name (cross-validated by problem); "
                       "writes a new export.")
    p.add_class_arguments(AdaptData, "data")
    declare_data_file(p)
    p.add_argument("--model", type=Optional[str], default=None, help="the judge export to adapt (read only)")
    p.add_argument("--precision", type=Optional[float], default=None,
                   help="the precision the adapted judge must reach (e.g. 0.95), in (0, 1)")
    p.add_argument("--out", type=Optional[str], default=None,
                   help="the new export's folder (a new path or an empty folder; never the judge's own)")
    p.add_argument("--z", type=float, default=DEFAULT_Z,
                   help="a setting qualifies when its precision's Wilson lower bound, this many standard errors "
                   "below the estimate, reaches --precision, and the export is written only when the bound of the "
                   "pooled cross-validated merges does too (0: the point estimates, the behaviour before the "
                   "cross-validated bound)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds, by problem (>= 2)")
    p.add_argument("--seed", type=int, default=0, help="the salt of the problems' fold assignment")
    p.add_argument("--floors", type=Optional[list[float]], default=None,
                   help=f"statement floors to try (0: off); default {list(DEFAULT_FLOORS)}")
    p.add_argument("--drop_unmapped", "--drop-unmapped", action="store_true",
                   help="leave out pairs whose level the judge's label mapping drops (2, 'cannot judge'), "
                   "counted, instead of refusing them")
    p.add_argument("--batch_size", "--batch-size", type=int, default=64, help="pairs per forward batch")
    p.add_argument("--device", type=str, default="auto", help="auto, cpu, cuda, ...")
    p.add_argument("--json", action="store_true", help="print only the result as one JSON object")
    return p


class Pairs(NamedTuple):
    """The labelled pairs the choice is made on."""

    pairs: list[tuple[str, str]]
    labels: list[int]
    questions: list[str]
    problems: list[str]
    dropped: int


def read_adapt_pairs(path: str, mapping: LabelMapping, drop_unmapped: bool) -> Pairs:
    """The pairs of ``path``, each with its label under ``mapping`` and its ``problem``.

    Refused in one line naming file:line:field: a bad record (:func:`read_pair_records`), a pair
    without a ``problem`` (folds are made of whole problems, and guessing them from ids would
    put one problem's pairs on both sides of a fold), a level the mapping drops unless
    ``drop_unmapped``; and a file with fewer than two problems or no pair of either label."""
    records, _ = read_pair_records(path)
    kept: list[PairRecord] = []
    dropped = 0
    for record in records:
        line = _line_of(record)
        problem = record.extra.get("problem")
        if not isinstance(problem, str) or not problem.strip():
            raise InputError("missing or empty: adapt deals whole problems into its cross-validation folds and "
                             "takes each pair's problem from this field only (siblings writes it)",
                             path=path, line=line, field="problem")
        if mapping.label(record.result) is None:
            if drop_unmapped:
                dropped += 1
                continue
            raise InputError(f"level {record.result} maps to neither label under the judge's label mapping "
                             f"(equivalent {list(mapping.equivalent)}, not {list(mapping.not_equivalent)}); "
                             "relabel or remove the pair, or pass --drop_unmapped", path=path, line=line,
                             field="result")
        kept.append(record)
    if not kept:
        raise InputError("holds no labelled pairs", path=path)
    pairs, labels = mapping.binary_pairs(kept)
    problems = [str(r.extra["problem"]) for r in kept]
    if len(set(problems)) < 2:
        raise InputError("holds pairs of fewer than two problems; cross-validation by problem needs more",
                         path=path, field="problem")
    if len(set(labels)) < 2:
        raise InputError("holds pairs of one label only; a threshold needs equivalent and non-equivalent pairs",
                         path=path, field="result")
    return Pairs(pairs, labels, [question_of(r) for r in kept], problems, dropped)


def _line_of(record: PairRecord) -> int | None:
    tail = record.source.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


DEFAULT_Z = 1.0
"""Standard errors the precision's Wilson lower bound lies below its estimate when a setting is chosen."""


def wilson_lower(successes: int, n: int, z: float) -> float:
    """The Wilson score interval's lower end for ``successes`` of ``n`` (0 when ``n`` is 0)."""
    if n == 0:
        return 0.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


class Choice(NamedTuple):
    """A candidate setting and its figures on the pairs it was judged on."""

    floor: float  # 0: off
    threshold: float
    precision: float
    recall: float
    merges: int


class Candidates:
    """Per floor, each pair's sweep score (:func:`equiv.judge.decide.sweep_scores`) under the
    export's policy with that floor: any threshold ``t`` merges exactly the pairs whose score is
    ``>= t``. Built once from the cached probabilities; every choice after it is pure."""

    def __init__(self, policy: DecisionPolicy, pairs: Sequence[tuple[str, str]], probabilities: Sequence[float | None],
                 questions: Sequence[str], floors: Sequence[float]) -> None:
        self.policy = policy
        self.scores: dict[float, list[float]] = {}
        for floor in floors:
            with_floor = policy.with_knobs(floor=floor)
            verdicts = decide(pairs, with_floor, list(probabilities), list(questions))
            self.scores[floor] = sweep_scores(pairs, verdicts, with_floor)

    def choose(self, index: Sequence[int], labels: Sequence[int], precision: float,
               z: float = DEFAULT_Z) -> Choice | None:
        """On the pairs ``index``: the (floor, threshold) with the most recall whose precision's
        Wilson lower bound (``z`` standard errors; 0: the point estimate) is >= ``precision``;
        ties go to the higher threshold, then to no floor / the lower floor. None when no
        setting reaches it."""
        best: tuple[Any, ...] | None = None
        chosen: Choice | None = None
        y = [labels[i] for i in index]
        for floor, scores in self.scores.items():
            s = [scores[i] for i in index]
            for t in candidate_thresholds(s):
                if not 0.0 < t <= 1.0:
                    continue
                m = binary_metrics([v >= t for v in s], y)
                if m.tp == 0 or wilson_lower(m.tp, m.tp + m.fp, z) < precision:
                    continue
                key = (m.recall, t, -floor)
                if best is None or key > best:
                    best, chosen = key, Choice(floor, t, m.precision, m.recall, m.tp + m.fp)
        return chosen

    def merged(self, choice: Choice, index: Sequence[int]) -> list[bool]:
        scores = self.scores[choice.floor]
        return [scores[i] >= choice.threshold for i in index]


def fold_of(problem: str, folds: int, seed: int) -> int:
    """A problem's fold: a salted hash (stable across machines and file order)."""
    digest = hashlib.sha1(f"equiv-adapt:{seed}:{problem}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % folds


def cross_validate(candidates: Candidates, data: Pairs, precision: float, folds: int, seed: int,
                   z: float = DEFAULT_Z) -> dict[str, Any]:
    """Choose on the other folds, score the held-out one; the held-out verdicts pooled (± a
    bootstrap over problems) and per fold (mean ± spread). A fold whose training part reaches no
    setting merges nothing (the honest cost of that fold's data). ``precision_lower`` is the
    pooled merges' Wilson lower bound at ``z``: the figure the export must reach, as the choice did."""
    assigned = [fold_of(p, folds, seed) for p in data.problems]
    held_out: list[int] = []
    merged: list[bool] = []
    per_fold: list[dict[str, Any]] = []
    for k in range(folds):
        test = [i for i, f in enumerate(assigned) if f == k]
        if not test:
            continue
        train = [i for i, f in enumerate(assigned) if f != k]
        choice = candidates.choose(train, data.labels, precision, z)
        verdicts = candidates.merged(choice, test) if choice else [False] * len(test)
        m = binary_metrics(verdicts, [data.labels[i] for i in test])
        per_fold.append({"fold": k, "pairs": len(test), "problems": len({data.problems[i] for i in test}),
                         "floor": choice.floor if choice else None, "threshold": choice.threshold if choice else None,
                         "precision": m.precision, "recall": m.recall, "false_merge_rate": m.false_merge_rate,
                         "merges": m.tp + m.fp})
        held_out += test
        merged += verdicts
    labels = [data.labels[i] for i in held_out]
    problems = [data.problems[i] for i in held_out]
    m = binary_metrics(merged, labels)
    out: dict[str, Any] = {"precision": m.precision, "recall": m.recall, "f1": m.f1,
                           "false_merge_rate": m.false_merge_rate, "n": m.n, "problems": len(set(problems)),
                           "precision_lower": wilson_lower(m.tp, m.tp + m.fp, z), "z": z,
                           "tp": m.tp, "fp": m.fp, "fn": m.fn, "tn": m.tn, "folds": len(per_fold)}
    out.update(spread_by_problem(merged, labels, problems))
    for key in ("precision", "recall", "false_merge_rate"):
        values = [f[key] for f in per_fold if f["merges"] or key != "precision"]  # no merge: no precision
        out[f"{key}_fold_mean"] = statistics.fmean(values) if values else 0.0
        out[f"{key}_fold_spread"] = statistics.pstdev(values) if len(values) > 1 else 0.0
    out["per_fold"] = per_fold
    return out


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_out(out: str, model: str, data: str) -> Path:
    """``--out``: a new path or an empty folder, never the judge, inside it, or the data file."""
    target = output_directory_kind(out)
    resolved, judge = target.resolve(), Path(model).resolve()
    if resolved == judge or judge in resolved.parents:
        raise InputError("is the judge being adapted or lies inside it; the adapted judge is a new export: give "
                         "another path", path=out, field="out")
    if resolved == Path(data).resolve():
        raise InputError("is the data file; give another path", path=out, field="out")
    if target.is_dir() and any(target.iterdir()):
        raise InputError("exists and is not empty; adapt writes a new export and overwrites nothing: give a new "
                         "path or an empty folder", path=out, field="out")
    return target


def check_args(args: Any) -> None:
    """Every option the run needs, checked before the judge loads."""
    if not args.model:
        raise InputError("--model JUDGE is required (the export to adapt)", field="model")
    if not args.data.path:
        raise InputError("--data FILE is required (your policy's labelled sibling pairs)", field="data")
    if args.precision is None:
        raise InputError("--precision P is required (the precision the adapted judge must reach, e.g. 0.95)",
                         field="precision")
    if not 0.0 < float(args.precision) < 1.0:
        raise InputError(f"must be in (0, 1), got {args.precision}", field="precision")
    if not args.out:
        raise InputError("--out DIR is required (the new export; the judge itself is never changed)", field="out")
    if not 0.0 <= args.z <= 5.0:
        raise InputError(f"must be in [0, 5], got {args.z}", field="z")
    if args.folds < 2:
        raise InputError(f"must be >= 2, got {args.folds}", field="folds")
    if not Path(args.data.path).is_file():
        raise InputError("file not found", path=args.data.path, field="data")
    if not Path(args.model).is_dir():
        raise InputError("not an export folder (adapt writes a new export beside it, so it needs the exported "
                         "folder, not a checkpoint)", path=args.model, field="model")
    for floor in args.floors or ():
        if not 0.0 <= floor < 1.0:
            raise InputError(f"each floor must be in [0, 1) (0: off), got {floor}", field="floors")


def export_label_mapping(model: str) -> LabelMapping:
    """The label mapping the export was trained with (``equiv.label_mapping`` in its
    ``config.json``; the paper's when absent), read without loading the weights, so a bad data
    file is refused before the model loads."""
    from equiv.judge.export import read_json_config
    from equiv.judge.export_keys import SETTINGS_KEY

    settings = read_json_config(Path(model) / "config.json").get(SETTINGS_KEY) or {}
    if not isinstance(settings, dict) or "label_mapping" not in settings:
        return LabelMapping()
    return LabelMapping.from_dict(settings["label_mapping"])


def score_once(args: Any, data: Pairs) -> tuple[Any, list[float | None]]:
    """Load the judge and score every pair its rules leave open, once: the probabilities every
    candidate reads (None where a rule decided the pair)."""
    from equiv.prune.model_judge import ModelJudge

    judge = ModelJudge(args.model, batch_size=args.batch_size, device=args.device)
    verdicts = judge.pair_verdicts(data.pairs, data.questions)
    return judge, [v.probability for v in verdicts]


def write_export(model: str, out: Path, policy: DecisionPolicy, provenance: dict[str, Any]) -> None:
    """Copy the judge to a scratch folder beside ``out``, set its policy and provenance, then move
    it into place in one rename: ``out`` is whole or absent, and the judge is never touched."""
    from equiv.judge.export import update_settings

    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    try:
        tree = scratch / "export"
        shutil.copytree(model, tree, symlinks=False)
        update_settings(tree, {ADAPTED_KEY: provenance},
                        policy_knobs={"threshold": policy.threshold, "floor": policy.floor or 0.0})
        if out.is_dir():  # an empty folder the user made
            out.rmdir()
        os.replace(tree, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def adapt(args: Any, argv: Sequence[str]) -> tuple[int, dict[str, Any]]:
    """Run the command; returns the exit status and the result object it prints."""
    check_args(args)
    data_path = args.data.path
    out = check_out(args.out, args.model, data_path)
    precision = float(args.precision)
    floors = tuple(args.floors) if args.floors else DEFAULT_FLOORS
    data = read_adapt_pairs(data_path, export_label_mapping(args.model), args.drop_unmapped)
    judge, probabilities = score_once(args, data)
    stored = judge.policy
    candidates = Candidates(stored, data.pairs, probabilities, data.questions, floors)
    everything = list(range(len(data.pairs)))
    stored_merges = [v.merged for v in decide(data.pairs, stored, list(probabilities), data.questions)]
    before = binary_metrics(stored_merges, data.labels)
    as_exported = {"precision": before.precision, "recall": before.recall, "f1": before.f1,
                   "false_merge_rate": before.false_merge_rate, "merges": before.tp + before.fp,
                   **spread_by_problem(stored_merges, data.labels, data.problems)}
    result: dict[str, Any] = {"data": data_path, "pairs": len(data.pairs), "problems": len(set(data.problems)),
                              "dropped_unmapped": data.dropped, "precision_asked": precision,
                              "model": args.model, "stored_policy": stored.to_dict(),
                              "stored_on_these_pairs": as_exported}
    kept = (f"; the judge as exported: precision {before.precision:.3f} ± {as_exported['precision_spread']:.3f}, "
            f"recall {before.recall:.3f} ± {as_exported['recall_spread']:.3f} on these pairs (nothing chosen on them)")
    choice = candidates.choose(everything, data.labels, precision, args.z)
    if choice is None:
        result["error"] = (f"no threshold and floor reaches precision {precision:g} (its lower bound at z "
                           f"{args.z:g}) on these {len(data.pairs)} pairs ({len(set(data.problems))} problems); "
                           "nothing written: name a lower --precision or label more pairs" + kept)
        return EXIT_UNREACHABLE, result
    cv = cross_validate(candidates, data, precision, args.folds, args.seed, args.z)
    result["cross_validation"] = cv
    policy = stored.with_knobs(threshold=choice.threshold, floor=choice.floor)
    check = binary_metrics([v.merged for v in decide(data.pairs, policy, list(probabilities), data.questions)],
                           data.labels)
    assert abs(check.recall - choice.recall) < 1e-12, "the sweep and the evaluator disagree"
    result["policy"] = policy.to_dict()
    result["on_all_pairs"] = {"precision": choice.precision, "recall": choice.recall, "merges": choice.merges}
    if cv["precision_lower"] < precision:  # the choice's own test; no merge at all: a bound of 0
        merges = cv["tp"] + cv["fp"]
        result["error"] = (f"cross-validated by problem, {cv['tp']} of {merges} held-out merges are right (precision "
                           f"{cv['precision']:.3f}, recall {cv['recall']:.3f}, {cv['n']} pairs, {cv['problems']} "
                           f"problems); their lower bound at z {args.z:g} is {cv['precision_lower']:.3f}, below the "
                           f"{precision:g} asked, from {sum(data.labels)} equivalent pairs in the data; nothing "
                           "written: label more pairs, in particular more equivalent ones, or name a lower --precision"
                           + kept)
        return EXIT_UNREACHABLE, result
    provenance = {
        "data": str(Path(data_path).resolve()), "data_sha256": sha256_of(data_path),
        "pairs": len(data.pairs), "problems": len(set(data.problems)), "dropped_unmapped": data.dropped,
        "precision_asked": precision, "z": args.z, "folds": args.folds, "fold_seed": args.seed, "floors_tried": list(floors),
        "source_judge": str(Path(args.model).resolve()), "source_policy": stored.to_dict(),
        "chosen": {"threshold": choice.threshold, "floor": choice.floor or None},
        "on_all_pairs": result["on_all_pairs"],
        "cross_validation": {k: v for k, v in cv.items() if k != "per_fold"}, "per_fold": cv["per_fold"],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "equiv_version": _version(), "command": " ".join(["equiv", "adapt", *argv]),
    }
    write_export(args.model, out, policy, provenance)
    result["out"] = str(out)
    return 0, result


def _version() -> str:
    from equiv import __version__

    return __version__


def _figure(cv: dict[str, Any], key: str) -> str:
    return f"{cv[key]:.3f} ± {cv[key + '_spread']:.3f}"


def print_report(result: dict[str, Any]) -> None:
    """The result for people (stdout)."""
    print(f"pairs         {result['pairs']} from {result['problems']} problems ({result['data']})"
          + (f"; {result['dropped_unmapped']} left out (unmapped level)" if result["dropped_unmapped"] else ""))
    s = result["stored_policy"]
    b = result["stored_on_these_pairs"]
    print(f"as exported   threshold {s['threshold']:g}, floor {s['floor'] or 'off'}: precision {b['precision']:.3f} ± "
          f"{b['precision_spread']:.3f}, recall {b['recall']:.3f} ± {b['recall_spread']:.3f} on these pairs "
          "(nothing chosen on them)")
    if "policy" in result:
        p = result["policy"]
        print(f"adapted       threshold {p['threshold']:.4f}, floor {p['floor'] or 'off'} (most recall at precision "
              f">= {result['precision_asked']:g}, lower bound, on all pairs)")
    cv = result.get("cross_validation")
    if cv:
        print(f"cross-valid.  by problem, {cv['folds']} folds, {cv['n']} held-out pairs, {cv['problems']} problems "
              "(± bootstrap over problems; per fold: mean ± spread)")
        for key in ("precision", "recall", "f1", "false_merge_rate"):
            fold = (f"   per fold {cv[key + '_fold_mean']:.3f} ± {cv[key + '_fold_spread']:.3f}"
                    if key + "_fold_mean" in cv else "")
            print(f"  {key.replace('_', ' '):<17} {_figure(cv, key)}{fold}")
            if key == "precision" and "precision_lower" in cv:
                print(f"  {'lower bound':<17} {cv['precision_lower']:.3f} at z {cv['z']:g}, {cv['tp']} of "
                      f"{cv['tp'] + cv['fp']} held-out merges right (must reach {result['precision_asked']:g})")
    if "out" in result:
        print(f"written       {result['out']} (equiv.policy adapted; provenance in equiv.{ADAPTED_KEY})")


def adapt_main(argv: list[str]) -> int:
    """Entry point of ``equiv adapt``; returns the exit status."""
    parsed = parse_or_refuse(build_parser(), argv)
    with exit_on_input_error():
        status, result = adapt(parsed, argv)
    if not parsed.json:
        print_report(result)
    printable = {k: v for k, v in result.items() if k != "cross_validation"}
    if "cross_validation" in result:
        printable["cross_validation"] = {k: v for k, v in result["cross_validation"].items() if k != "per_fold"}
    print(json.dumps(printable))
    if "error" in result:
        print(f"error: {result['error']}", file=sys.stderr)
    return status

