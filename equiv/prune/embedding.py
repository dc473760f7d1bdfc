"""The ``embedding`` strategy: cosine similarity of sentence embeddings (the SBERT baseline)."""

from __future__ import annotations

from typing import Any

from equiv.backbones import BUNDLED_MINILM
from equiv.devices import resolve_device
from equiv.judge.paraphrase import SentenceEncoder
from equiv.judge.policy import DecisionPolicy
from equiv.prune.cached import CachedJudge, Pair, check_threshold

DEFAULT_EMBEDDING_THRESHOLD = 0.9


class EmbeddingJudge(CachedJudge):
    """Cosine similarity of sentence embeddings (the SBERT baseline: bundled all-MiniLM-L6-v2).

    Each distinct text is encoded once, in batches, by :class:`equiv.judge.paraphrase.SentenceEncoder`
    (a bounded least-recently-used map of embeddings per text; pairs are cached per pair).
    ``pair_probabilities`` is the cosine clipped at 0; equivalent iff ``>= threshold``.
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
        self.device = resolve_device(device)
        # one loader and one bounded per-text cache with the aligned-plan stage's encoder
        self.encoder = SentenceEncoder(self.model_name, device=self.device, batch_size=batch_size, field="model")
        self.batch_size = batch_size

    def clear_cache(self) -> None:
        super().clear_cache()
        self.encoder.clear()

    def _judge_new(self, pairs: list[Pair]) -> list[tuple[float, float]]:
        batches = self.encoder.batches
        cosine = self.encoder.similarity(pairs)
        self.stats.forward_batches += self.encoder.batches - batches
        return [(max(c, 0.0), c) for c in cosine]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.model_name}
