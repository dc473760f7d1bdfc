"""How alike two short texts read: the cosine of their sentence embeddings (the bundled
all-MiniLM-L6-v2 as sentence-transformers ships it, *not* the fine-tuned judge).

Why a second model beside the judge: the judge is a cross-encoder fine-tuned on steps that
compute, and it is unsure of the sub-goals of a plan ("Find the total number of guests" /
"Calculate how many people attend"): scored item by item it merges fewer plans than whole. The
pretrained sentence model was trained for exactly that question -- do two sentences say the same
-- on a billion sentence pairs. The aligned-plan stage of :func:`equiv.judge.decide.decide` asks
it about each pair of sub-goals; docs/experiments/2026-12-01-plans-item-by-item.md measured it.

Each text is encoded once per process and kept in a bounded least-recently-used map, so a search
that compares the same plan with its nine siblings encodes it once. The encoder loads on first
use (:func:`paraphrase_scorer`), so a policy that never meets two plans never loads it.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Sequence

from equiv.backbones import resolve_model_name
from equiv.errors import InputError
from equiv.judge.policy import DEFAULT_PARAPHRASE_MODEL

Pair = tuple[str, str]
ParaphraseScorer = Callable[[Sequence[Pair]], list[float]]
"""What :func:`paraphrase_scorer` returns and :func:`equiv.judge.decide.decide` takes as ``paraphrase``
(declared there too: decide imports this module only when a pair of plans needs it)."""

MAX_CACHED_TEXTS = 16_384
"""Texts whose embeddings a process keeps (384 floats each for MiniLM: about 25 MB at the bound)."""


class SentenceEncoder:
    """Normalised sentence embeddings of texts, each text encoded once (bounded LRU)."""

    def __init__(self, model: str = DEFAULT_PARAPHRASE_MODEL, *, device: str = "cpu", batch_size: int = 64,
                 max_cached: int = MAX_CACHED_TEXTS, field: str = "paraphrase_model") -> None:
        """``field`` names the setting a bad ``model`` came from in the one-line error (the aligned-plan
        stage's ``paraphrase_model``; the ``embedding`` strategy's ``model``)."""
        path = resolve_model_name(model)
        if not Path(path).exists() and (path.startswith((".", "/", "~")) or Path(path).suffix):
            raise InputError("sentence model directory does not exist", path=path, field=field)
        from sentence_transformers import SentenceTransformer

        try:
            self.model = SentenceTransformer(path, device=device)
        except (OSError, ValueError) as err:
            raise InputError(f"cannot load a sentence-transformers model: {err}".splitlines()[0], path=path,
                             field=field) from None
        self.name = model
        self.batch_size = batch_size
        self.max_cached = max_cached
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self.encoded = 0  # texts encoded so far (a repeat costs nothing: what the tests read)
        self.batches = 0  # forward batches run so far (the ``embedding`` strategy's ``forward_batches``)

    def vectors(self, texts: Sequence[str]) -> list[Any]:
        """One normalised embedding (a float32 CPU tensor) per text, in order."""
        new = sorted(set(texts) - self._vectors.keys())
        if new:
            encoded = self.model.encode(new, batch_size=self.batch_size, convert_to_tensor=True,
                                        normalize_embeddings=True, show_progress_bar=False)
            self.encoded += len(new)
            self.batches += -(-len(new) // self.batch_size)
            for text, vector in zip(new, encoded.float().cpu()):
                self._vectors[text] = vector
        out = []
        for text in texts:
            self._vectors.move_to_end(text)
            out.append(self._vectors[text])
        while len(self._vectors) > self.max_cached:
            self._vectors.popitem(last=False)
        return out

    def clear(self) -> None:
        """Forget every kept embedding (a judge's ``clear_cache``)."""
        self._vectors.clear()

    def similarity(self, pairs: Sequence[Pair]) -> list[float]:
        """The cosine of each pair's embeddings, in [-1, 1]."""
        if not pairs:
            return []
        import torch

        vectors = self.vectors([t for pair in pairs for t in pair])
        left, right = torch.stack(vectors[0::2]), torch.stack(vectors[1::2])
        return (left * right).sum(-1).clamp(-1.0, 1.0).tolist()


@functools.lru_cache(maxsize=4)
def sentence_encoder(model: str = DEFAULT_PARAPHRASE_MODEL) -> SentenceEncoder:
    """The process's encoder of ``model`` on the CPU (one per model: a service or a search loads it
    once). The CPU because the model is small and the texts few: a plan's handful of sub-goals."""
    return SentenceEncoder(model)


def paraphrase_scorer(model: str = DEFAULT_PARAPHRASE_MODEL) -> ParaphraseScorer:
    """A function from pairs of texts to their cosines, loading ``model`` on its first call."""

    def score(pairs: Sequence[Pair]) -> list[float]:
        return sentence_encoder(model).similarity(pairs)

    return score
