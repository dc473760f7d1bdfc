"""Judge quality on held-out pairs: the paper's ablation (its Figure 3) plus the rule baselines.

One table over an evaluation file (default ``../shared/data/gsm8k_equiv/valid.jsonl``), one row
per strategy, seeds aggregated as mean ± spread (population standard deviation):

- ``formula`` -- the 0/1 rule (no threshold, no training);
- ``levenshtein`` -- ratio with its best-F1 threshold on the *calibration split*;
- ``untuned`` -- the untrained encoder: cosine of the bundled all-MiniLM-L6-v2 sentence embeddings,
  threshold chosen the same way (the paper's "w/o fine-tuning" arm);
- ``finetuned`` -- ``configs/gsm8k_equiv.yaml`` (cross-encoder fine-tuned without EM), one fit per
  seed, scored as the plain classifier (:class:`~equiv.prune.model_judge.ModelJudge`) at its own
  calibrated ``decision_threshold``: one fit of the recipe as it ships since 2026-11-26 (no combiner);
- ``em`` -- the same recipe with ``configs/em.yaml`` (EM refinement of multi-sentence samples),
  scored the same way.

The calibration split is the one the recipe holds out of ``train.jsonl`` + ``train_more.jsonl``
(``data.calibration_fraction``: whole problems). Every threshold -- the baselines' and the trained
judges' exported ``decision_threshold`` -- comes from it, so the evaluation file is never used to
choose anything. Trained judges are scored through ``build_judge`` exactly as ``search_cli.py pairs
--strategy model`` does, with their stored threshold and prefilter; ``s/1k`` is seconds per 1000
pairs on this machine's CPU (cache cleared, exact-match shortcut as in search).

Judges already trained under ``--runs DIR`` (``DIR/<arm>-s<seed>/judge``) are loaded, not retrained,
so a long run can be resumed or the table rebuilt from earlier fits.

    python benchmarks/bench_judge_quality.py                 # 3 seeds x 2 fits (plain, EM): hours on 2 cores
    python benchmarks/bench_judge_quality.py --quick         # CI-sized: demo data, tiny model, 1 seed
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.data.datamodule import MathEquivDataModule  # noqa: E402
from equiv.data.demo import DEMO_DIR  # noqa: E402
from equiv.data.records import LabelMapping, read_pair_records  # noqa: E402
from equiv.judge.calibrate import binary_metrics, pick_threshold, threshold_sweep  # noqa: E402
from equiv.prune.yardstick import mean_and_spread, mean_spread_cell  # noqa: E402
from equiv.prune import CachedJudge, ModelJudge, PrunerConfig, build_judge  # noqa: E402

DATA = SHARED_DATA / "gsm8k_equiv"
RECIPE = ROOT / "configs" / "gsm8k_equiv.yaml"
EM_CONFIG = ROOT / "configs" / "em.yaml"
# fit -> what `fit` gets on top of the recipe
FIT_ARGS = {"finetuned": [], "em": ["--config", str(EM_CONFIG)]}
# arm -> the fit it scores
FIT_OF = {"finetuned": "finetuned", "em": "em"}
TRAINED_ARMS = tuple(FIT_OF)
ALL_ARMS = ("formula", "levenshtein", "untuned", *TRAINED_ARMS)
DEFAULT_ARMS = ALL_ARMS
METRICS = ("precision", "recall", "f1", "accuracy")


def calibration_split(train: Path, more: list[Path], fraction: float) -> tuple[list[tuple[str, str]], list[int], list[str]]:
    """The recipe's calibration split: pairs, labels and problem keys (what every threshold is chosen on)."""
    dm = MathEquivDataModule(train=str(train), train_more=[str(p) for p in more], calibration_fraction=fraction)
    dm.setup("validate")
    return dm.labelled_pairs("val")


def measure(judge: CachedJudge, pairs: list[tuple[str, str]], labels: list[int]) -> dict[str, float]:
    """Metrics of one judge at its own threshold, and seconds per 1k pairs (cache cleared)."""
    judge.clear_cache()
    start = time.perf_counter()
    verdicts = judge.pair_verdicts(pairs)  # the judge's policy decides (equiv.judge.decide)
    seconds = time.perf_counter() - start
    m = binary_metrics([v.merged for v in verdicts], labels)
    return {"precision": m.precision, "recall": m.recall, "f1": m.f1, "accuracy": m.accuracy,
            "threshold": judge.threshold, "s_per_1k": 1000 * seconds / max(1, len(pairs))}


def score(strategy: str, pairs: list[tuple[str, str]], labels: list[int], *, model: str | None = None,
          threshold: float | None = None) -> dict[str, float]:
    """Metrics of the judge ``build_judge`` makes, as ``search_cli.py pairs`` would use it."""
    judge = build_judge(PrunerConfig(strategy=strategy, model=model, threshold=threshold))
    assert judge is not None
    return measure(judge, pairs, labels)


def score_trained(judge_dir: Path, pairs: list[tuple[str, str]], labels: list[int]) -> dict[str, float]:
    """A trained arm (``finetuned``/``em``): the exported classifier with its own policy."""
    return measure(ModelJudge(judge_dir), pairs, labels)


def swept_threshold(strategy: str, cal_pairs: list[tuple[str, str]], cal_labels: list[int]) -> float:
    """Best-F1 threshold of a scored baseline on the calibration split."""
    judge = build_judge(PrunerConfig(strategy=strategy))
    assert judge is not None
    points = [p for p in threshold_sweep(judge.pair_scores(cal_pairs), cal_labels) if 0.0 < p.threshold <= 1.0]
    return round(pick_threshold(points).threshold, 6)


def train_judge(arm: str, seed: int, out: Path, quick: dict[str, Any] | None) -> Path:
    """Fit the recipe (plus :data:`FIT_ARGS` of the arm's fit) with ``seed``; returns the exported judge directory."""
    from equiv.judge.cli import main as trainer_main

    args = ["fit", "--config", str(RECIPE), *FIT_ARGS[FIT_OF[arm]]]
    args += [f"--seed_everything={seed}", f"--data.seed={seed}", f"--trainer.default_root_dir={out}",
             f"--export_dir={out / 'judge'}", "--trainer.logger=false", "--trainer.enable_progress_bar=false"]
    if quick:
        args += [f"--data.train={quick['train']}", "--data.train_more=[]", f"--model.model_name={quick['model']}",
                 "--model.max_length=64", "--trainer.max_epochs=1", "--trainer.limit_train_batches=3"]
    status = trainer_main(args)
    if status != 0:
        raise SystemExit(f"training {arm} seed {seed} failed (exit {status})")
    return out / "judge"


def aggregate(rows: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"seeds": len(rows)}
    for key in (*METRICS, "s_per_1k", "threshold"):
        out.update(mean_and_spread(key, [r[key] for r in rows]))
    return out


def format_table(table: dict[str, dict[str, Any]]) -> str:
    head = f"{'strategy':<12} {'seeds':>5} " + " ".join(f"{m:>15}" for m in METRICS) + f" {'threshold':>10} {'s/1k':>7}"
    lines = [head, "-" * len(head)]
    for name, agg in table.items():
        cells = " ".join(mean_spread_cell(agg, m).rjust(15) for m in METRICS)
        threshold = "-" if name == "formula" else f"{agg['threshold']:.3f}"  # a 0/1 rule has none
        lines.append(f"{name:<12} {agg['seeds']:>5} {cells} {threshold:>10} {agg['s_per_1k']:>7.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=Path, default=DATA / "valid.jsonl", help="pairs the table is measured on")
    ap.add_argument("--train", type=Path, default=DATA / "train.jsonl")
    ap.add_argument("--train_more", type=Path, nargs="*", default=[DATA / "train_more.jsonl"])
    ap.add_argument("--calibration_fraction", type=float, default=0.15, help="as data.calibration_fraction in the recipe")
    ap.add_argument("--arms", nargs="+", choices=ALL_ARMS, default=list(DEFAULT_ARMS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--runs", type=Path, default=ROOT / "outputs" / "judge_quality",
                    help="fits go to RUNS/<arm>-s<seed>; an existing RUNS/<arm>-s<seed>/judge is loaded instead")
    ap.add_argument("--quick", action="store_true", help="CI-sized: demo data, a tiny random-init model, one seed, 3 steps")
    ap.add_argument("--json", type=Path, help="write the table (and every seed's row) here")
    args = ap.parse_args(argv)

    quick: dict[str, Any] | None = None
    if args.quick:
        from equiv.judge.tiny import build_tiny_longformer

        tmp = Path(tempfile.mkdtemp(prefix="judge_quality_"))
        # The demo pairs all share one problem id; give every four pairs their own problem so the
        # calibration split has something to hold out.
        train = tmp / "demo_train.jsonl"
        rows = [json.loads(line) for line in (DEMO_DIR / "train.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
        train.write_text("".join(json.dumps(dict(r, id=f"demo-{i // 4}-{i % 4}")) + "\n" for i, r in enumerate(rows)), encoding="utf-8")
        quick = {"train": train, "model": build_tiny_longformer(tmp / "tiny", attention_window=8)}
        args.eval, args.train, args.train_more = DEMO_DIR / "valid.jsonl", train, []
        args.seeds = args.seeds[:1]
        if args.runs == ap.get_default("runs"):
            args.runs = tmp / "runs"

    mapping = LabelMapping()
    eval_pairs, eval_labels = mapping.binary_pairs(read_pair_records(str(args.eval))[0])
    calibration = calibration_split(args.train, args.train_more, args.calibration_fraction)
    cal_pairs, cal_labels, _ = calibration
    print(f"evaluation: {args.eval} ({len(eval_pairs)} pairs); calibration split: {len(cal_pairs)} pairs "
          f"of {args.train.name}{''.join(' + ' + p.name for p in args.train_more)}", flush=True)

    table: dict[str, dict[str, Any]] = {}
    per_seed: dict[str, list[dict[str, float]]] = {}
    for arm in args.arms:
        if arm == "formula":
            rows = [score("formula", eval_pairs, eval_labels)]
        elif arm in ("levenshtein", "untuned"):
            strategy = "levenshtein" if arm == "levenshtein" else "embedding"
            rows = [score(strategy, eval_pairs, eval_labels, threshold=swept_threshold(strategy, cal_pairs, cal_labels))]
        else:
            rows = []
            for seed in args.seeds:
                out = args.runs / f"{FIT_OF[arm]}-s{seed}"
                judge_dir = out / "judge"
                if not (judge_dir / "config.json").is_file():
                    judge_dir = train_judge(arm, seed, out, quick)
                rows.append(dict(score_trained(judge_dir, eval_pairs, eval_labels), seed=seed))
        per_seed[arm] = rows
        table[arm] = aggregate(rows)
        print(f"{arm}: " + " ".join(f"{k}={v:.4f}" for k, v in table[arm].items() if k in METRICS), flush=True)

    print()
    print(format_table(table))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"eval": str(args.eval), "table": table, "per_seed": per_seed}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
