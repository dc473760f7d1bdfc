"""``search_cli.py pairs``: evaluate an equivalence strategy on labelled pairs.

Prints accuracy, precision, recall and F1 (plus how the pairs were decided) and, as the LAST
line, one JSON object with at least ``accuracy``, ``precision``, ``recall``, ``f1``, ``n`` (also
written to ``--output`` together with the sweep). ``--sweep`` picks the threshold by best F1
(the one calibration step, :func:`equiv.judge.calibrate.choose_threshold`; precision and the
false-merge rate are printed beside it). ``--sweep_data FILE`` picks it on another file (e.g.
train) and reports on ``--data``; without it the threshold is chosen on ``--data`` itself, the
optimistic setting. Level 2 ("cannot judge") pairs are dropped per the label mapping (the
judge's own, for the model strategy; otherwise the paper's 3-4 vs 0-1).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple, Optional

from equiv.data.records import LabelMapping, problem_key, question_of, read_pair_records
from equiv.errors import InputError, exit_on_input_error
from equiv.judge.calibrate import choose_threshold
from equiv.judge.decide import Verdict, decide, reason_counts, sweep_scores
from equiv.judge.calibrate import binary_metrics, prefilter_sweep, spread_by_problem, threshold_sweep
from equiv.cliargs import command_parser, declare_data_file, parse_or_refuse
from equiv.prune.options import add_pruner_group, pruner_config
from equiv.prune.strategies import STRATEGIES, build_judge, strategy_entry
from equiv.rundir.outputs import check_output
from equiv.text.levenshtein import levenshtein_ratio


def strategy_choices() -> list[str]:
    """Every registered strategy that prunes (``none`` judges nothing to score)."""
    return [s.name for s in STRATEGIES if s.prunes]


PAIRS_SKIP = ("grouping", "representative", "url", "judge_fingerprint")
"""Pruner settings ``pairs`` has no use for: how search groups siblings, and the remote service's."""


@dataclass
class PairsData:
    """The labelled pairs.

    Attributes:
        path: labelled pairs (sentence1, sentence2, result 0-4), a JSON list or JSONL; required.
            --data FILE is the same setting (as in every command: docs/cli.md).
    """

    path: Optional[str] = None


def build_parser() -> Any:
    """``pairs``' jsonargparse parser: the shared ``--pruner.*`` group (equiv.prune.options, with
    its short names ``--strategy``, ``--model``, ...) and ``--data.path`` / ``--data``, eval's
    spellings; ``--config`` reads them from YAML."""
    p = command_parser(
        "search_cli.py pairs",
        "Evaluate an equivalence strategy on a MathEquiv-format file (JSON list or JSONL).",
    )
    p.add_class_arguments(PairsData, "data")
    declare_data_file(p)  # --data FILE: the same setting as --data.path, as in eval
    add_pruner_group(p, skip=PAIRS_SKIP, strategies=strategy_choices())
    p.add_argument("--sweep", action="store_true",
                   help="choose the threshold by a sweep (best F1)")
    p.add_argument("--sweep_data", "--sweep-data", type=Optional[str], default=None,
                   help="with --sweep: choose the threshold on this file, report on --data")
    p.add_argument("--sweep_prefilter", "--sweep-prefilter", action="store_true",
                   help="model only: also print, per prefilter in 0, 0.5, 0.55, ..., 0.95, the threshold the sweep "
                   "would pick and its metrics (one model pass); the reported metrics stay those of --prefilter")
    p.add_argument("--skip_invalid", "--skip-invalid", action="store_true",
                   help="leave out invalid records (counted and reported) instead of stopping at the first")
    p.add_argument("--output", type=Optional[str], default=None, help="write the metrics (and the sweep) as JSON here")
    p.add_argument("--json", action="store_true",
                   help="print the metrics as one JSON object instead of the summary (for scripts)")
    return p


def options(args: Any) -> SimpleNamespace:
    """The parsed command line as one flat namespace (``data``, ``strategy``, ``threshold``, ...,
    ``pruner``: the :class:`PrunerConfig`); a missing data file or strategy is refused here."""
    if not args.data.path:
        raise InputError("--data.path FILE is required (the labelled pairs)")
    if args.pruner.strategy not in strategy_choices():
        strategy_entry(args.pruner.strategy)  # an unknown name lists every strategy, a removed one its successor
        raise InputError(f"pairs needs a strategy that judges pairs: one of {', '.join(strategy_choices())}",
                         field="pruner.strategy")
    cfg = pruner_config(args.pruner)
    flat = {k: v for k, v in vars(args).items() if k not in ("data", "pruner", "config", "__path__")}
    return SimpleNamespace(**flat, **vars(cfg), data=args.data.path, pruner=cfg)


class Labelled(NamedTuple):
    """The mapped pairs of a labelled file, with what each belongs to."""

    pairs: list[tuple[str, str]]
    labels: list[int]
    dropped: int
    ratios: list[float]
    questions: list[str]  # the record's 'question' ("" when it has none): the guard reads it
    problems: list[str]  # problem keys, for the spread by problem
    sources: list[str]  # each pair's "path:line" in the file


def _read_labelled(path: str, mapping: Any, skip_invalid: bool) -> Labelled:
    records, report = read_pair_records(path, skip_invalid=skip_invalid)
    if report.total:
        print(report.summary(path), file=sys.stderr)
    kept = [r for r in records if mapping.label(r.result) is not None]
    pairs, labels = mapping.binary_pairs(kept)
    dropped = len(records) - len(pairs)
    if not pairs:
        raise InputError("no pairs left to evaluate after dropping unmapped levels", path=path)
    ratios = [levenshtein_ratio(a, b) for a, b in pairs]
    questions = [question_of(r) for r in kept]
    return Labelled(pairs, labels, dropped, ratios, questions, [problem_key(r) for r in kept],
                    [r.source for r in kept])


def run_pairs(args: Any) -> dict[str, Any]:
    """Evaluate one strategy; returns the metrics dict (the CLI prints and writes it). Every pair
    is decided by the judge's policy (:func:`equiv.judge.decide.decide`); ``_pairs`` holds one
    row per pair (probability, merged, reason) for ``--output``."""
    if not isinstance(args, SimpleNamespace):
        args = options(args)
    check_pairs_args(args)
    judge = build_judge(args.pruner)
    assert judge is not None
    settings = getattr(judge, "settings", {}) or {}
    mapping = LabelMapping.from_dict(settings["label_mapping"]) if "label_mapping" in settings else LabelMapping()

    data = _read_labelled(args.data, mapping, args.skip_invalid)
    # a rule-decided pair's probability is read only where it is written out (--output)
    verdicts = _verdicts(judge, data, score_ruled=bool(args.output))
    if args.sweep:
        choice = _sweep_threshold(judge, args, mapping, verdicts, data)
        judge.threshold = choice.decide_at
        verdicts = decide(data.pairs, judge.policy, [v.probability for v in verdicts], data.questions)
    else:
        threshold_source = "given" if args.threshold is not None else "default"
        choice = ThresholdChoice(judge.threshold, threshold_source, judge.threshold, [])
    predictions = [v.merged for v in verdicts]
    prefilter_table = _prefilter_table(judge, args, mapping, data) if args.sweep_prefilter else None
    out = _metrics_record(judge, args, data, predictions, choice)
    out["unmapped_levels"] = [level for level in range(5) if mapping.label(level) is None]
    out["reasons"] = reason_counts(verdicts)
    out["_pairs"] = [{"source": source, "label": label, **v.to_json()}
                     for source, label, v in zip(data.sources, data.labels, verdicts)]
    if choice.points:
        out["_sweep"] = choice.points
    if prefilter_table:
        out["_prefilter_sweep"] = prefilter_table
    return out


def _verdicts(judge: Any, data: Labelled, *, score_ruled: bool = False) -> list[Verdict]:
    """The judge's verdict on each labelled pair (with its question); ``score_ruled``: the model's
    probability for the pairs a rule decided too."""
    return [Verdict(v.probability, v.merged, v.reason, v.detail)
            for v in judge.pair_verdicts(data.pairs, data.questions, score_ruled=score_ruled)]


def check_pairs_args(args: Any) -> None:
    """Option combinations that would mean nothing, refused before any model loads."""
    if args.sweep_data and not (args.sweep or args.sweep_prefilter):
        raise InputError("--sweep_data needs --sweep", field="sweep_data")
    if args.sweep and args.threshold is not None:
        raise InputError("give either --threshold or --sweep, not both", field="threshold")
    if args.sweep and not STRATEGIES.get(args.strategy).threshold:
        raise InputError(f"strategy {args.strategy!r} is a 0/1 rule; there is no threshold to sweep", field="sweep")
    if args.sweep_prefilter and args.strategy != "model":
        raise InputError("--sweep_prefilter is for the model strategy", field="sweep_prefilter")
    if not Path(args.data).exists():
        raise InputError("file not found", path=args.data, field="data")
    if args.output:
        # before the scoring, not after it; never over the data or the judge it reads
        check_output(args.output, option="--output", inputs=[args.data, args.sweep_data, args.model])


class ThresholdChoice(NamedTuple):
    """The threshold reported, where it came from, the one predictions use, and the sweep."""

    threshold: float
    source: str
    decide_at: float
    points: list[dict[str, float]]


def _sweep_threshold(judge: Any, args: Any, mapping: Any, verdicts: list[Verdict],
                     data: Labelled) -> ThresholdChoice:
    """The policy's threshold chosen by :func:`equiv.judge.calibrate.choose_threshold` (best F1) on
    ``--data``, or on ``--sweep_data`` when given."""
    if args.sweep_data:
        sweep_on = _read_labelled(args.sweep_data, mapping, args.skip_invalid)
        s_verdicts, s_pairs, s_labels = _verdicts(judge, sweep_on), sweep_on.pairs, sweep_on.labels
    else:
        s_verdicts, s_pairs, s_labels = verdicts, data.pairs, data.labels
    chosen = choose_threshold(judge.policy, s_pairs, s_verdicts, s_labels)
    points = [p for p in threshold_sweep(sweep_scores(s_pairs, s_verdicts, judge.policy), s_labels)
              if 0.0 < p.threshold <= 1.0]
    source = f"sweep on {args.sweep_data or args.data} (best F1)"
    table = [{"threshold": p.threshold, **{k: getattr(p.metrics, k) for k in ("precision", "recall", "f1")}}
             for p in points]
    return ThresholdChoice(round(chosen.threshold, 6), source, chosen.threshold, table)


def _metrics_record(judge: Any, args: Any, data: Labelled, predictions: list[bool],
                    choice: ThresholdChoice) -> dict[str, Any]:
    """The metrics object ``pairs`` prints as its last line and writes to ``--output``."""
    labels, ratios = data.labels, data.ratios
    m = binary_metrics(predictions, labels)
    out: dict[str, Any] = {
        "accuracy": m.accuracy, "precision": m.precision, "recall": m.recall, "f1": m.f1,
        "false_merge_rate": m.false_merge_rate, "n": m.n, "problems": len(set(data.problems)),
        "strategy": judge.name, "threshold": choice.threshold, "threshold_source": choice.source,
        "guard": list(judge.policy.guard), "floor": judge.policy.floor, "restate": judge.policy.restate,
        "policy": judge.policy.to_dict(),
        "tp": m.tp, "fp": m.fp, "fn": m.fn, "tn": m.tn, "dropped_level2": data.dropped, "data": str(args.data),
    }
    out.update(spread_by_problem(predictions, labels, data.problems))
    prefilter = getattr(judge, "prefilter", None)
    if prefilter is not None:
        out["prefilter"] = prefilter
        out["prefilter_resolved"] = sum(r <= prefilter for r in ratios) / len(ratios)
        out["prefilter_rejected_equivalent"] = sum(1 for r, y in zip(ratios, labels) if y == 1 and r <= prefilter)
        out["equivalent_pairs"] = sum(labels)
    desc = judge.describe()
    if "model" in desc:
        out["model"] = desc["model"]
    out["judge_stats"] = judge.stats.to_dict()
    return out


def _prefilter_table(judge: Any, args: Any, mapping: Any, data: Labelled) -> list[dict[str, float]]:
    """Model probabilities for every pair (prefilter off), then the prefilter x threshold grid."""
    if args.sweep_data:
        data = _read_labelled(args.sweep_data, mapping, args.skip_invalid)
    labels, ratios = data.labels, data.ratios
    saved = judge.policy
    judge.policy = replace(saved, prefilter=None, guard=(), floor=None, plan_floor=None, restate=False)  # score every pair once
    judge.clear_cache()
    try:
        probs = judge.pair_scores(data.pairs, data.questions)
    finally:
        judge.policy = saved
        judge.clear_cache()
    grid = [0.0] + [round(0.5 + 0.05 * k, 2) for k in range(10)]
    rows = prefilter_sweep(ratios, probs, labels, grid)
    return [{"prefilter": r.prefilter, "threshold": round(r.threshold, 6), "resolved": r.resolved,
             "precision": r.metrics.precision, "recall": r.metrics.recall, "f1": r.metrics.f1} for r in rows]


REASON_WORDS = {
    "identical": "identical text",
    "prefiltered": "too dissimilar (prefilter)",
    "below_threshold": "scored below the threshold",
    "threshold": "scored at or above the threshold",
    "floor": "held back by the statement floor",
}
"""How the summary names each verdict's reason (:mod:`equiv.judge.decide`); others keep their name."""


def judge_work(out: dict[str, Any]) -> str:
    """What the judge did, in plain words: the pairs the model scored, those settled without it, and
    only the rules that are on (the guard, the statement floor, restating), with what they did.
    Why: "claim guard vetoed 0 (off)" listed switched-off rules in the code's own words."""
    st = out["judge_stats"]
    who = "the model" if out["strategy"] == "model" else f"the {out['strategy']} strategy"
    parts = [f"{st['scored']} pairs scored by {who}"]
    if st["exact"]:
        parts.append(f"{st['exact']} identical (no model needed)")
    if st["prefiltered"]:
        parts.append(f"{st['prefiltered']} too dissimilar to need the model (prefilter)")
    if st["cache_hits"]:
        parts.append(f"{st['cache_hits']} repeats answered from the cache")
    if out["guard"]:
        parts.append(f"the number/name guard stopped {st['guarded']} merges")
    if out["floor"]:
        parts.append(f"the statement floor held back {st['floored']} merges")
    if out["restate"]:
        parts.append(f"{st['restated']} restated before scoring")
    if st.get("aligned_plans"):
        parts.append(f"{st['aligned_plans']} plans merged sub-goal by sub-goal")
    return ", ".join(parts) + f"; {st['seconds']:.2f} s"


def _print_report(out: dict[str, Any]) -> None:
    print(f"strategy      {out['strategy']}" + (f"  ({out['model']})" if "model" in out else ""))
    print(f"threshold     {out['threshold']}  [{out['threshold_source']}]")
    dropped = ""
    if out["dropped_level2"]:
        levels = ", ".join(str(level) for level in out.get("unmapped_levels", [])) or "unmapped"
        dropped = (f", {out['dropped_level2']} left out (label level {levels}: neither equivalent nor "
                   "not under the judge's label mapping)")
    print(f"pairs         {out['n']} evaluated{dropped}")
    if "prefilter" in out and out["prefilter"] <= 0:
        print("prefilter     off: every pair goes to the model")
    elif "prefilter" in out:
        print(f"prefilter     ratio <= {out['prefilter']}: resolves {out['prefilter_resolved']:.1%} of pairs, "
              f"rejects {out['prefilter_rejected_equivalent']} of {out['equivalent_pairs']} truly equivalent pairs")
    print(f"judge work    {judge_work(out)}")
    print("decided by    " + ", ".join(f"{REASON_WORDS.get(reason, reason)} {count}"
                                      for reason, count in out["reasons"].items()))
    print(f"confusion     tp {out['tp']}  fp {out['fp']}  fn {out['fn']}  tn {out['tn']}")
    print(f"accuracy      {out['accuracy']:.4f}")
    several = out["problems"] > 1  # one problem has no spread over problems to show
    print(f"pairs from    {out['problems']} problems (spreads: bootstrap over problems)" if several else
          "pairs from    1 problem (no spread: it is taken over problems)")
    for name in ("precision", "recall", "f1", "false_merge_rate"):
        spread = f" ± {out[name + '_spread']:.4f}" if several else ""
        print(f"{name.replace('_', ' '):<13} {out[name]:.4f}{spread}")


def pairs_main(argv: list[str]) -> int:
    """Entry point of ``search_cli.py pairs``; returns the exit status. Prints a summary for
    people, or with ``--json`` the metrics as one JSON object (``--output``: to a file, with the
    sweep and every pair's verdict)."""
    parsed = parse_or_refuse(build_parser(), argv)  # a bad option or value: one line, exit 2
    with exit_on_input_error():
        args = options(parsed)
        out = run_pairs(args)
        rows = out.pop("_pairs")
        sweep = out.pop("_sweep", None)
        prefilter_table = out.pop("_prefilter_sweep", None)
        if prefilter_table and not args.json:
            on = args.sweep_data or args.data
            print(f"prefilter sweep on {on} (best-F1 threshold per prefilter):")
            print(f"  {'prefilter':>9} {'resolved':>8} {'threshold':>9} {'precision':>9} {'recall':>7} {'f1':>7}")
            for r in prefilter_table:
                print(f"  {r['prefilter']:>9.2f} {r['resolved']:>8.1%} {r['threshold']:>9.4f} {r['precision']:>9.4f} "
                      f"{r['recall']:>7.4f} {r['f1']:>7.4f}")
        if not args.json:
            _print_report(out)
        if args.output:
            path = Path(args.output)
            path.parent.mkdir(parents=True, exist_ok=True)
            extra = {k: v for k, v in (("sweep", sweep), ("prefilter_sweep", prefilter_table), ("pairs", rows)) if v}
            path.write_text(json.dumps({**out, **extra}, indent=2) + "\n", encoding="utf-8")
            if not args.json:
                print(f"metrics       {path} (JSON)")
        if args.json:
            print(json.dumps(out))
    return 0
