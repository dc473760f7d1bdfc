"""Served judge vs the reference's serving, over loopback with a bounded number of concurrent clients.

Same model (the bundled all-MiniLM-L6-v2 with a fresh 2-label head, exported like a trained judge;
``--model DIR`` for another export), same sibling sets (width 10, from GSM8K model solutions and
paraphrase-like variants: ``bench_pruner.sibling_sets``), every set sent once (no cache reuse):

- **served**: ``search_cli.py serve`` (LitServe: requests of all clients batched into one judge
  call; the judge's same-step shortcut, prefilter and one dynamically padded forward); a client
  sends one ``/group`` request per set (a problem's siblings, 45 pairs).
- **reference**: ``benchmarks/reference_worker.py``, the reference's worker rebuilt (one pair per
  request, one forward each, padded to the model's limit); a client sends the set's 45 pairs one
  ``/merge_model_inference`` request at a time, as the reference's search asks. A second row: the
  same with the public code's client-side prefilter (Levenshtein ratio <= 0.75 -> not similar, no
  request).

``--clients`` threads (default 16) take sets from one queue. Pairs/s counts every pair of every
set (45 per set); latency is per request and per set. Prints the table and last
``speedup: <x>`` (served pairs/s over the reference's without prefilter).

    python benchmarks/bench_serve.py                 # 32 sets, 16 clients: a few minutes on 2 cores
    python benchmarks/bench_serve.py --quick         # 2 sets, 4 clients, the tiny judge: ~1 min
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from common import ROOT, SHARED_DATA  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.prune.grouping import sibling_pairs  # noqa: E402
from equiv.text.levenshtein import levenshtein_ratio  # noqa: E402

DEFAULT_DATA = SHARED_DATA / "gsm8k" / "model_solutions.jsonl"
REFERENCE_PREFILTER = 0.75


def post(url: str, payload: Any) -> Any:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as response:
        return json.loads(response.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server subprocess in its own session, healthy before use, stopped with its children."""

    def __init__(self, argv: list[str], threads: int) -> None:
        self.port = free_port()
        # the same torch CPU threads for both servers (one is stable on 2 shared cores)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        self.url = f"http://127.0.0.1:{self.port}"
        # its log to a file, not a pipe nobody reads while it serves (a full pipe would stall it)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, *argv, "--port", str(self.port)], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        try:
            self._wait_healthy(argv[0])
        except BaseException:  # not healthy, or interrupted while starting: leave nothing running
            self.stop()
            raise

    def _wait_healthy(self, name: str) -> None:
        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise SystemExit(f"{name} exited: {self.log.read().decode('utf-8', 'replace')[-1500:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} not healthy after 300 s")
            time.sleep(0.5)

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def drive(sets: list[list[str]], clients: int, one_set: Callable[[list[str], list[float]], None]) -> dict[str, Any]:
    """Run ``one_set`` for every set on ``clients`` threads; per-request and per-set latencies."""
    jobs: queue.Queue = queue.Queue()
    for s in sets:
        jobs.put(s)
    request_ms: list[float] = []
    set_ms: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def client() -> None:
        while True:
            try:
                texts = jobs.get_nowait()
            except queue.Empty:
                return
            mine: list[float] = []
            start = time.perf_counter()
            try:
                one_set(texts, mine)
            except Exception as err:  # noqa: BLE001 - reported, and the benchmark fails below
                errors.append(f"{type(err).__name__}: {err}")
            with lock:
                request_ms.extend(mine)
                set_ms.append(1000 * (time.perf_counter() - start))

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise SystemExit(f"{len(errors)} client error(s), first: {errors[0]}")
    pairs = sum(len(sibling_pairs(len(s))) for s in sets)

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0

    return {"sets": len(sets), "pairs": pairs, "requests": len(request_ms), "wall_s": wall, "pairs_per_s": pairs / wall,
            "request_p50_ms": pct(request_ms, 0.5), "request_p99_ms": pct(request_ms, 0.99),
            "set_p50_ms": pct(set_ms, 0.5), "set_p99_ms": pct(set_ms, 0.99),
            "request_mean_ms": statistics.fmean(request_ms) if request_ms else 0.0}


def served_set(url: str) -> Callable[[list[str], list[float]], None]:
    def one_set(texts: list[str], latencies: list[float]) -> None:
        start = time.perf_counter()
        answer = post(url + "/group", {"steps": texts})
        latencies.append(1000 * (time.perf_counter() - start))
        # a greedy /group judges each step against the representatives before it only, so it asks
        # at most every pair; its classes cover every step once
        assert len(answer["pairs"]) <= len(sibling_pairs(len(texts)))
        assert sorted(i for c in answer["classes"] for i in c) == list(range(len(texts)))
    return one_set


def reference_set(url: str, prefilter: float | None) -> Callable[[list[str], list[float]], None]:
    def one_set(texts: list[str], latencies: list[float]) -> None:
        for i, j in sibling_pairs(len(texts)):
            if prefilter is not None and levenshtein_ratio(texts[i], texts[j]) <= prefilter:
                continue
            start = time.perf_counter()
            answer = post(url + "/merge_model_inference", {"input_pairs": [texts[i], texts[j]]})
            latencies.append(1000 * (time.perf_counter() - start))
            assert isinstance(answer["is_similar"], bool)
    return one_set


def build_judge_dir(workdir: Path, tiny: bool) -> Path:
    """The MiniLM judge (pretrained encoder, fresh seeded head) or a tiny one, saved like an export."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from equiv.backbones import resolve_model_name

    torch.manual_seed(0)
    minilm = resolve_model_name("bundled:all-MiniLM-L6-v2")
    tok = AutoTokenizer.from_pretrained(minilm)
    if tiny:
        model = BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                                                         num_attention_heads=2, intermediate_size=64, num_labels=2,
                                                         max_position_embeddings=128))
    else:
        model = BertForSequenceClassification.from_pretrained(minilm, num_labels=2)
    out = workdir / ("tiny" if tiny else "minilm")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    from equiv.judge.export import update_settings

    # the settings block a judge export carries (loading refuses a directory without one): the
    # model's own length limit and the paper's defaults, what such a directory was read with before
    update_settings(out, {"max_length": int(model.config.max_position_embeddings)},
                    policy_knobs={"threshold": 0.5, "prefilter": 0.75})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 sets, 4 clients, a tiny judge (a smoke run)")
    ap.add_argument("--sets", type=int, default=None, help="sibling sets (default 32; --quick 2)")
    ap.add_argument("--clients", type=int, default=None, help="concurrent clients (default 16; --quick 4)")
    ap.add_argument("--model", type=Path, default=None, help="an exported judge (default: the MiniLM judge)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads of each server (the same for both)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    sets_n = args.sets or (2 if args.quick else 32)
    clients = args.clients or (4 if args.quick else 16)
    from bench_pruner import sibling_sets

    if not args.data.is_file():
        print(f"error: {args.data}: no such file (GSM8K model solutions; --data FILE)", file=sys.stderr)
        return 2
    sets = sibling_sets(args.data, sets_n)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or build_judge_dir(Path(tmp), tiny=args.quick)
        rows: dict[str, dict[str, Any]] = {}
        server = Server(["search_cli.py", "serve", "--model", str(model), "--device", "cpu"], args.threads)
        try:
            rows["served (/group, LitServe)"] = drive(sets, clients, served_set(server.url))
        finally:
            server.stop()
        server = Server(["benchmarks/reference_worker.py", "--model", str(model)], args.threads)
        try:
            rows["reference (1 pair/request)"] = drive(sets, clients, reference_set(server.url, None))
            rows["reference + its prefilter 0.75"] = drive(sets, clients, reference_set(server.url, REFERENCE_PREFILTER))
        finally:
            server.stop()
    print(f"{len(sets)} sibling sets of width {len(sets[0])} ({rows['served (/group, LitServe)']['pairs']} pairs), "
          f"{clients} concurrent clients, loopback, {args.threads} torch thread(s) per server, model {'tiny' if args.quick and not args.model else model.name}")
    header = ["way", "requests", "wall s", "pairs/s", "req p50 ms", "req p99 ms", "set p50 ms", "set p99 ms"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, r in rows.items():
        print(f"| {name} | {r['requests']} | {r['wall_s']:.1f} | {r['pairs_per_s']:.1f} | {r['request_p50_ms']:.0f} | "
              f"{r['request_p99_ms']:.0f} | {r['set_p50_ms']:.0f} | {r['set_p99_ms']:.0f} |")
    served = rows["served (/group, LitServe)"]["pairs_per_s"]
    with_prefilter = served / rows["reference + its prefilter 0.75"]["pairs_per_s"]
    speedup = served / rows["reference (1 pair/request)"]["pairs_per_s"]
    print(f"served vs the reference with its prefilter: {with_prefilter:.1f}x pairs/s")
    if args.json:
        args.json.write_text(json.dumps({"clients": clients, "sets": len(sets), "rows": rows, "speedup": speedup,
                                         "speedup_vs_prefiltered": with_prefilter}, indent=2))
    print(f"speedup: {speedup:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
