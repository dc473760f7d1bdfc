"""Small GGUF files written by the tests (the ``gguf`` package; a test skips without it): a
metadata-only one for the architecture checks, and one holding only a byte-level BPE tokenizer
for a policy whose generating is done by a server at ``--policy.url``."""

from __future__ import annotations

from pathlib import Path

import pytest


def write_gguf(path: Path, arch: str = "llama", *, tokenizer: bool = False) -> Path:
    """A GGUF file of architecture ``arch`` with no tensors. ``tokenizer``: it also holds a
    byte-level BPE tokenizer (every byte a token, one merge), which transformers converts in a
    blink: what ``--policy.model`` needs when ``--policy.url`` does the generating."""
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tokenizer-only" if tokenizer else "test")
    if tokenizer:
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        tokens = ["<s>", "</s>", *bytes_to_unicode().values(), "ab"]
        writer.add_context_length(512)
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list(tokens)
        writer.add_token_types([3, 3] + [1] * (len(tokens) - 2))
        writer.add_token_scores([0.0] * len(tokens))
        writer.add_token_merges(["a b"])
        writer.add_bos_token_id(0)
        writer.add_eos_token_id(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
