"""``search_cli.py eval``: parsing, the engines, and the run (one process or Ray workers).

``eval`` is a jsonargparse parser over dataclass groups (``--search.*``, ``--data.*``,
``--run.*``, ``--policy.*``, ``--reward.*``, ``--pruner.*``); ``--config`` files compose
(later ones and later flags override earlier ones) and ``--print_config`` shows the resolved
configuration. The resolved configuration is saved as ``config.yaml`` in ``--out``. ``tiny:``
models are built once here; then the run goes through one process (:mod:`equiv.search.runner`)
or Ray workers (``--scale.*``, :mod:`equiv.search.distributed`, which also makes the paths a
worker opens absolute), with the same Ctrl-C handling. What a resumed run directory must match is
:mod:`equiv.rundir.resume`'s; ``compare`` is :mod:`equiv.report.compare`.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from equiv.backbones import check_local_model
from equiv.data.problems import DATASETS, load_problems, resolve_data_path
from equiv.helptext import plain_formatter, show_choices
from equiv.errors import (
    EXIT_BAD_INPUT, InputError, check_config_files, exit_on_input_error, one_line, output_file_kind, writable_directory,
)
from equiv.cliargs import CONFIG_HELP, declare_data_file, did_you_mean, typed_prog
from equiv.prune import build_judge
from equiv.prune.options import add_pruner_group
from equiv.rundir import RESULTS, bind, count_records, data_binding, model_bindings
from equiv.rundir.lock import hold_run_dir
from equiv.rundir.resume import RUN_FILES, check_resume_config, defining, models_of, remove_if_nothing_ran
from equiv.search import distributed
from equiv.search.algorithms import ALGORITHMS
from equiv.search.config import PRUNE_STAGES, DataConfig, RunConfig, ScaleConfig, SearchConfig
from equiv.search.placement import placed_engines
from equiv.search.policies import BACKENDS, build_policy, check_backend_options, PolicyConfig
from equiv.search.rewards import bind_policy_reward, REWARDS, RewardConfig
from equiv.search.runner import Engines, check_settings, run_eval
from equiv.search.tiny import resolve_tiny

EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT


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
    parser.add_argument("--config", action=ActionConfigFile, help=CONFIG_HELP)
    parser.add_argument("--algo", type=str, default=None, help=f"search algorithm: {', '.join(ALGORITHMS.names())}")
    parser.add_argument("--out", type=str, default=None, help="run directory (created; an existing one is resumed)")
    parser.add_class_arguments(SearchConfig, "search")
    parser.add_class_arguments(DataConfig, "data")
    declare_data_file(parser)  # --data FILE: the same setting as --data.path, as in pairs
    parser.add_class_arguments(RunConfig, "run")
    parser.add_class_arguments(PolicyConfig, "policy")
    parser.add_class_arguments(RewardConfig, "reward")
    # the same --pruner.* group as pairs and serve (equiv.prune.options); spelled out: eval has three models
    add_pruner_group(parser, short_names=False)
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


def data_binding_of(data: DataConfig) -> dict[str, Any]:
    """The run directory's data binding (``data.json``) for ``--data.*``."""
    return data_binding(
        dataset=data.dataset, path=resolve_data_path(data.path), split=data.split, hub_id=data.hub_id,
        question_field=data.question_field, answer_field=data.answer_field, kind=data.kind,
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
        init = parser.instantiate(cfg)
        check_settings(cfg.algo, init.search, init.run, init.scale)  # before anything is written
        check_backend_options(init.policy)  # a setting the backend never reads, before the run directory
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
                # every setting, None ones included: the text a resume compares with the bound one
                config_text = parser.dump(cfg, skip_unset=False)
                data = data_binding_of(init.data)
                models = model_bindings(models_of(init))
                check_resume_config(out, config_text, data, models)
                # only after the check: a refused rerun changes nothing
                bind(out, config_text, data, models, defining(yaml.safe_load(config_text) or {}))
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

    distributed.resolve_paths_on_driver(init)
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


