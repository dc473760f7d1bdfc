"""A tiny random-init Longformer pair classifier, saved as a local model directory.

The paper's judge is ``allenai/longformer-base-4096``, which cannot be downloaded here. Tests build
the same architecture at toy size from a ``LongformerConfig`` and train it through exactly the code
path the real recipe uses (``model_name`` = a local directory). It borrows the bundled MiniLM's
BERT tokenizer (so no tokenizer has to be trained); ``type_vocab_size=2`` because that tokenizer
emits segment ids for the second sentence, which RoBERTa's does not.
"""

from __future__ import annotations

from pathlib import Path

from equiv.backbones import bundled_minilm_dir


LONGFORMER_BASE = dict(hidden_size=768, num_layers=12, num_heads=12, attention_window=512, max_positions=4096,
                       intermediate_size=3072)
"""``allenai/longformer-base-4096``'s dimensions (its vocabulary aside: the tokenizer is MiniLM's)."""


def build_tiny_longformer(
    out_dir: str | Path,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 2,
    attention_window: int = 8,
    max_positions: int = 258,
    intermediate_size: int | None = None,
    seed: int = 0,
) -> Path:
    """Save a random-init ``LongformerForSequenceClassification`` (2 labels) + tokenizer to ``out_dir``.

    The defaults are toy-sized; :data:`LONGFORMER_BASE` holds longformer-base-4096's dimensions
    (``build_tiny_longformer(dir, **LONGFORMER_BASE)``) for timing the paper's judge shape.
    """
    import torch
    from transformers import AutoTokenizer, LongformerConfig, LongformerForSequenceClassification

    from equiv.judge.module import ID2LABEL, LABEL2ID

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(bundled_minilm_dir()))
    config = LongformerConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=intermediate_size or hidden_size * 2,
        attention_window=attention_window,
        max_position_embeddings=max_positions + 2,
        type_vocab_size=2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        sep_token_id=tokenizer.sep_token_id,
        num_labels=2,
        id2label=dict(ID2LABEL),
        label2id=dict(LABEL2ID),
    )
    torch.manual_seed(seed)
    model = LongformerForSequenceClassification(config)
    model.save_pretrained(out)
    tokenizer.model_max_length = max_positions
    tokenizer.save_pretrained(out)
    return out


def build_tiny_judge(out_dir: str | Path, *, decision_threshold: float = 0.5, prefilter_threshold: float = 0.75,
                     **dims: int) -> Path:
    """A whole judge export around :func:`build_tiny_longformer`: the weights and tokenizer plus the
    ``equiv`` settings block (max length and the decision policy: threshold, prefilter)
    that loading a judge requires, as ``trainer_cli.py fit`` writes it. For benchmarks and tests that
    time or exercise a judge of a given shape; its verdicts mean nothing (random weights)."""
    from equiv.judge.export import update_settings

    out = build_tiny_longformer(out_dir, **dims)
    max_length = int(dims.get("max_positions", 258))
    update_settings(out, {"max_length": max_length},
                    policy_knobs={"threshold": decision_threshold, "prefilter": prefilter_threshold})
    return out
