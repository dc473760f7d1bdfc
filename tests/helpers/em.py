"""A tiny EM set-up shared by the one-process and the DDP EM tests.

A tiny random-init BERT (with the bundled MiniLM tokenizer) keeps each fit to seconds. Its
probabilities carry no meaning, so :class:`RuleScoredEM` scores with the real model (the batched
``score_pairs`` pass, all-gather under DDP) and then applies a deterministic rule on top:
identical sentences are 0.99-equivalent, anything else keeps min(model probability, 0.5). The
E-step decisions are thereby known in advance while the real scoring path still runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import lightning as L

from equiv.backbones import BUNDLED_MINILM
from equiv.data.datamodule import MathEquivDataModule
from equiv.judge.em_callback import EMRefinementCallback
from equiv.judge.module import PairClassifier

TINY_BERT = {
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 128,
}


def write_tiny_data(root: Path) -> tuple[Path, Path]:
    """Train: label-0 pairs sharing one identical sentence, fully shared ones, positives, singles."""
    train = []
    for k in range(6):
        # Shared first sentence -> removed; the differing second sentences stay.
        train.append({"sentence1": f"There are {k + 2} boxes. Each box holds {k + 3} apples.",
                      "sentence2": f"There are {k + 2} boxes. Each box holds {k + 4} pears.", "result": 0})
    for k in range(2):
        # Every sentence shared (in another order) -> dropped.
        train.append({"sentence1": f"Tom has {k} cats. Ann has {k + 1} dogs.",
                      "sentence2": f"Ann has {k + 1} dogs. Tom has {k} cats.", "result": 1})
    for k in range(4):
        # Positives with a shared sentence: not refined (refine_labels [0]).
        train.append({"sentence1": f"We add {k} and 2. The sum is {k + 2}.",
                      "sentence2": f"We add {k} and 2. So we get {k + 2}.", "result": 4})
    for k in range(4):
        train.append({"sentence1": f"Multiply {k} by 3.", "sentence2": f"Divide {k} by 3.", "result": 0})
    val = [
        {"sentence1": "Add 1 and 1. The sum is 2.", "sentence2": "Add 1 and 1. The sum is 3.", "result": 0},
        {"sentence1": "Half of 8 is 4.", "sentence2": "8 / 2 = 4.", "result": 4},
        {"sentence1": "Twice 3 is 6.", "sentence2": "3 + 3 = 7.", "result": 0},
        {"sentence1": "5 - 2 = 3.", "sentence2": "Take 2 from 5 to get 3.", "result": 3},
    ]
    paths = []
    for name, rows in (("train", train), ("valid", val)):
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


class RuleScoredEM(EMRefinementCallback):
    """Real model scoring, then a deterministic rule on top (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model_probabilities: list[list[float]] = []

    def score(self, trainer, pl_module, pairs: Sequence[tuple[str, str]]) -> list[float]:
        real = super().score(trainer, pl_module, pairs)
        self.model_probabilities.append(real)
        return [0.99 if a.strip() == b.strip() else min(p, 0.5) for (a, b), p in zip(pairs, real)]


def make_parts(train: Path, val: Path, seed: int = 0) -> tuple[PairClassifier, MathEquivDataModule]:
    """A seeded tiny-BERT ``PairClassifier`` and its data module on ``train``/``val``."""
    L.seed_everything(seed, verbose=False)
    model = PairClassifier(model_name=BUNDLED_MINILM, pretrained=False, hf_config=TINY_BERT, max_length=64, learning_rate=1e-3)
    data = MathEquivDataModule(train=str(train), val=str(val), model_name=BUNDLED_MINILM, max_length=64, batch_size=4)
    return model, data
