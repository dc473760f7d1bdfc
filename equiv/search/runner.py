"""The evaluation runner: search every (problem, seed), record, resume, summarise.

A run directory (docs/ARCHITECTURE.md "Run directory") holds ``results.jsonl`` — one record per
(problem, seed), appended, flushed and fsynced the moment a problem finishes — and
``summary.json``, rewritten from ``results.jsonl`` at the end. Rerunning the same command
resumes: finished (id, seed) pairs are skipped, so a Ctrl-C or a crash loses at most the
problems in flight and duplicates nothing. Records holding an ``error`` are retried on rerun
(their old record is removed first) unless ``retry_errors`` is false. A torn last line (a crash
mid-write) is dropped; any other malformed line is an input error, never silently skipped.
The files and their rules belong to :mod:`equiv.rundir`; this module only searches and appends.

Problems run as concurrent workers over one :class:`~equiv.search.dispatch.Dispatcher`, so the
engine calls of up to ``concurrency`` problems are merged into one batch per engine.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from equiv.errors import InputError, ServiceError, one_line
from equiv.rundir import (
    PAIRS,
    RESULTS,
    TREES,
    ResultRecord,
    append_jsonl,
    pair_lines,
    prepare_resume,
    record_key,
    tree_document,
    tree_file_name,
    write_atomic,
)
from equiv.rundir.lock import hold_run_dir
from equiv.prune.boundary import SiblingJudge
from equiv.prune.strategies import PrunerConfig
from equiv.search.aggregate import HEADLINE, Solution, aggregate
from equiv.search.algorithms import ALGORITHMS
from equiv.search.config import RunConfig, ScaleConfig, SearchConfig
from equiv.search.dispatch import Dispatcher, run_workers
from equiv.search.expansion import EngineHandle, SearchContext, SeedStream
from equiv.search.grading import extract_answer, grade
from equiv.search.progress import Progress, finish_run
from equiv.search.tree import Node
from equiv.rundir.records import WorkCounters
from equiv.search.types import Policy, RewardModel


@dataclass
class Engines:
    """The synchronous engines a run drives (built by the CLI, or scripted in tests).

    Pruning is on iff ``judge`` is set; ``pruner`` (the ``--pruner.*`` settings) says how its
    verdicts are grouped into classes. The run's :class:`~equiv.search.dispatch.Dispatcher`
    batches their calls; each problem's search awaits them through an
    :class:`~equiv.search.expansion.EngineHandle` (the protocol searches see), which the
    dispatcher implements as :class:`~equiv.search.dispatch.DispatcherHandle`. One "Engines"
    type: the engines; the handle is how one problem reaches them.
    """

    policy: Policy
    reward: RewardModel
    judge: SiblingJudge | None = None
    pruner: PrunerConfig = field(default_factory=PrunerConfig)


@dataclass
class Grader:
    """Answer extraction and grading (defaults: :mod:`equiv.search.grading`)."""

    extract: Callable[[str, str], str | None]
    grade: Callable[[str | None, str, str], bool]

    @classmethod
    def default(cls) -> "Grader":
        return cls(extract=extract_answer, grade=grade)

    def verdicts_for(self, problem: Any) -> Callable[[str], bool]:
        """One problem's grading, each distinct prediction graded once.

        The aggregations and the final pick usually name the same few answers, and a code answer
        is a sandboxed run that can take its whole timeout: six methods grading one hanging
        program cost six timeouts before this."""
        verdicts: dict[str, bool] = {}

        def verdict(prediction: str) -> bool:
            if prediction not in verdicts:
                verdicts[prediction] = bool(self.grade(prediction, str(problem.answer), problem.kind))
            return verdicts[prediction]

        return verdict


# -- one problem ----------------------------------------------------------------------------------
async def solve_problem(
    problem: Any,
    seed: int,
    *,
    algo: str,
    engines: EngineHandle,
    search: SearchConfig,
    pruner: PrunerConfig,
    pruner_name: str,
    grader: Grader,
    on_work: Callable[[WorkCounters], None] | None = None,
) -> tuple[dict[str, Any], SearchContext]:
    """Search one problem and build its record; a failure becomes the record's ``error``.

    ``pruner`` is how the judge's verdicts are grouped (the ``--pruner.*`` settings);
    ``pruner_name`` is what the record says pruned it (``run_eval``'s ``pruner``); ``on_work``
    is told the work counters as the search goes (the progress bar)."""
    start = time.perf_counter()
    ctx = SearchContext(str(problem.question), engines, search, SeedStream(seed, str(problem.id)), pruner,
                        on_work=on_work)
    prediction: str | None = None
    correct = False
    error: str | None = None
    path: list[str] = []
    aggregations: dict[str, dict] | None = None
    verdict = grader.verdicts_for(problem)
    try:
        entry = ALGORITHMS.get(algo)
        final = await entry.search(ctx)
        if entry.collects_solutions and ctx.solutions:
            aggregations, chosen = aggregate_solutions(ctx, problem, grader, verdict)
            final = chosen or final
        ctx.tree.mark_path(final)
        path = list(ctx.tree.steps(final))
        if path:
            prediction = grader.extract("\n".join(path), problem.kind)
        if prediction is not None:
            correct = verdict(prediction)
    except ServiceError:
        raise  # the judge service is gone: no problem's record can be right, stop the run
    except Exception as err:  # noqa: BLE001 - one problem's failure must not stop the run
        error = one_line(f"{type(err).__name__}: {err}", 500)
        correct = False
    record: ResultRecord = {
        "id": str(problem.id),
        "seed": int(seed),
        "algo": algo,
        "pruner": pruner_name,
        "question": str(problem.question),
        "answer": str(problem.answer),
        "prediction": prediction,
        "correct": correct,
        **ctx.stats.to_dict(),  # type: ignore[typeddict-item]  # the WorkCounters fields
        "nodes": len(ctx.tree),
        "seconds": round(time.perf_counter() - start, 4),
        "path": path,
        "error": error,
    }
    if aggregations is not None and error is None:
        record["aggregations"] = {m: {"prediction": a["prediction"], "correct": a["correct"]}
                                  for m, a in aggregations.items()}
    return record, ctx


def aggregate_solutions(
    ctx: SearchContext, problem: Any, grader: Grader, verdict: Callable[[str], bool] | None = None
) -> tuple[dict[str, dict], Node | None]:
    """The reference evaluator's answer choices over ``ctx.solutions``, and the solution the
    headline (:data:`equiv.search.aggregate.HEADLINE`) answers with (None: no solution has an
    answer, so the search's own pick stands; it has none either and is graded wrong).

    Step scores are each path step's own PRM value (``own_value``: what the PRM gave that text,
    whatever ``merge_value`` put in ``value``). ``verdict`` grades one prediction (default: the
    grader's, each distinct prediction once)."""
    solutions = []
    for node in ctx.solutions:
        steps = ctx.tree.ancestry(node)
        answer = grader.extract("\n".join(n.text for n in steps), problem.kind) if steps else None
        scores = tuple(float(n.own_value if n.own_value is not None else (n.value or 0.0)) for n in steps)
        solutions.append(Solution(answer, scores))
    results = aggregate(solutions, verdict or grader.verdicts_for(problem))
    index = results[HEADLINE]["solution"]
    return results, None if index is None else ctx.solutions[index]


def check_settings(algo: str, search: SearchConfig, run: RunConfig, scale: ScaleConfig | None = None) -> None:
    """The one place an evaluation's settings are validated: the CLI calls it before it writes
    anything to the run directory, and :func:`check_eval_inputs` (every library entry) again for
    callers that come without the CLI. Each config checks itself (its ``validate()``)."""
    ALGORITHMS.get(algo)  # an unknown name is an InputError listing the choices
    search.validate()
    run.validate()
    if scale is not None:
        scale.validate()


def check_eval_inputs(
    algo: str,
    problems: Sequence[Any],
    out_dir: str | Path,
    search: SearchConfig | None,
    run: RunConfig | None,
    scale: ScaleConfig | None = None,
) -> tuple[SearchConfig, RunConfig, Path]:
    """What every entry into an evaluation checks first (single-process and multi-worker):
    a known algorithm, valid settings, unique problem ids; returns the settings and the created
    output directory."""
    search = search or SearchConfig()
    run = run or RunConfig()
    check_settings(algo, search, run, scale)
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
    """Run (or resume) an evaluation into ``out_dir``; returns the summary.

    ``pruner`` is the name records and the summary carry (the strategy, or a scripted judge's
    name); how the verdicts are grouped is ``engines.pruner``, a :class:`PrunerConfig`."""
    search, run, out = check_eval_inputs(algo, problems, out_dir, search, run)
    with hold_run_dir(out):  # one writer (re-entrant: eval_main already holds it)
        return _run_eval_held(algo, problems, engines, out, search, run, pruner, grader, config)


def _run_eval_held(
    algo: str,
    problems: Sequence[Any],
    engines: Engines,
    out: Path,
    search: SearchConfig,
    run: RunConfig,
    pruner: str,
    grader: Grader | None,
    config: dict[str, Any] | None,
) -> dict[str, Any]:
    """:func:`run_eval` with the run directory's lock held."""
    grader = grader or Grader.default()
    done, done_records = prepare_resume(out, algo=algo, pruner=pruner, retry_errors=run.retry_errors)
    order = {(str(p.id), int(s)): i for i, (p, s) in enumerate((p, s) for p in problems for s in run.seeds)}
    jobs = [(p, s) for p in problems for s in run.seeds if (str(p.id), int(s)) not in done]
    finished_here = [r for r in done_records if record_key(r) in order]
    progress = Progress(len(order), finished_here, run, out, config)
    if run.save_trees:
        (out / TREES).mkdir(exist_ok=True)
    many_seeds = len(run.seeds) > 1
    dispatcher = Dispatcher(engines.policy, engines.reward, engines.judge)
    summary: dict[str, Any] | None = None
    started = time.perf_counter()
    with open(out / RESULTS, "a", encoding="utf-8") as sink:

        async def work(job: tuple[Any, int]) -> None:
            problem, seed = job
            key = (str(problem.id), int(seed))
            handle = dispatcher.handle(order[key])

            def working(stats: WorkCounters) -> None:
                progress.working(key, stats.expanded, stats.generated_tokens)

            record, ctx = await solve_problem(
                problem, seed, algo=algo, engines=handle, search=search, pruner=engines.pruner,
                pruner_name=pruner, grader=grader, on_work=working,
            )
            if run.save_trees:
                name = tree_file_name(record["id"], seed, many_seeds=many_seeds)
                write_atomic(out / TREES / name, json.dumps(tree_document(record, ctx.tree.to_json()), ensure_ascii=False))
                record["tree"] = f"{TREES}/{name}"
            if ctx.pair_log and not record["error"]:
                # Before the record, so a finished problem never lacks its pairs; pairs whose
                # record a crash lost are dropped by the next prepare_resume.
                with open(out / PAIRS, "a", encoding="utf-8") as pairs:
                    append_jsonl(pairs, pair_lines(record, ctx.pair_log))
            append_jsonl(sink, [record])
            progress.update(record, key)

        try:
            asyncio.run(run_workers(dispatcher, jobs, work, run.concurrency))
        finally:
            extra: dict[str, Any] = {
                "wall_seconds": round(time.perf_counter() - started, 3),  # this invocation only
                "engine_calls": dict(dispatcher.log.calls),
                "largest_batch": dict(dispatcher.log.largest),
            }
            cache = getattr(engines.policy, "cache", None)  # policy.cache (through wrappers)
            if cache is not None and hasattr(cache, "stats"):
                extra["policy_cache"] = cache.stats()
            judge_stats = getattr(engines.judge, "stats", None)
            if judge_stats is not None and hasattr(judge_stats, "to_dict"):
                extra["judge_stats"] = judge_stats.to_dict()
            summary = finish_run(out, order=list(order), algo=algo, pruner=pruner, extra=extra, progress=progress)
    return summary
