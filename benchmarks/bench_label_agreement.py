"""How far the labels themselves agree: a second, blind annotator against the first, and the judges against both.

A judge scored against noisy labels cannot score above what the labels allow. The data's README
says to expect noise at the 0/1 and 1/3 borders; this script measures how much. It joins a file of
second labels (``{"id": ..., "result": 0-4}`` per line, from an annotator who never saw the first
labels) with the labelled pairs by ``id`` and prints two tables:

1. **Annotator agreement**: the second annotator's binary labels scored against the first as if
   they were predictions (precision, recall, F1, accuracy), Cohen's kappa, and the 5x5 level
   table. This F1 is the baseline: a judge as good as a second careful reader scores about this.
2. **Judges** (the ``formula`` rule always, plus every ``--judge`` exported directory, scored with
   its own stored strategy, threshold and prefilter as ``search_cli.py pairs --strategy model``
   does): F1 against the first labels, against the second, and on the pairs where both annotators
   agree; and the ratio of the judge's F1 (first labels) to the annotators' F1.

Pairs with level 2 from either annotator are left out of the binary figures (the recipe drops
level 2 from training and evaluation too) and counted. ``benchmarks/data/gsm8k_equiv_second_labels.jsonl``
holds second labels for the recipe's calibration split (see ``benchmarks/data/README.md``); the
judges' thresholds and combiners were chosen on those pairs, so their rows there are slightly
optimistic for the first labels -- the annotators' row is not.

    python benchmarks/bench_label_agreement.py
    python benchmarks/bench_label_agreement.py --judge outputs/gsm8k_equiv/judge
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from common import ROOT, SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.data.problems import read_jsonl_objects  # noqa: E402
from equiv.data.records import LEVELS, LabelMapping, PairRecord, read_pair_records  # noqa: E402
from equiv.errors import InputError  # noqa: E402
from equiv.judge.calibrate import BinaryMetrics, binary_metrics  # noqa: E402
from equiv.prune import PrunerConfig, build_judge  # noqa: E402

DATA = SHARED_DATA / "gsm8k_equiv"
DEFAULT_DATA = (DATA / "train.jsonl", DATA / "train_more.jsonl")
DEFAULT_SECOND = ROOT / "benchmarks" / "data" / "gsm8k_equiv_second_labels.jsonl"


def read_second_labels(path: Path) -> dict[str, int]:
    """``id -> level`` from a JSONL file; any bad line is an :class:`InputError` naming file, line, field."""
    out: dict[str, int] = {}
    for line_no, row in read_jsonl_objects(path):
        pair_id, level = row.get("id"), row.get("result")
        if not isinstance(pair_id, str) or not pair_id:
            raise InputError("must be a non-empty string", path=str(path), line=line_no, field="id")
        if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
            raise InputError(f"must be an integer 0-4, got {level!r}", path=str(path), line=line_no, field="result")
        if pair_id in out:
            raise InputError(f"id {pair_id!r} appears twice", path=str(path), line=line_no, field="id")
        out[pair_id] = level
    if not out:
        raise InputError("no labels in the file", path=str(path))
    return out


def join(records: Sequence[PairRecord], second: dict[str, int], second_path: Path) -> list[tuple[PairRecord, int]]:
    """The labelled records that have a second label, in the second file's order; an unknown id is an error."""
    by_id = {str(r.extra["id"]): r for r in records if r.extra.get("id") is not None}
    unknown = [i for i in second if i not in by_id]
    if unknown:
        raise InputError(f"{len(unknown)} ids are in no --data file, first {unknown[0]!r}", path=str(second_path), field="id")
    return [(by_id[i], level) for i, level in second.items()]


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Agreement beyond chance between two label sequences (1 = perfect, 0 = chance)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return (observed - expected) / (1 - expected) if expected < 1 else 1.0


@dataclass(frozen=True)
class Agreement:
    """The binary comparison of two annotators on the pairs neither put at level 2."""

    first: list[int]
    second: list[int]
    kept: list[int]  # indices into the joined pairs
    dropped_level2: int
    metrics: BinaryMetrics
    kappa: float


def agreement(joined: Sequence[tuple[PairRecord, int]], mapping: LabelMapping) -> Agreement:
    first, second, kept = [], [], []
    for i, (record, level) in enumerate(joined):
        a, b = mapping.label(record.result), mapping.label(level)
        if a is None or b is None:
            continue
        first.append(a)
        second.append(b)
        kept.append(i)
    if not kept:
        raise InputError("no pair has a binary label from both annotators", field="result")
    return Agreement(first, second, kept, len(joined) - len(kept), binary_metrics(second, first), cohen_kappa(first, second))


def level_table(joined: Sequence[tuple[PairRecord, int]]) -> str:
    """Rows: the first annotator's level; columns: the second's."""
    counts = Counter((r.result, level) for r, level in joined)
    lines = ["first \\ second " + " ".join(f"{c:>5}" for c in LEVELS)]
    for row in LEVELS:
        lines.append(f"{row:>14} " + " ".join(f"{counts[(row, c)]:>5}" for c in LEVELS))
    return "\n".join(lines)


def judge_row(name: str, predictions: Sequence[int], agree: Agreement) -> dict[str, float | str]:
    both = [i for i, (x, y) in enumerate(zip(agree.first, agree.second)) if x == y]
    vs_first = binary_metrics(predictions, agree.first)
    return {
        "judge": name,
        "f1_first": vs_first.f1,
        "precision_first": vs_first.precision,
        "f1_second": binary_metrics(predictions, agree.second).f1,
        "f1_agreed": binary_metrics([predictions[i] for i in both], [agree.first[i] for i in both]).f1,
        "agreed_pairs": float(len(both)),
        "ratio": vs_first.f1 / agree.metrics.f1 if agree.metrics.f1 else float("nan"),
    }


def score_judges(joined: Sequence[tuple[PairRecord, int]], agree: Agreement, judges: Sequence[Path]) -> list[dict[str, float | str]]:
    pairs = [(joined[i][0].sentence1, joined[i][0].sentence2) for i in agree.kept]
    rows = []
    for name, cfg in [("formula", PrunerConfig(strategy="formula"))] + [(str(j), PrunerConfig(strategy="model", model=str(j))) for j in judges]:
        judge = build_judge(cfg)
        assert judge is not None
        predictions = [int(v.merged) for v in judge.pair_verdicts(pairs)]  # the judge's policy decides
        rows.append(judge_row(name, predictions, agree))
    return rows


def format_report(joined: Sequence[tuple[PairRecord, int]], agree: Agreement, rows: Sequence[dict[str, float | str]]) -> str:
    m = agree.metrics
    out = [
        f"pairs with a second label: {len(joined)}; left out for level 2 from either annotator: {agree.dropped_level2}",
        "",
        level_table(joined),
        "",
        f"{'second vs first':<28} {'precision':>9} {'recall':>7} {'F1':>6} {'accuracy':>8} {'kappa':>6}",
        f"{'annotators (the baseline)':<28} {m.precision:>9.3f} {m.recall:>7.3f} {m.f1:>6.3f} {m.accuracy:>8.3f} {agree.kappa:>6.3f}",
        "",
        f"{'judge':<40} {'F1 first':>8} {'P first':>7} {'F1 second':>9} {'F1 agreed':>9} {'ratio':>6}",
    ]
    for r in rows:
        out.append(f"{str(r['judge'])[-40:]:<40} {r['f1_first']:>8.3f} {r['precision_first']:>7.3f} {r['f1_second']:>9.3f} "
                   f"{r['f1_agreed']:>9.3f} {r['ratio']:>6.3f}")
    if rows:
        out.append(f"F1 agreed: on the {int(rows[0]['agreed_pairs'])} pairs both annotators label alike; "
                   "ratio: judge F1 (first labels) / annotators' F1")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, nargs="+", default=list(DEFAULT_DATA), help="labelled pair files (the first labels)")
    ap.add_argument("--second", type=Path, default=DEFAULT_SECOND, help="second labels: JSONL of {id, result}")
    ap.add_argument("--judge", type=Path, nargs="*", default=[], help="exported judge directories to score too")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    try:
        for path in [*args.data, args.second]:
            if not path.exists():
                raise InputError("file not found", path=str(path))
        records = [r for path in args.data for r in read_pair_records(path)[0]]
        joined = join(records, read_second_labels(args.second), args.second)
        agree = agreement(joined, LabelMapping())
        rows = score_judges(joined, agree, args.judge)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(joined, agree, rows))
    if args.json:
        m = agree.metrics
        args.json.write_text(json.dumps({"pairs": len(joined), "dropped_level2": agree.dropped_level2,
                                         "annotators": {**m.to_dict(), "kappa": agree.kappa}, "judges": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
