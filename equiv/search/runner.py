"""The evaluation runner: search every (problem, seed), record, resume, summarise.

A run directory (docs/ARCHITECTURE.md "Run directory") holds ``results.jsonl`` — one record per
(problem, seed), appended, flushed and fsynced the moment a problem finishes — and
``summary.json``, rewritten from ``results.jsonl`` at the end. Rerunning the same command
resumes: finished (id, seed) pairs are skipped, so a Ctrl-C or a crash loses at most the
problems in flight and duplicates nothing. Records holding an ``error`` are retried on rerun
(their old record is removed first) unless ``retry_errors`` is false. A torn last line (a crash
mid-write) is dropped; any other malformed line is an input error, never silently skipped.

Problems run as concurrent workers over one :class:`~equiv.search.dispatch.Dispatcher`, so the
engine calls of up to ``concurrency`` problems are merged into one batch per engine.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from equiv.errors import InputError
from equiv.search.config import ALGORITHMS, RunConfig, SearchConfig
from equiv.search.dfs import dfs
from equiv.search.dispatch import Dispatcher, run_workers
from equiv.prune.strategies import PrunerConfig
from equiv.search.expansion import SearchContext, SeedStream
from equiv.search.lookahead import lookahead
from equiv.search.mcts import mcts
from equiv.search.pairlog import PAIRS_FILE
from equiv.search.sbs import sbs
from equiv.search.tree import Node
from equiv.search.types import PairJudge, Policy, RewardModel

SEARCHES: dict[str, Callable[[SearchContext], Awaitable[Node]]] = {
    "mcts": mcts,
    "sbs": sbs,
    "dfs": dfs,
    "lookahead": lookahead,
}
assert tuple(SEARCHES) == ALGORITHMS

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
TREES = "trees"


@dataclass
class Engines:
    """The synchronous engines a run drives (built by the CLI, or scripted in tests).

    Pruning is on iff ``judge`` is set; ``pruner`` (the ``--pruner.*`` settings) says how its
    verdicts are grouped into classes.
    """

    policy: Policy
    reward: RewardModel
    judge: PairJudge | None = None
    pruner: PrunerConfig = field(default_factory=PrunerConfig)


@dataclass
class Grader:
    """Answer extraction and grading (defaults: :mod:`equiv.search.grading`)."""

    extract: Callable[[str, str], str | None]
    grade: Callable[[str | None, str, str], bool]

    @classmethod
    def default(cls) -> "Grader":
        from equiv.search.grading import extract_answer, grade

        return cls(extract=extract_answer, grade=grade)


def safe_name(problem_id: str) -> str:
    """A file name for a problem id (MATH-500 ids contain slashes).

    An id that had to be changed gets a short hash of the original, so ``a/b`` and ``a_b`` never
    share a tree file.
    """
    text = str(problem_id)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:120] or "problem"
    if name != text:
        name += "-" + hashlib.sha1(text.encode()).hexdigest()[:8]
    return name


def one_line(err: BaseException, limit: int = 500) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- results.jsonl ------------------------------------------------------------------------------
def read_result_lines(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """``(line number, record)`` for each record of a results file, and whether a torn final
    line (the writer died mid-write) was left out. Shared by the runner and the report."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    lines = raw.split("\n")
    rows: list[tuple[int, dict[str, Any]]] = []
    torn = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines) and not raw.endswith("\n"):
                torn = True  # the process died mid-write: that problem simply reruns
                continue
            raise InputError(
                f"malformed JSON: {err.msg} (column {err.colno}); fix or delete the line", path=path, line=number
            ) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", path=path, line=number)
        rows.append((number, record))
    return rows, torn


def read_results(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Records in ``path`` and whether a torn final line was dropped."""
    if not path.exists():
        return [], False
    rows, torn = read_result_lines(path)
    for number, record in rows:
        for key in ("id", "seed"):
            if key not in record:
                raise InputError("missing", path=path, line=number, field=key)
    return [record for _, record in rows], torn


def _key(record: dict[str, Any]) -> tuple[str, int]:
    return (str(record["id"]), int(record["seed"]))


def _append_pairs(path: Path, record: dict[str, Any], pairs: Sequence[dict[str, Any]]) -> None:
    """Append one problem's notable judge pairs (:mod:`equiv.search.pairlog`) with its id and seed."""
    with open(path, "a", encoding="utf-8") as handle:
        for pair in pairs:
            handle.write(json.dumps({"id": record["id"], "seed": record["seed"], **pair}, ensure_ascii=False) + "\n")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def prepare_resume(
    out_dir: Path, *, algo: str, pruner: str, retry_errors: bool
) -> tuple[set[tuple[str, int]], list[dict[str, Any]]]:
    """Finished (id, seed) keys; compacts results.jsonl when records must go (retried errors,
    a torn line). Refuses a directory holding another algorithm's or pruner's results."""
    path = out_dir / RESULTS
    records, torn = read_results(path)
    for number, record in enumerate(records, start=1):
        for name, want in (("algo", algo), ("pruner", pruner)):
            if name in record and record[name] != want:
                raise InputError(
                    f"holds results of {name} {record[name]!r}, this run is {want!r}; use another --out",
                    path=path,
                    field=name,
                )
    kept: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        key = _key(record)
        if record.get("error") and retry_errors:
            continue
        if key not in kept or (kept[key].get("error") and not record.get("error")):
            kept[key] = record
    if torn or len(kept) != len(records):
        _write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept.values()))
    return set(kept), list(kept.values())


# -- summary ------------------------------------------------------------------------------------
def summarise(records: Sequence[dict[str, Any]], *, algo: str, pruner: str) -> dict[str, Any]:
    """Accuracy and work over all records (an errored record counts as wrong and contributes the
    work it did before failing)."""
    n = len(records)

    def mean(key: str) -> float:
        return sum(float(r.get(key) or 0) for r in records) / n if n else 0.0

    expanded = sum(int(r.get("expanded") or 0) for r in records)
    pruned = sum(int(r.get("pruned") or 0) for r in records)
    per_seed: dict[str, dict[str, float]] = {}
    for seed in sorted({int(r["seed"]) for r in records}):
        rs = [r for r in records if int(r["seed"]) == seed]
        per_seed[str(seed)] = {
            "problems": len(rs),
            "accuracy": sum(bool(r.get("correct")) for r in rs) / len(rs),
            "mean_generated_tokens": sum(float(r.get("generated_tokens") or 0) for r in rs) / len(rs),
        }
    return {
        "algo": algo,
        "pruner": pruner,
        "problems": n,
        "correct": sum(bool(r.get("correct")) for r in records),
        "accuracy": sum(bool(r.get("correct")) for r in records) / n if n else 0.0,
        "errors": sum(1 for r in records if r.get("error")),
        "mean_generated_tokens": mean("generated_tokens"),
        "mean_prm_calls": mean("prm_calls"),
        "mean_judge_calls": mean("judge_calls"),
        "mean_expanded": mean("expanded"),
        "pruned_per_expansion": pruned / expanded if expanded else 0.0,
        "seconds": sum(float(r.get("seconds") or 0) for r in records),
        "per_seed": per_seed,
    }


# -- one problem ----------------------------------------------------------------------------------
async def solve_problem(
    problem: Any,
    seed: int,
    *,
    algo: str,
    engines: Any,
    search: SearchConfig,
    pruner_config: PrunerConfig,
    grader: Grader,
    pruner: str,
) -> tuple[dict[str, Any], SearchContext]:
    """Search one problem and build its record; a failure becomes the record's ``error``."""
    start = time.perf_counter()
    ctx = SearchContext(str(problem.question), engines, search, SeedStream(seed, str(problem.id)), pruner_config)
    prediction: str | None = None
    correct = False
    error: str | None = None
    path: list[str] = []
    try:
        final = await SEARCHES[algo](ctx)
        ctx.tree.mark_path(final)
        path = list(ctx.tree.steps(final))
        if path:
            prediction = grader.extract("\n".join(path), problem.kind)
        if prediction is not None:
            correct = bool(grader.grade(prediction, str(problem.answer), problem.kind))
    except Exception as err:  # noqa: BLE001 - one problem's failure must not stop the run
        error = one_line(err)
        correct = False
    stats = ctx.stats
    record = {
        "id": str(problem.id),
        "seed": int(seed),
        "algo": algo,
        "pruner": pruner,
        "question": str(problem.question),
        "answer": str(problem.answer),
        "prediction": prediction,
        "correct": correct,
        "generated_tokens": stats.generated_tokens,
        "prm_calls": stats.prm_calls,
        "judge_calls": stats.judge_calls,
        "judge_pairs": stats.judge_pairs,
        "expanded": stats.expanded,
        "pruned": stats.pruned,
        "duplicates": stats.duplicates,
        "candidates": stats.candidates,
        "truncated": stats.truncated,
        "truncated_tokens": stats.truncated_tokens,
        "dead_ends": stats.dead_ends,
        "policy_requests": stats.policy_requests,
        "nodes": len(ctx.tree),
        "seconds": round(time.perf_counter() - start, 4),
        "path": path,
        "error": error,
    }
    return record, ctx


def tree_document(record: dict[str, Any], ctx: SearchContext) -> dict[str, Any]:
    return {
        "id": record["id"],
        "seed": record["seed"],
        "question": record["question"],
        "answer": record["answer"],
        "prediction": record["prediction"],
        "correct": record["correct"],
        "algo": record["algo"],
        "nodes": ctx.tree.to_json(),
    }


# -- the run ------------------------------------------------------------------------------------
class _Progress:
    """tqdm bar with running accuracy and tokens, and optional W&B logging."""

    def __init__(self, total: int, done: Sequence[dict[str, Any]], run: RunConfig, out_dir: Path, config: dict | None):
        self.correct = sum(bool(r.get("correct")) for r in done)
        self.tokens = sum(int(r.get("generated_tokens") or 0) for r in done)
        self.count = len(done)
        self.bar = None
        if run.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=len(done), desc="search", unit="problem", file=sys.stderr)
        self.wandb = None
        if run.wandb_project:
            import wandb

            self.wandb = wandb.init(
                project=run.wandb_project,
                name=run.wandb_run_name or out_dir.name,
                dir=str(out_dir),
                config=config or {},
                resume="allow",
            )

    def update(self, record: dict[str, Any]) -> None:
        self.count += 1
        self.correct += bool(record["correct"])
        self.tokens += int(record["generated_tokens"])
        acc, tok = self.correct / self.count, self.tokens / self.count
        if self.bar is not None:
            self.bar.set_postfix(acc=f"{acc:.3f}", tokens=f"{tok:.0f}", refresh=False)
            self.bar.update(1)
        if self.wandb is not None:
            self.wandb.log(
                {
                    "eval/accuracy": acc,
                    "eval/mean_generated_tokens": tok,
                    "eval/problems": self.count,
                    "problem/generated_tokens": record["generated_tokens"],
                    "problem/pruned": record["pruned"],
                    "problem/correct": int(bool(record["correct"])),
                }
            )

    def close(self, summary: dict[str, Any] | None) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.wandb is not None:
            if summary:
                self.wandb.summary.update({f"summary/{k}": v for k, v in summary.items() if isinstance(v, (int, float))})
            self.wandb.finish()


def check_eval_inputs(
    algo: str,
    problems: Sequence[Any],
    out_dir: str | Path,
    search: SearchConfig | None,
    run: RunConfig | None,
) -> tuple[SearchConfig, RunConfig, Path]:
    """What every entry into an evaluation checks first (single-process and multi-worker):
    a known algorithm, valid settings, unique problem ids; returns the settings and the created
    output directory."""
    if algo not in SEARCHES:
        raise InputError(f"unknown algorithm {algo!r}; choose from {', '.join(SEARCHES)}", field="algo")
    search = search or SearchConfig()
    run = run or RunConfig()
    search.validate()
    run.validate()
    ids = [str(p.id) for p in problems]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputError(f"problem id {dup!r} occurs more than once; ids must be unique", field="id")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return search, run, out


def run_eval(
    *,
    algo: str,
    problems: Sequence[Any],
    engines: Engines,
    out_dir: str | Path,
    search: SearchConfig | None = None,
    run: RunConfig | None = None,
    pruner: str = "none",
    grader: Grader | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run (or resume) an evaluation into ``out_dir``; returns the summary."""
    search, run, out = check_eval_inputs(algo, problems, out_dir, search, run)
    grader = grader or Grader.default()
    done, done_records = prepare_resume(out, algo=algo, pruner=pruner, retry_errors=run.retry_errors)
    order = {(str(p.id), int(s)): i for i, (p, s) in enumerate((p, s) for p in problems for s in run.seeds)}
    jobs = [(p, s) for p in problems for s in run.seeds if (str(p.id), int(s)) not in done]
    finished_here = [r for r in done_records if _key(r) in order]
    progress = _Progress(len(order), finished_here, run, out, config)
    if run.save_trees:
        (out / TREES).mkdir(exist_ok=True)
    many_seeds = len(run.seeds) > 1
    dispatcher = Dispatcher(engines.policy, engines.reward, engines.judge)
    summary: dict[str, Any] | None = None
    started = time.perf_counter()
    with open(out / RESULTS, "a", encoding="utf-8") as sink:

        async def work(job: tuple[Any, int]) -> None:
            problem, seed = job
            handle = dispatcher.handle(order[(str(problem.id), int(seed))])
            record, ctx = await solve_problem(
                problem, seed, algo=algo, engines=handle, search=search, pruner_config=engines.pruner,
                grader=grader, pruner=pruner,
            )
            if run.save_trees:
                name = safe_name(record["id"]) + (f".seed{seed}" if many_seeds else "") + ".json"
                _write_atomic(out / TREES / name, json.dumps(tree_document(record, ctx), ensure_ascii=False))
                record["tree"] = f"{TREES}/{name}"
            if ctx.pair_log and not record["error"]:  # before the record: a resumed run never lacks them
                _append_pairs(out / PAIRS_FILE, record, ctx.pair_log)
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            progress.update(record)

        try:
            asyncio.run(run_workers(dispatcher, jobs, work, run.concurrency))
        finally:
            records, _ = read_results(out / RESULTS)
            summary = summarise(records, algo=algo, pruner=pruner)
            recorded = {_key(r) for r in records}
            summary["complete"] = all(k in recorded for k in order)
            summary["wall_seconds"] = round(time.perf_counter() - started, 3)  # this invocation only
            summary["engine_calls"] = dict(dispatcher.log.calls)
            summary["largest_batch"] = dict(dispatcher.log.largest)
            judge_stats = getattr(engines.judge, "stats", None)
            if judge_stats is not None and hasattr(judge_stats, "to_dict"):
                summary["judge_stats"] = judge_stats.to_dict()
            _write_atomic(out / SUMMARY, json.dumps(summary, indent=2) + "\n")
            progress.close(summary)
    return summary

