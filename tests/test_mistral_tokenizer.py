"""Math-Shepherd's step tag and +/- ids on Mistral-7B's real tokenizer.

``mistral-common`` ships Mistral-7B's original SentencePiece model (``tokenizer.model.v1``, 32000
pieces), the tokenizer of ``peiyi9979/math-shepherd-mistral-7b-prm``. The reference hard-codes
``+``/``-`` = 648/387 and ``ки`` = 12902; our PRM derives them from the tokenizer. Here a tiny
random-init Mistral is built around the real tokenizer, so the derivation, the tag positions on
real multi-step GSM8K text and the scores read at those positions are checked against the real
vocabulary (the weights are random; only the token bookkeeping is under test).

The SentencePiece model is read with protobuf (transformers' own ``sentencepiece_model_pb2``)
and turned into a ``LlamaTokenizer`` the way transformers' converter does, because the
``sentencepiece`` package itself is not a dependency.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest
import torch

pytest.importorskip("mistral_common")

from equiv.search.rewards import RewardConfig, build_reward_model  # noqa: E402
from equiv.search.types import ScoreRequest  # noqa: E402

# Real multi-step text: GSM8K test problem 1's reference solution, one step per line.
QUESTION = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
    "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck egg. "
    "How much in dollars does she make every day at the farmers' market?"
)
STEPS = (
    "Janet sells 16 - 3 - 4 = 9 duck eggs a day.",
    "She makes 9 * 2 = $18 every day at the farmer's market.",
    "The answer is: 18",
)


def mistral_tokenizer_dir(directory: Path) -> Path:
    """Mistral-7B's tokenizer (from mistral-common's tokenizer.model.v1) saved as a HF directory."""
    from transformers import LlamaTokenizer
    from transformers.convert_slow_tokenizer import import_protobuf
    from transformers.tokenization_utils_base import generate_merges

    model_file = Path(str(files("mistral_common").joinpath("data", "tokenizer.model.v1")))
    proto = import_protobuf().ModelProto()
    proto.ParseFromString(model_file.read_bytes())
    vocab = {piece.piece: i for i, piece in enumerate(proto.pieces)}
    scores = {piece.piece: piece.score for piece in proto.pieces}
    tokenizer = LlamaTokenizer(vocab=vocab, merges=generate_merges(vocab, scores), legacy=False)
    tokenizer.save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="module")
def real_tok_prm(tmp_path_factory):
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    directory = mistral_tokenizer_dir(tmp_path_factory.mktemp("mistral") / "prm")
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=512)
    MistralForCausalLM(config).save_pretrained(str(directory))
    prm = build_reward_model(RewardConfig(kind="math_shepherd", model=str(directory), device="cpu", dtype="float32"))
    return tokenizer, prm


def test_the_real_tokenizer_has_the_reference_ids(real_tok_prm):
    tokenizer, _ = real_tok_prm
    assert len(tokenizer) == 32000
    assert tokenizer.encode("+ -", add_special_tokens=False) == [648, 387]
    assert tokenizer.encode("ки", add_special_tokens=False)[-1] == 12902


def test_prm_derives_the_reference_ids(real_tok_prm):
    _, prm = real_tok_prm
    assert prm.candidate_ids == [648, 387]
    assert prm.step_tag_id == 12902


def test_one_tag_after_each_real_step(real_tok_prm):
    tokenizer, prm = real_tok_prm
    ids = tokenizer.encode(prm.format(ScoreRequest(QUESTION, STEPS)))
    tags = [pos for pos, token in enumerate(ids) if token == 12902]
    assert len(tags) == len(STEPS)
    starts = [ids.index(tokenizer.encode(QUESTION, add_special_tokens=False)[-1]) + 1] + [t + 1 for t in tags[:-1]]
    for step, start, tag in zip(STEPS, starts, tags):
        assert tokenizer.decode(ids[start:tag]).strip() == step


def test_scores_are_p_plus_at_the_tags(real_tok_prm):
    tokenizer, prm = real_tok_prm
    request = ScoreRequest(QUESTION, STEPS)
    scores = prm.score([request])[0]
    ids = tokenizer.encode(prm.format(request))
    tags = [pos for pos, token in enumerate(ids) if token == 12902]
    with torch.no_grad():
        logits = prm.model(input_ids=torch.tensor([ids])).logits[0]
    expected = torch.softmax(logits[tags][:, [648, 387]], dim=-1)[:, 0]
    assert scores == pytest.approx(expected.tolist(), abs=1e-5)
