"""Tiny random-init judges saved exactly like an export of ``trainer_cli.py fit``.

They load through the real ``ModelJudge`` path (config, tokenizer, ``equiv`` settings block) in a
fraction of a second, so any test or documented command that needs "a judge directory" gets one.
Settings may be given in the old scattered keys (``decision_threshold``, ...), the shorter way to
write a test's knobs; they are stored as ``fit`` stores them today, as the one ``equiv.policy``
block, unless a test of the old-export loader asks for the old form (``legacy=True``).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

SETTINGS = {
    "label_mapping": {"equivalent": [3, 4], "not_equivalent": [0, 1]},
    "max_length": 96,
    "prefilter_threshold": 0.6,
    "decision_threshold": 0.5,
    "model_name": "tiny-bert",
}


def stored_settings(settings: dict) -> dict:
    """``settings`` as an export of today's ``fit`` stores them: the old scattered keys become the
    ``policy`` block they convert to (:func:`equiv.judge.policy.policy_from_settings`)."""
    from equiv.judge.policy import LEGACY_KEYS, POLICY_KEY, policy_from_settings

    if POLICY_KEY in settings or not set(settings) & set(LEGACY_KEYS):
        return dict(settings)
    block = {k: v for k, v in settings.items() if k not in LEGACY_KEYS}
    block[POLICY_KEY] = policy_from_settings(settings).to_dict()
    return block


def make_tiny_judge(out: Path, *, kind: str = "bert", settings: dict | None = SETTINGS, seed: int = 0,
                    legacy: bool = False) -> Path:
    """A random-init 2-label classifier + the bundled MiniLM tokenizer, saved like an export
    (``legacy``: keep ``settings``' old scattered keys as an export from before the policy did)."""
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForSequenceClassification,
        LongformerConfig,
        LongformerForSequenceClassification,
    )

    from equiv.backbones import resolve_model_name

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(resolve_model_name("bundled:all-MiniLM-L6-v2"))
    common = dict(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=64, num_labels=2, pad_token_id=0)
    if kind == "bert":
        model = BertForSequenceClassification(BertConfig(max_position_embeddings=128, **common))
    else:
        model = LongformerForSequenceClassification(
            LongformerConfig(max_position_embeddings=258, attention_window=16, **common)
        )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    if settings is not None:
        config = json.loads((out / "config.json").read_text())
        config["equiv"] = dict(settings) if legacy else stored_settings(settings)
        (out / "config.json").write_text(json.dumps(config))
    return out


def tiny_fit_argv(tiny: Path, train: Path, out: Path, *extra: str) -> list[str]:
    """``trainer_cli.py fit`` of the demo config on a tiny judge for one short epoch, calibrated on
    30 % of ``train``'s problems and exported to ``out/judge`` (``extra``: the flags under test)."""
    return ["fit", "--config", "configs/demo.yaml", "--trainer.logger=false", f"--trainer.default_root_dir={out}",
            f"--model.model_name={tiny}", "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
            "--trainer.enable_progress_bar=false", f"--data.train={train}", "--data.val=null",
            "--data.calibration_fraction=0.3", "--threshold_from_val=true", f"--export_dir={out / 'judge'}", *extra]


def demo_search_argv(gsm8k_test: Path, judge: Path, out: Path) -> list[str]:
    """``search_cli.py eval`` of the CPU demo on the first GSM8K problem, pruned by ``judge``."""
    return ["eval", "--config", "configs/search/demo_cpu.yaml", "--data.path", str(gsm8k_test), "--data.end", "1",
            "--search.width", "3", "--search.max_depth", "2", "--run.progress", "false",
            "--pruner.model", str(judge), "--out", str(out)]
