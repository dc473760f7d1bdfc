"""The ``embedding`` strategy: cosine similarity of sentence embeddings (the SBERT baseline)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from equiv.backbones import BUNDLED_MINILM, resolve_model_name
from equiv.devices import resolve_device
from equiv.errors import InputError
from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge, Pair, check_threshold

DEFAULT_EMBEDDING_THRESHOLD = 0.9


class EmbeddingJudge(CachedJudge):
    """Cosine similarity of sentence embeddings (the SBERT baseline: bundled all-MiniLM-L6-v2).

    Each distinct text is encoded once (embeddings are cached per text, pairs per pair), in
    batches. ``pair_probabilities`` is the cosine clipped at 0; equivalent iff ``>= threshold``.
    """

    name = "embedding"
    learned = True
    # the SBERT baseline is the cosine alone: no same-step shortcut
    default_policy = DecisionPolicy(threshold=0.9, prefilter=None, same_step="off")

    def __init__(
        self,
        model: str | None = None,
        *,
        threshold: float | None = None,
        batch_size: int = 64,
        device: str = "auto",
    ) -> None:
        super().__init__()
        self.threshold = check_threshold(DEFAULT_EMBEDDING_THRESHOLD if threshold is None else threshold, self.name)
        self.model_name = model or BUNDLED_MINILM
        path = resolve_model_name(self.model_name)
        if not Path(path).exists() and (path.startswith((".", "/", "~")) or Path(path).suffix):
            raise InputError("embedding model directory does not exist", path=path, field="model")
        from sentence_transformers import SentenceTransformer

        self.device = resolve_device(device)
        try:
            self.encoder = SentenceTransformer(path, device=self.device)
        except (OSError, ValueError) as err:
            raise InputError(f"cannot load a sentence-transformers model: {err}".splitlines()[0], path=path, field="model") from None
        self.batch_size = batch_size
        self._embeddings: dict[str, Any] = {}

    def clear_cache(self) -> None:
        super().clear_cache()
        self._embeddings.clear()

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        import torch

        texts = sorted({t for pair in pairs for t in pair} - self._embeddings.keys())
        if texts:
            vectors = self.encoder.encode(
                texts, batch_size=self.batch_size, convert_to_tensor=True, normalize_embeddings=True,
                show_progress_bar=False,
            )
            self.stats.forward_batches += math.ceil(len(texts) / self.batch_size)
            for text, vector in zip(texts, vectors.float().cpu()):
                self._embeddings[text] = vector
        left = torch.stack([self._embeddings[a] for a, _ in pairs])
        right = torch.stack([self._embeddings[b] for _, b in pairs])
        cosine = (left * right).sum(-1).clamp(-1.0, 1.0).tolist()
        return [(max(c, 0.0), c) for c in cosine]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.model_name}
