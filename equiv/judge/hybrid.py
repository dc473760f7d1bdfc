"""The ``hybrid`` judge: the pair classifier's logit combined with rule features.

A fine-tuned MiniLM and the ``formula`` rule make different mistakes on GSM8K steps. The rule
is right almost whenever two calculator notes agree or disagree, but it cannot read words; the
model reads words but under-weights the notes (on the calibration split it was *less* accurate
than the rule on pairs whose formulas agree). A logistic combiner over

- the model's logit ``log(p / (1 - p))``,
- ``formulas_agree``: both steps have formulas and the normalised multisets are equal,
- ``formulas_both``: both steps have formulas,
- ``formulas_one``: exactly one step has formulas,
- ``levenshtein_ratio``,

fitted on the calibration split (pairs the classifier was not trained on), takes the best of
both. Where no formula can be extracted (prose-only steps), the three formula features are 0 and
the decision rests on the model's logit and the ratio, with the weights it learned for them.

The combiner is six numbers stored in the exported judge's ``config.json`` (``equiv.hybrid``),
beside the raw model's own ``decision_threshold``; :class:`equiv.prune.model_judge.HybridJudge`
applies it at search time with the same batching, caching and stats as the ``model`` strategy.
Its threshold is picked on *out-of-fold* combined probabilities (k-fold over the calibration
problems), so the stored threshold was never chosen on the pairs its weights were fitted on.
This module is pure functions plus :func:`attach_combiner`, which writes the block into an
exported directory (the last step of ``fit --hybrid true``, or for a judge exported before).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from equiv.errors import InputError
from equiv.judge.calibrate import pick_threshold, threshold_sweep
from equiv.judge.export import update_settings
from equiv.judge.export_keys import HYBRID_KEY
from equiv.judge.members import model_logit, score_judge_dir
from equiv.text.formula import formula_signature
from equiv.text.levenshtein import levenshtein_ratio

FEATURES = ("model_logit", "formulas_agree", "formulas_both", "formulas_one", "levenshtein_ratio")


def pair_features(a: str, b: str, prob: float) -> list[float]:
    """The :data:`FEATURES` of one pair, given the classifier's probability for it."""
    fa, fb = formula_signature(a), formula_signature(b)
    both = bool(fa) and bool(fb)
    return [
        model_logit(prob),
        float(both and fa == fb),
        float(both),
        float(bool(fa) != bool(fb)),
        levenshtein_ratio(a, b),
    ]


@dataclass(frozen=True)
class Combiner:
    """Logistic regression over :data:`FEATURES`: ``sigmoid(weights . x + bias)``."""

    weights: tuple[float, ...]
    bias: float
    threshold: float
    features: tuple[str, ...] = FEATURES

    def probabilities(self, rows: Sequence[Sequence[float]]) -> list[float]:
        out = []
        for row in rows:
            z = self.bias + sum(w * x for w, x in zip(self.weights, row))
            out.append(1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "weights": list(self.weights), "bias": self.bias,
                "threshold": self.threshold}

    @classmethod
    def from_dict(cls, block: Any, *, source: str = "config.json") -> "Combiner":
        """Read ``equiv.hybrid``; a block from another feature set is an error, never misread."""
        if not isinstance(block, dict):
            raise InputError("equiv.hybrid must be an object", path=source, field="equiv.hybrid")
        features = tuple(block.get("features") or ())
        if features != FEATURES:
            raise InputError(f"combiner features {list(features)} differ from this version's {list(FEATURES)}",
                             path=source, field="equiv.hybrid.features")
        weights = block.get("weights")
        if not (isinstance(weights, list) and len(weights) == len(FEATURES)
                and all(isinstance(w, (int, float)) and math.isfinite(w) for w in weights)):
            raise InputError(f"needs {len(FEATURES)} finite weights", path=source, field="equiv.hybrid.weights")
        bias, threshold = block.get("bias"), block.get("threshold")
        if not isinstance(bias, (int, float)) or not math.isfinite(bias):
            raise InputError("must be a finite number", path=source, field="equiv.hybrid.bias")
        if not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
            raise InputError("must be a number in (0, 1]", path=source, field="equiv.hybrid.threshold")
        return cls(tuple(float(w) for w in weights), float(bias), float(threshold))


def fit_logistic(rows: Sequence[Sequence[float]], labels: Sequence[int], *, l2: float = 1.0) -> tuple[list[float], float]:
    """Weights and bias minimising summed log-loss + ``l2/2 * ||w||^2`` (bias unpenalised), by L-BFGS.

    Deterministic (full batch, zero init), so the same calibration data always gives the same
    combiner. ``l2 = 1`` matches scikit-learn's ``LogisticRegression(C=1)``.
    """
    x = torch.tensor([list(r) for r in rows], dtype=torch.float64)
    y = torch.tensor(list(labels), dtype=torch.float64)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=500, tolerance_grad=1e-9, tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y, reduction="sum") + 0.5 * l2 * (w @ w)
        loss.backward()
        return loss

    opt.step(closure)
    return [float(v) for v in w.detach()], float(b.detach())


def problem_folds(groups: Sequence[str], k: int, seed: int = 0) -> list[list[int]]:
    """Indices split into ``k`` folds by group (problem id), so no problem is in two folds."""
    distinct = sorted(set(groups))
    random.Random(seed).shuffle(distinct)
    fold_of = {g: i % k for i, g in enumerate(distinct)}
    folds: list[list[int]] = [[] for _ in range(k)]
    for i, g in enumerate(groups):
        folds[fold_of[g]].append(i)
    return [f for f in folds if f]


@dataclass(frozen=True)
class CombinerFit:
    """A fitted combiner and how its threshold did out of fold on the calibration split."""

    combiner: Combiner
    precision: float
    recall: float
    f1: float
    pairs: int

    def summary(self) -> dict[str, float]:
        return {"hybrid_threshold": self.combiner.threshold, "hybrid_calibration_f1": self.f1,
                "hybrid_calibration_precision": self.precision, "hybrid_calibration_recall": self.recall,
                "hybrid_calibration_pairs": float(self.pairs)}


def fit_combiner(
    rows: Sequence[Sequence[float]],
    labels: Sequence[int],
    groups: Sequence[str],
    *,
    folds: int = 5,
    target_precision: float | None = None,
    f1_tolerance: float = 0.0,
) -> CombinerFit:
    """Fit on all rows; pick the threshold on k-fold out-of-fold probabilities (best F1 or a precision target)."""
    if not len(rows) == len(labels) == len(groups):
        raise ValueError("rows, labels and groups must have the same length")
    if len(set(labels)) < 2:
        raise InputError("the calibration split needs both equivalent and non-equivalent pairs", field="hybrid")
    out_of_fold = [0.0] * len(rows)
    for held in problem_folds(groups, folds):
        held_set = set(held)
        train = [i for i in range(len(rows)) if i not in held_set]
        if len({labels[i] for i in train}) < 2:  # a degenerate fold: fall back to all rows for it
            train = list(range(len(rows)))
        weights, bias = fit_logistic([rows[i] for i in train], [labels[i] for i in train])
        probs = Combiner(tuple(weights), bias, 0.5).probabilities([rows[i] for i in held])
        for i, p in zip(held, probs):
            out_of_fold[i] = p
    points = [p for p in threshold_sweep(out_of_fold, labels) if 0.0 < p.threshold < 1.0]
    chosen = pick_threshold(points, target_precision, f1_tolerance)
    weights, bias = fit_logistic(rows, labels)
    combiner = Combiner(tuple(weights), bias, round(float(chosen.threshold), 6))
    m = chosen.metrics
    return CombinerFit(combiner, m.precision, m.recall, m.f1, len(rows))


def attach_combiner(
    judge_dir: str | Path,
    pairs: Sequence[tuple[str, str]],
    labels: Sequence[int],
    groups: Sequence[str],
    *,
    target_precision: float | None = None,
    batch_size: int = 64,
    probs: Sequence[float] | None = None,
    f1_tolerance: float = 0.0,
    questions: Sequence[str] | None = None,
) -> CombinerFit:
    """Score ``pairs`` with the exported judge (an ensemble too), fit the combiner, store it in its ``config.json``.

    ``pairs`` must be a calibration split the judge was not trained on; ``groups`` their problem
    ids. The raw model's ``decision_threshold`` is left as it is, so the same directory still
    serves as a plain ``model`` judge (see ``HybridJudge``/``ModelJudge``). ``probs``: the judge's
    probabilities for ``pairs`` when the caller has scored them already (else they are scored here,
    with ``questions`` for a judge that reads them).
    """
    directory = Path(judge_dir)
    if directory.is_file():
        raise InputError("a hybrid combiner is stored in an exported directory, not a checkpoint", path=directory)
    if probs is None:
        probs = score_judge_dir(directory, pairs, batch_size=batch_size, questions=questions)  # members included
    elif len(probs) != len(pairs):
        raise ValueError(f"{len(probs)} probabilities for {len(pairs)} pairs")
    rows = [pair_features(a, b, p) for (a, b), p in zip(pairs, probs)]
    fit = fit_combiner(rows, labels, groups, target_precision=target_precision, f1_tolerance=f1_tolerance)
    update_settings(directory, {HYBRID_KEY: dict(fit.combiner.to_dict(), calibration={
        "precision": fit.precision, "recall": fit.recall, "f1": fit.f1, "pairs": fit.pairs})})
    return fit
