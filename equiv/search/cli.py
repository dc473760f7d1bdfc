"""``search_cli.py eval`` and ``search_cli.py compare``.

``eval`` is a jsonargparse parser over dataclass groups (``--search.*``, ``--data.*``,
``--run.*``, ``--policy.*``, ``--reward.*``, ``--pruner.*``); ``--config`` files compose
(later ones and later flags override earlier ones) and ``--print_config`` shows the resolved
configuration. The resolved configuration is saved as ``config.yaml`` in ``--out``. ``tiny:``
models are built once here; then the run goes through one process (:mod:`equiv.search.runner`)
or Ray workers (``--scale.*``, :mod:`equiv.search.distributed`), with the same Ctrl-C handling.

``compare`` prints the paper-style table of several run directories on the problems they all
share: accuracy, mean generated tokens, and the token ratio against the first run
(:func:`equiv.rundir.compare_rows`, the same rows the report shows).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from equiv.backbones import check_local_model
from equiv.data.problems import DATASETS, load_problems, resolve_data_path
from equiv.helptext import plain_formatter, show_choices
from equiv.errors import (
    EXIT_BAD_INPUT, InputError, check_config_files, exit_on_input_error, one_line, output_file_kind, writable_directory,
)
from equiv.cliargs import as_lists, command_parser, did_you_mean, parse_or_refuse, typed_prog
from equiv.prune import build_judge
from equiv.prune.options import add_pruner_group
from equiv.rundir import (CONFIG, DATA, DIGEST, MODELS, PAIRS, RESULTS, SUMMARY, bind, check_digest, count_records,
                          data_binding, load_records, model_bindings, read_bound_config, read_bound_data,
                          read_bound_models)
from equiv.rundir import compare_rows as rundir_compare_rows
from equiv.rundir.lock import hold_run_dir
from equiv.search import distributed
from equiv.search.algorithms import ALGORITHMS
from equiv.search.config import PRUNE_STAGES, DataConfig, RunConfig, ScaleConfig, SearchConfig
from equiv.search.placement import placed_engines
from equiv.search.policies import BACKENDS, build_policy, PolicyConfig
from equiv.search.rewards import bind_policy_reward, REWARDS, RewardConfig
from equiv.search.runner import Engines, check_settings, run_eval
from equiv.search.tiny import resolve_tiny

EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT
RUN_FILES = (RESULTS, SUMMARY, CONFIG, DATA, MODELS, DIGEST, PAIRS)  # what eval writes in its run directory


def build_eval_parser() -> Any:
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog=typed_prog("search_cli.py eval"),
        description="PRM-guided tree search on a math benchmark, with or without equivalence pruning.",
        exit_on_error=False,
        default_meta=False,
        formatter_class=plain_formatter(),
        allow_abbrev=False,  # --search.widt must not mean --search.width (did_you_mean names it instead)
    )
    parser.add_argument("--config", action=ActionConfigFile, help="YAML recipe(s); later ones override earlier")
    parser.add_argument("--algo", type=str, default=None, help=f"search algorithm: {', '.join(ALGORITHMS.names())}")
    parser.add_argument("--out", type=str, default=None, help="run directory (created; an existing one is resumed)")
    parser.add_class_arguments(SearchConfig, "search")
    parser.add_class_arguments(DataConfig, "data")
    parser.add_class_arguments(RunConfig, "run")
    parser.add_class_arguments(PolicyConfig, "policy")
    parser.add_class_arguments(RewardConfig, "reward")
    add_pruner_group(parser)  # the same --pruner.* group as pairs and serve (equiv.prune.options)
    parser.add_class_arguments(ScaleConfig, "scale")
    show_choices(parser, {"algo": ALGORITHMS.names(), "search.prune_stage": PRUNE_STAGES, "policy.backend": BACKENDS.names(),
                          "reward.kind": REWARDS.names(), "data.dataset": DATASETS})
    return parser


def resolve_tiny_models(init: Any) -> None:
    """Build ``tiny:`` policy / PRM models once, in this process, before any engine is built
    (Ray workers would otherwise race to build them)."""
    init.policy.model = resolve_tiny(init.policy.model, "policy")
    init.reward.model = resolve_tiny(init.reward.model, "prm")


def build_engines(init: Any) -> Engines:
    """Load the policy, PRM and judge the configuration names (minutes for 7B models).

    ``tiny:`` model names must already be resolved (:func:`resolve_tiny_models`)."""
    check_fewshot_source(init)
    judge = build_judge(init.pruner)
    policy = build_policy(init.policy)
    policy, reward = bind_policy_reward(policy, init.reward)  # likelihood: the policy scores itself
    return Engines(policy=policy, reward=reward, judge=judge, pruner=init.pruner)


def check_fewshot_source(init: Any) -> None:
    """Refuse few-shot exemplars taken from the file being evaluated (they would leak answers)."""
    shots = getattr(init.policy, "fewshot_path", None)
    if not shots or not init.data.path or init.policy.prompt_format != "fewshot":
        return
    if Path(shots).resolve() == resolve_data_path(init.data.path).resolve():
        raise InputError(
            f"{shots} is also the evaluated data.path; take exemplars from a training split",
            field="policy.fewshot_path",
        )


def load_data(data: DataConfig) -> list[Any]:
    problems = load_problems(
        data.dataset,
        path=data.path,
        split=data.split,
        question_field=data.question_field,
        answer_field=data.answer_field,
        start=data.start,
        end=data.end,
        kind=data.kind,
        hub_id=data.hub_id,
        sample=data.sample,
        sample_seed=data.sample_seed,
    )
    if not problems:
        raise InputError(f"no problems in range [{data.start}, {data.end})", field="data")
    return problems


# Settings that change what a record would be: resuming with another value would mix two
# experiments in one results.jsonl. Devices, batch sizes, concurrency and the problem range
# (start/end/sample: ids are indices in the full file, so a range never relabels a problem) may
# change between a run and its resumption. The data's file content is bound by data.json.
RESULT_DEFINING = {
    "algo": None,
    "data": ("dataset", "path", "split", "hub_id", "question_field", "answer_field", "kind"),
    "search": None,  # all of it
    "policy": ("model", "prompt_format", "temperature", "top_p", "max_new_tokens", "step_delimiter", "system_prompt",
               "fewshot_path", "fewshot_count", "fewshot_seed"),
    "reward": ("kind", "model", "options"),
    "pruner": ("strategy", "model", "threshold", "prefilter", "grouping", "representative", "guard",
               "floor", "restate", "judge_fingerprint"),
}


LEGACY_PRUNER_KEYS = {"claim_guard": "guard", "statement_threshold": "floor"}
"""Pruner settings renamed with the decision policy: a run directory written before keeps its meaning."""


def _defining(config: dict[str, Any]) -> dict[str, Any]:
    pruner = config.get("pruner")
    if isinstance(pruner, dict) and any(old in pruner for old in LEGACY_PRUNER_KEYS):
        pruner = dict(pruner)
        for old, new in LEGACY_PRUNER_KEYS.items():
            if old in pruner:
                value = pruner.pop(old)
                pruner.setdefault(new, value)
        config = {**config, "pruner": pruner}
    out: dict[str, Any] = {}
    for group, keys in RESULT_DEFINING.items():
        value = config.get(group)
        if keys is None or not isinstance(value, dict):
            out[group] = value
        else:
            out.update({f"{group}.{k}": value.get(k) for k in keys})
    flat: dict[str, Any] = {}
    for key, value in out.items():
        if isinstance(value, dict) and key == "search":
            flat.update({f"search.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def data_binding_of(data: DataConfig) -> dict[str, Any]:
    """The run directory's data binding (``data.json``) for ``--data.*``."""
    return data_binding(
        dataset=data.dataset, path=resolve_data_path(data.path), split=data.split, hub_id=data.hub_id,
        question_field=data.question_field, answer_field=data.answer_field, kind=data.kind,
    )


def _short(fingerprint: dict[str, Any] | None) -> str:
    return str(fingerprint["sha256"])[:12] if fingerprint else "none (not a local path)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# The model settings a run directory binds by content when they name a local path (models.json).
MODEL_SETTINGS = (("pruner", "model"), ("policy", "model"), ("reward", "model"))


def models_of(init: Any) -> dict[str, str | None]:
    """``{"pruner.model": value, ...}`` of the settings in :data:`MODEL_SETTINGS`."""
    return {f"{group}.{name}": getattr(getattr(init, group, None), name, None) for group, name in MODEL_SETTINGS}


def check_resume_config(out: Path, config_text: str, data: dict[str, Any] | None = None,
                        models: dict[str, Any] | None = None) -> None:
    """Refuse to resume a run directory with other result-defining settings, other data or other
    models, or whose binding files were edited by hand.

    ``data`` is this run's :func:`~equiv.rundir.binding.data_binding`; it is compared with the
    directory's ``data.json`` (resolved path and content hash, so the same relative path from
    another working directory is the same file, and an edited file is not). A directory from
    before ``data.json`` is compared on the ``data.*`` settings of its ``config.yaml``.
    ``models`` is this run's :func:`~equiv.rundir.binding.model_bindings`, compared with
    ``models.json`` by content fingerprint (a judge retrained into the same folder is another
    judge). Unreadable records or settings raise (equiv.rundir.binding)."""
    import yaml

    old = read_bound_config(out)
    if old is None:
        return
    new = yaml.safe_load(config_text) or {}
    before, after = _defining(old), _defining(new)
    old_data = read_bound_data(out)
    old_models = read_bound_models(out)
    check_digest(out, before, old_data, old_models)  # a hand edit is named as one, not as a change
    if old_models is not None and models is not None:
        for setting in sorted(set(old_models) | set(models)):
            was, now = old_models.get(setting), models.get(setting)
            if (was or {}).get("sha256") != (now or {}).get("sha256"):
                raise InputError(
                    f"holds results made with another {setting} (its content changed: fingerprint "
                    f"{_short(was)} -> {_short(now)}, over {(now or was or {}).get('path')}); a retrained or edited "
                    "model makes other records: use another --out, or restore the model",
                    path=out / MODELS,
                )
    if old_data is not None and data is not None:
        before = {k: v for k, v in before.items() if not k.startswith("data.")}
        after = {k: v for k, v in after.items() if not k.startswith("data.")}
        before.update({f"data.{k}": v for k, v in old_data.items()})
        after.update({f"data.{k}": v for k, v in data.items()})
    changed = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if changed:
        diffs = ", ".join(f"{k}: {_shown(before.get(k))} -> {_shown(after.get(k))}" for k in changed[:3])
        raise InputError(
            f"holds results made with other settings ({diffs}); rerun with the same settings to resume, "
            "or use another --out",
            path=out / CONFIG,
        )


def bind_remote_judge(cfg: Any, init: Any) -> None:
    """``--pruner.strategy remote``: record the service's judge fingerprint (its ``/info``) in the
    configuration the run directory is bound to, so resuming against another judge is refused; a
    fingerprint given on the command line must be the service's."""
    if init.pruner.strategy != "remote" or not init.pruner.url:
        return
    from equiv.prune.remote import service_info

    served = service_info(init.pruner.url)["judge_fingerprint"]
    if init.pruner.judge_fingerprint not in (None, served):
        raise InputError(f"the service at {init.pruner.url} serves judge {served}, not {init.pruner.judge_fingerprint}",
                         field="pruner.judge_fingerprint")
    cfg.pruner.judge_fingerprint = init.pruner.judge_fingerprint = served


def eval_main(argv: Sequence[str], *, engine_factory: Callable[[Any], Engines] | None = None) -> int:
    """Run (or resume) an evaluation. ``engine_factory`` is a seam for scripted-engine tests."""
    import yaml

    parser = build_eval_parser()
    with exit_on_input_error():
        check_config_files(list(argv))  # a YAML error names the file, not "<unicode string>"
    try:
        cfg = parser.parse_args(list(argv))
    except argparse.ArgumentError as err:
        print(f"error: {one_line(err)}{did_you_mean(str(err), parser)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    with exit_on_input_error():
        if cfg.algo is None:
            raise InputError(f"--algo is required: one of {', '.join(ALGORITHMS.names())}")
        ALGORITHMS.get(cfg.algo)  # an unknown name is one line listing the choices, before --out
        if not cfg.out:
            raise InputError("--out DIR is required (the run directory)")
        init = parser.instantiate_classes(cfg)
        check_settings(cfg.algo, init.search, init.run, init.scale)  # before anything is written
        init.pruner.validate()
        check_local_model(init.policy.model, field="policy.model")  # before the run directory is touched
        check_local_model(init.reward.model, field="reward.model")
        bind_remote_judge(cfg, init)  # before config_text: the binding holds the served judge's fingerprint
        problems = load_data(init.data)
        fresh = not Path(cfg.out).exists()
        out = writable_directory(cfg.out)
        for name in RUN_FILES:  # the one output rule for the files eval writes there (never through a link)
            output_file_kind(out / name, option="--out")
        # The lock first: a second writer is refused here, before this command could remove
        # anything, and a directory this command created is removed (when nothing ran) while the
        # lock is still held, so no other run can have taken it in between.
        with hold_run_dir(out):  # one writer per run directory, from the check to the last write
            try:
                config_text = parser.dump(cfg, skip_none=False)
                data = data_binding_of(init.data)
                models = model_bindings(models_of(init))
                check_resume_config(out, config_text, data, models)
                # only after the check: a refused rerun changes nothing
                bind(out, config_text, data, models, _defining(yaml.safe_load(config_text) or {}))
                check_fewshot_source(init)  # refused before any model is built
                resolve_tiny_models(init)
                factory = engine_factory or build_engines
                config = json.loads(json.dumps(cfg.as_dict(), default=str))
                summary = _evaluate(cfg.algo, init, problems, out, factory, config)
            except KeyboardInterrupt:
                if remove_if_nothing_ran(out, fresh):
                    print(f"interrupted before any problem finished; {out} removed", file=sys.stderr)
                    return EXIT_INTERRUPTED
                print(
                    f"interrupted: {count_records(out)} record(s) kept in {out / RESULTS}; "
                    "rerun the same command to resume",
                    file=sys.stderr,
                )
                return EXIT_INTERRUPTED
            except BaseException:
                remove_if_nothing_ran(out, fresh)
                raise
    print(
        f"{cfg.algo} pruner={init.pruner.strategy}: accuracy {100 * summary['accuracy']:.2f}% "
        f"({summary['correct']}/{summary['problems']}), mean generated tokens "
        f"{summary['mean_generated_tokens']:.1f}, errors {summary['errors']} -> {out}"
    )
    return 0


def remove_if_nothing_ran(out: Path, fresh: bool) -> bool:
    """Remove the run directory this command created when the run failed before any record was
    written (a judge that does not load, a model that is missing): left behind, its binding would
    be silently reused by the next run. A directory that existed before, or holds any record
    (Ray workers' shards included), is kept. True when it was removed."""
    if not fresh or not out.is_dir() or any(f.stat().st_size for f in out.rglob(RESULTS)):
        return False
    shutil.rmtree(out, ignore_errors=True)
    return True


def _evaluate(
    algo: str, init: Any, problems: Sequence[Any], out: Path, factory: Callable[[Any], Engines], config: dict[str, Any]
) -> dict[str, Any]:
    """One process, or Ray workers (``--scale.workers N`` / ``--scale.ray_address``), each
    with one engine set; both finish the run the same way (equiv.search.progress.finish_run)."""
    if not init.scale.distributed:
        return run_eval(
            algo=algo,
            problems=problems,
            engines=factory(init),
            out_dir=out,
            search=init.search,
            run=init.run,
            pruner=init.pruner.strategy,
            config=config,
        )

    resolve_paths_on_driver(init)
    return distributed.run_distributed(
        algo=algo,
        problems=problems,
        engine_factory=functools.partial(placed_engines, factory, init),
        out_dir=out.resolve(),
        scale=init.scale,
        search=init.search,
        run=init.run,
        pruner=init.pruner.strategy,
        tensor_parallel_size=int(getattr(init.policy, "tensor_parallel_size", 1) or 1),
        config=config,
    )


# Model and file settings a Ray worker opens itself (problems are loaded on the driver and shipped).
WORKER_PATHS = (("policy", "model"), ("policy", "fewshot_path"), ("reward", "model"), ("pruner", "model"))


def resolve_paths_on_driver(init: Any) -> None:
    """Make the relative local paths a worker opens absolute, as the driver sees them.

    A worker on another node starts in its own working directory, where ``runs/judge`` names
    nothing (or something else). Only values that exist here are rewritten: a hub id such as
    ``Qwen/Qwen2.5-Math-7B`` is left as it is. The absolute path must still be reachable from
    every node (a shared file system), as docs/scaling.md says.
    """
    for group, name in WORKER_PATHS:
        section = getattr(init, group, None)
        value = getattr(section, name, None) if section is not None else None
        if isinstance(value, str) and value and not Path(value).is_absolute() and Path(value).exists():
            setattr(section, name, str(Path(value).resolve()))


# -- compare ----------------------------------------------------------------------------------------
def compare_rows(dirs: Sequence[str | Path]) -> tuple[list[dict[str, Any]], int]:
    """The compare table of run directories (:func:`equiv.rundir.compare_rows`), named by path."""
    return rundir_compare_rows([(str(d), load_records(d)) for d in dirs])


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ["run", "algo", "pruner", "problems", "accuracy %", "tokens", "ratio %", "PRM calls", "judge calls", "errors"]
    body = [
        [
            r["run"],
            r["algo"],
            r["pruner"],
            str(r["problems"]),
            f"{r['accuracy']:.2f}",
            f"{r['mean_generated_tokens']:.1f}",
            "-" if r["token_ratio"] is None else f"{r['token_ratio']:.2f}",
            f"{r['mean_prm_calls']:.1f}",
            f"{r['mean_judge_calls']:.1f}",
            str(r["errors"]),
        ]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        if r.get("aggregations"):  # several finished solutions per problem: every answer rule
            rules = ", ".join(f"{name} {acc:.2f}" for name, acc in r["aggregations"].items())
            lines.append(f"{r['run']}: accuracy % by answer aggregation: {rules}")
    return "\n".join(lines)


def compare_main(argv: Sequence[str]) -> int:
    """``search_cli.py compare``: parsed like every search subcommand (:func:`equiv.cliargs.command_parser`:
    ``--config`` YAML files, a bad option one line and exit 2)."""
    parser = command_parser(
        "search_cli.py compare",
        "Paper-style table: accuracy, mean generated tokens and token ratio vs the FIRST run, "
        "on the problems all runs share.",
    )
    parser.add_argument("runs", nargs="+", help="run directories (the first is the baseline)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument(
        "--analysis", action="store_true",
        help="failure-mode analysis (paper Table 11): for each run after the first, Pearson r and p-values "
        "between per-problem pruning rate, token saving vs the first run (same problem and seed), tree depth "
        "and generated tokens, overall and in failure cases",
    )
    args = as_lists(parse_or_refuse(parser, argv), "runs")
    with exit_on_input_error():
        rows, shared = compare_rows(args.runs)
        analyses = _analyses(args.runs) if args.analysis else []
    if args.json:
        out: dict[str, Any] = {"shared_problems": shared, "rows": rows}
        if args.analysis:
            out["analysis"] = [{"run": str(run), **data} for run, data, _ in analyses]
        print(json.dumps(out, indent=2))
    else:
        print(f"{shared} problems shared by all runs; ratio = tokens / tokens of the first run")
        print(format_table(rows))
        for _, _, text in analyses:
            print()
            print(text)
    return 0


def _analyses(dirs: Sequence[str]) -> list[tuple[str, dict[str, Any], str]]:
    """``(run, json, text)`` of the failure-mode analysis of each run against the first."""
    # The statistics live with the report (equiv.report.analysis, pure functions, no engines);
    # imported here, at the CLI, so the search package itself never depends on the report.
    from equiv.report.analysis import analyse_runs, correlations_json, format_correlations

    if len(dirs) < 2:
        raise InputError("--analysis needs a baseline run and at least one pruned run")
    base = load_records(dirs[0])
    out = []
    for directory in dirs[1:]:
        pts, corr = analyse_runs(dirs[0], base, directory, load_records(directory))
        out.append((str(directory), correlations_json(pts, corr), format_correlations(str(directory), pts, corr)))
    return out
