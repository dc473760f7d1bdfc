"""score_pairs: the one batched scorer behind EM, the model strategy and the benchmark."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from equiv.backbones import BUNDLED_MINILM, resolve_model_name
from equiv.judge.inference import score_pairs


@pytest.fixture(scope="module")
def tiny_judge():
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_name(BUNDLED_MINILM))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, num_labels=2,
    )
    return BertForSequenceClassification(config), tokenizer


PAIRS = [
    ("She has 16 - 3 = 13 eggs left.", "16 - 3 = 13 eggs remain."),
    ("x", "a much longer second step that pads the batch: 2 * 6 = 12 and 12 + 1 = 13"),
    ("Non-ASCII: Janet’s ducks — 5 €", "$\\frac{1}{2} \\cdot 4 = 2$"),
    ("3 + 4 = 7", "4 + 3 = 7"),
]


def test_batched_scores_equal_one_by_one_in_input_order(tiny_judge):
    model, tokenizer = tiny_judge
    batched = score_pairs(model, tokenizer, PAIRS, batch_size=3, max_length=64)
    single = torch.cat([score_pairs(model, tokenizer, [p], batch_size=1, max_length=64) for p in PAIRS])
    assert batched.shape == (len(PAIRS),)
    assert torch.allclose(batched, single, atol=1e-5)
    assert ((batched > 0) & (batched < 1)).all()


def test_empty_input_and_train_mode_restored(tiny_judge):
    model, tokenizer = tiny_judge
    assert score_pairs(model, tokenizer, []).numel() == 0
    model.train()
    score_pairs(model, tokenizer, PAIRS[:1], max_length=64)
    assert model.training
    model.eval()
    score_pairs(model, tokenizer, PAIRS[:1], max_length=64)
    assert not model.training


def test_huge_step_is_cut_before_tokenising_and_scores_like_its_head(tiny_judge):
    model, tokenizer = tiny_judge
    head = "Janet sells 16 - 3 - 4 = 9 eggs. " * 20
    huge = head + "and more " * 200_000  # ~1.8M characters
    p_huge = score_pairs(model, tokenizer, [(huge, "9 eggs are sold")], max_length=64)
    p_head = score_pairs(model, tokenizer, [(head, "9 eggs are sold")], max_length=64)
    assert torch.allclose(p_huge, p_head, atol=1e-5)  # the model sees the same first 64 tokens
