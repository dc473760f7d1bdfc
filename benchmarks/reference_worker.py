"""The reference implementation's judge worker, rebuilt faithfully as the serving benchmark's baseline.

What Lolo1222/EquivPruner serves (``merge/merge_model_worker.py``, ``merge_infer_fns.py``): a
FastAPI route ``POST /merge_model_inference`` whose ``async`` handler takes the worker semaphore
(``--limit-worker-concurrency``, default 5) and then calls the model *synchronously* -- one pair
per forward, tokenised with ``padding="max_length", max_length=2048`` (here capped at the model's
position limit: 512 for MiniLM), softmax, argmax -- so the event loop runs one forward at a time;
a batch of pairs is a Python loop of such forwards. Same answer shapes (``is_similar`` /
``is_similar_list``). No controller registration or heartbeat (not on the request path).

    python benchmarks/reference_worker.py --model DIR --port 21002
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from common import ROOT  # noqa: F401  (offline env, this checkout on sys.path)

import torch  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

REFERENCE_MAX_LENGTH = 2048


def build_app(model_dir: str, limit_worker_concurrency: int = 5) -> FastAPI:
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    max_length = min(REFERENCE_MAX_LENGTH, int(getattr(model.config, "max_position_embeddings", REFERENCE_MAX_LENGTH)))
    semaphore = asyncio.Semaphore(limit_worker_concurrency)
    app = FastAPI()

    @torch.inference_mode()
    def infer(pair: list[str]) -> bool:
        inputs = tokenizer(pair[0], pair[1], truncation="longest_first", padding="max_length",
                           max_length=max_length, return_tensors="pt")
        probabilities = torch.softmax(model(**inputs).logits, dim=-1)
        return bool(torch.argmax(probabilities, dim=1).item())

    @app.post("/merge_model_inference")
    async def merge_model_inference(request: dict[str, Any]) -> dict[str, Any]:
        async with semaphore:  # the worker semaphore, then the model call on the event loop itself
            pairs = request["input_pairs"]
            if isinstance(pairs[0], str):
                return {"input": pairs, "is_similar": infer(pairs)}
            return {"input": pairs, "is_similar_list": [infer(p) for p in pairs]}

    @app.get("/health")
    async def health() -> str:
        return "ok"

    return app


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=21002)
    ap.add_argument("--limit_worker_concurrency", type=int, default=5)
    args = ap.parse_args(argv)
    uvicorn.run(build_app(args.model, args.limit_worker_concurrency), host=args.host, port=args.port,
                log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
