"""Tiny random-init models for CPU tests and the CPU demo (no hub access needed).

``build_tiny_policy(dir)`` writes a LlamaForCausalLM (hidden 128, 2 heads of dim 64 -- vLLM's
CPU attention kernel rejects head_dim 16 --, 2 layers) with a byte-level BPE tokenizer trained on
the fly over a few GSM8K-style sentences, wrapped as ``PreTrainedTokenizerFast`` with
``<s>``/``</s>``/``<pad>`` and a small chat template, so every real code path (chat template,
``from_pretrained``, ``vllm.LLM``) runs. ``build_tiny_prm(dir)`` writes the same shape with a
tokenizer holding ``ки``, ``+`` and ``-`` as single tokens: Math-Shepherd's convention, so
:class:`equiv.search.rewards.math_shepherd.MathShepherdPRM` runs on it unchanged.

Random weights sample near-uniformly over the vocabulary, which would make every "step" run to
the token limit. So the policy gets a *bias channel*: hidden dimension 0 of every embedding is
a constant that no layer writes to, and the output rows of the step separator ``"\\n\\n"`` and of
``</s>`` read it, giving those tokens a fixed extra logit. At temperature 0.7 a step then
averages about a dozen tokens and a solution several steps, like a real policy's tree. The
PRM is initialised with a larger weight scale (0.2) so its layers mix the context, and its
``+``/``-`` output rows are scaled to give P(+) a spread over roughly (0.1, 0.9) that depends on
the steps, instead of sitting at 0.5 or saturating. Byte tokens that would decode to control characters or broken UTF-8
get a large negative bias, so sampled text is printable.

Built deterministically (fixed corpus, ``torch.manual_seed``) in seconds on a CPU, and cached: a
directory holding a complete build with the same version stamp is reused.

``shape="qwen2.5-0.5b"`` builds the same thing at a real model's size (Qwen2.5-0.5B's
dimensions: hidden 896, 24 layers, 14 query / 2 KV heads of dim 64, MLP 4864, a 151,936-row
vocabulary, bf16): random weights, but the compute, memory traffic and KV cache of a real small
model, for timing search on a GPU (``benchmarks/bench_concurrency.py --shape``). Vocabulary rows
past the tokenizer's few hundred tokens get the large negative bias, so they are never sampled.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from equiv.search.conventions import MATH_SHEPHERD_STEP_TAG

TINY_VERSION = 4

SHAPES: dict[str, dict] = {
    "tiny": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=2, head_dim=64, vocab_size=None),
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, head_dim=64, vocab_size=151936),
}
"""Model dimensions by name; ``vocab_size=None`` is the tokenizer's own size."""

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_CORPUS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning.",
    "She sells the remainder at the farmers' market daily for $2 per fresh duck egg.",
    "Janet sells 16 - 3 - 4 = 9 duck eggs a day.",
    "She makes 9 * 2 = $18 every day at the farmer's market.",
    "A robe takes 2 bolts of blue fiber and half that much white fiber.",
    "It takes 2/2 = 1 bolt of white fiber. So the total amount of fabric is 2 + 1 = 3 bolts.",
    "Step 1: Josh buys a house for $80,000 and puts in $50,000 in repairs. ки",
    "Step 2: The total cost is 80,000 + 50,000 = 130,000 dollars. ки",
    "Step 3: The answer is: 70000 ки",
    "Let x be the number of apples. Then 3x + 5 = 20, so 3x = 15 and x = 5.",
    "The area of the rectangle is 12 times 7, which is 84 square meters.",
    "We have that r = \\sqrt{0^2 + 3^2} = 3. Therefore the answer is \\boxed{3}.",
    "So the probability is \\frac{1}{4} + \\frac{1}{2} = \\frac{3}{4}.",
    "The final answer is \\boxed{\\frac{3}{4}}.",
    "Each week he runs 3 sprints 3 times a week, 60 meters each: 3 * 3 * 60 = 540 meters.",
    "Therefore, the total number of students is 25 + 15 = 40.\n\nThe answer is 40.",
    "First, compute the discount: 20% of 50 is 10.\n\nThen the price is 50 - 10 = 40 dollars.",
    "If the train travels 60 miles per hour for 2.5 hours, it covers 150 miles.",
    "Please reason step by step, and put your final answer within \\boxed{}.",
    "<|system|>\n<|user|>\n<|assistant|>\n",
    "#### 18\n#### 3\n#### 540\n#### 40",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 + - * / = ( ) [ ] { } ^ _ \\cdot \\times \\div % $ . , : ;",
]

SPECIAL = ["<pad>", "<s>", "</s>"]


def _train_tokenizer(extra_tokens: list[str], vocab_size: int = 600):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    if extra_tokens:
        from tokenizers import AddedToken

        tok.add_tokens([AddedToken(t, normalized=False) for t in extra_tokens])
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", model_max_length=4096
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _build(out: Path, *, kind: str, shape: str = "tiny") -> None:
    import math

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, LlamaForTokenClassification

    # "\n\n" as one token: the byte-level pre-tokenizer would otherwise rarely merge it.
    extra = {"policy": ["\n\n"], "prm": ["\n\n", MATH_SHEPHERD_STEP_TAG, "+", "-"], "token_prm": ["\n\n", "<extra_0>"]}[kind]
    tokenizer = _train_tokenizer(extra)
    dims = dict(SHAPES[shape])
    vocab_size = dims.pop("vocab_size") or len(tokenizer)
    config = LlamaConfig(
        vocab_size=vocab_size,
        **dims,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # The tiny PRM's larger scale mixes its 2 layers; over 24 it would only blow up.
        initializer_range=0.02 if kind == "policy" or shape != "tiny" else 0.2,
    )
    torch.manual_seed({"policy": 1234, "prm": 4321, "token_prm": 2468}[kind])
    if kind == "token_prm":
        config.num_labels = 2
        model = LlamaForTokenClassification(config)
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)
        return
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        emb = model.model.embed_tokens.weight
        lm = model.lm_head.weight
        if kind == "policy":
            # Bias channel (module docstring): dim 0 is constant and untouched by the layers.
            emb[:, 0] = 1.0
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight[0, :] = 0.0
                layer.mlp.down_proj.weight[0, :] = 0.0
            lm[:, 0] = 0.0
            # After the final RMSNorm dim 0 is about sqrt(hidden) = 11.3 in the tiny shape; these
            # give extra logits of about 2.7 (step break) and 1.1 (EOS). 24 layers grow the other
            # dims of the residual stream, which shrinks dim 0 after the norm: there, measure it.
            scale = math.sqrt(config.hidden_size) if shape == "tiny" else _final_dim0(model, tokenizer)
            sep = tokenizer.convert_tokens_to_ids("\n\n")
            if sep is None or sep == tokenizer.unk_token_id:
                raise RuntimeError("tiny tokenizer has no single '\\n\\n' token")
            lm[sep, 0] = 2.7 / scale
            lm[tokenizer.eos_token_id, 0] = 1.1 / scale
            # Byte tokens that decode to control characters or broken UTF-8 are never sampled,
            # so demo trees show readable (if meaningless) text.
            for tid in range(len(tokenizer)):
                text = tokenizer.decode([tid])
                if tid != sep and text and not all(c == "\n" or 32 <= ord(c) < 127 for c in text):
                    lm[tid, 0] = -8.0 / scale
            lm[len(tokenizer) :, 0] = -8.0 / scale  # rows past the tokenizer (real-shaped vocab)
        else:
            for t in ("+", "-"):
                lm[tokenizer.convert_tokens_to_ids(t)] *= 0.25
    if shape != "tiny":
        model.to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _final_dim0(model, tokenizer) -> float:
    """Mean of hidden dimension 0 after the final norm over the corpus (the bias channel's gain)."""
    import torch

    ids = tokenizer(" ".join(_CORPUS[:6]), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        hidden = model.model(input_ids=ids).last_hidden_state
    return float(hidden[0, :, 0].mean())


def _cached_build(directory: str | Path, kind: str, shape: str = "tiny") -> str:
    """Build into ``directory`` unless a complete build of this version is already there.

    Written to a temporary sibling and renamed, so a crash or a concurrent builder never leaves
    a half-written model that later runs would trust.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    directory = Path(directory)
    stamp = {"kind": kind, "version": TINY_VERSION}
    if shape != "tiny":  # the tiny stamp stays as it was, so existing caches stay valid
        stamp["shape"] = shape
    marker = directory / "tiny.json"
    if marker.exists():
        try:
            if json.loads(marker.read_text()) == stamp:
                return str(directory)
        except (OSError, ValueError):
            pass
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        _build(tmp, kind=kind, shape=shape)
        (tmp / "tiny.json").write_text(json.dumps(stamp))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if marker.exists():  # a concurrent builder won the race
            return str(directory)
        raise
    return str(directory)


def build_tiny_policy(directory: str | Path, shape: str = "tiny") -> str:
    """A random-init Llama policy (``shape`` from :data:`SHAPES`) with a real tokenizer and chat
    template; returns its path."""
    return _cached_build(directory, "policy", shape)


def build_tiny_prm(directory: str | Path, shape: str = "tiny") -> str:
    """A random-init Llama PRM (``shape`` from :data:`SHAPES`) whose tokenizer has ``ки``, ``+``,
    ``-``; returns its path."""
    return _cached_build(directory, "prm", shape)


def build_tiny_token_prm(directory: str | Path) -> str:
    """A tiny two-label token-classification Llama with ``<extra_0>`` (Qwen2.5-Math-PRM's shape)."""
    return _cached_build(directory, "token_prm")


TINY_PREFIX = "tiny:"


def resolve_tiny(model: str, kind: str) -> str:
    """``tiny:DIR`` -> build (or reuse) a tiny random-init model in DIR (CPU demo, tests); other
    names pass through. ``kind`` is ``policy`` or ``prm``; an empty DIR means ``.cache/tiny/<kind>``."""
    if not model.startswith(TINY_PREFIX):
        return model
    directory = model[len(TINY_PREFIX) :] or f".cache/tiny/{kind}"
    return build_tiny_policy(directory) if kind == "policy" else build_tiny_prm(directory)
