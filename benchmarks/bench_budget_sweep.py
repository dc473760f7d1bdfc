"""Where pruning pays: the token ratio against the search budget, resumable (issue 64, item 3).

Each point of the sweep is a search config under ``configs/search/`` that a user can run alone
(``search_cli.py eval --config ...``): MCTS at 2, 5, 10 and 20 simulations a step and DFS at the
paper's settings, all at width 10 with the bundled Qwen2.5-Coder-1.5B-Instruct in llama.cpp. For
every point the arms run on the same problems and seeds:

- ``unpruned``: every sample is a child (``--search.dedupe_exact false``);
- ``exact``: exact-text dedup only, the search setting ``search.dedupe_exact`` with
  ``--pruner.strategy none`` (the config as it is; there is no ``exact`` pruner strategy);
- ``model``: the shipped judge (``--judge``, default ``outputs/gsm8k_equiv/ensemble``);
- ``formula``: the free rule, at the largest MCTS budget only (``--formula_at``).

Every eval is the real CLI in a subprocess (``search_cli.py eval --config POINT --out
OUT/POINT/ARM`` plus the arm's flags), so one crash loses one run, and every run directory resumes.
The problems go in chunks of ``--chunk``: every point and arm finishes a chunk before the next one
starts, so a sweep stopped at any moment leaves paired arms, and the same command continues it
(it may run across sessions). The run directories live in the repository by default
(``benchmarks/data/budget_sweep/runs``): committed part way, a sweep resumes on another machine from
the problems that finished. All runs share one completions cache (``--cache``, ``policy.cache``;
the budget configs' ``runs/budget_sweep/cache`` by default, outside the repository): with common random numbers the arms' shared requests are identical, so each is
generated once, and a rerun of a finished arm asks the engine nothing. A progress bar counts
(chunk, point, arm) runs.

Written at the end (and with ``--report_only``, from the runs so far): ``--summary`` (default
``benchmarks/data/budget_sweep/summary.json``; the command, machine and date go to ``sweep.json``
beside it), a list of one object per point and arm over the problems
every arm of that point finished: ``algorithm, simulations, width, problems, arm, accuracy,
generated_tokens`` (mean per problem), ``ratio`` and ``ratio_sd`` (to unpruned, paired bootstrap
over problems), ``engine_tokens`` (mean per problem), and beside them the accuracy difference to
unpruned with its spread, the cache hit rate, engine hours, and the trace of where the tokens go:
expansions per committed step, the share of MCTS simulations that ended on a finished path
(``1 - (expanded - 1) / (simulations x committed steps)``: in this MCTS every simulation that does
not end on a finished path expands one new leaf, and the root is expanded before the first one),
and merges (judge) and exact duplicates per expansion. A table is printed, and ``--plot`` draws the
MCTS ratio against the budget with its spread.

    python benchmarks/bench_budget_sweep.py --problems 10               # the sweep (hours)
    python benchmarks/bench_budget_sweep.py --report_only               # the table from the runs so far
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_policy_search import add_seconds, check_range, paired_difference, paired_ratio
from common import ROOT  # noqa: E402  (offline env, this checkout on sys.path)

from equiv.errors import InputError, exit_on_input_error  # noqa: E402

POINTS = (
    "budget_mcts_s02_w10_qwen15b_gsm8k",
    "budget_mcts_s05_w10_qwen15b_gsm8k",
    "budget_mcts_s10_w10_qwen15b_gsm8k",
    "budget_mcts_s20_w10_qwen15b_gsm8k",
    "budget_dfs_w10_qwen15b_gsm8k",
)
ARMS = ("unpruned", "exact", "model", "formula")
SECONDS = "bench_seconds.json"
FIELDS = ("algorithm", "simulations", "width", "problems", "arm", "accuracy", "generated_tokens", "ratio", "ratio_sd",
          "engine_tokens")
"""The issue's fields of one summary row, in this order (more follow them)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default=",".join(POINTS),
                    help="search configs: names under configs/search/ (no .yaml) or paths")
    ap.add_argument("--arms", default="unpruned,exact,model,formula")
    ap.add_argument("--formula_at", default="largest",
                    help="points the formula arm runs at: 'largest' (the MCTS point with most simulations), "
                         "'all', or config names")
    ap.add_argument("--judge", default=str(ROOT / "outputs" / "gsm8k_equiv" / "ensemble"), help="the model arm's judge")
    ap.add_argument("--data", default=None, help="problems file (default: each config's data.path)")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--problems", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=2, help="problems every point and arm finishes before the next ones")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "data" / "budget_sweep" / "runs"),
                    help="the run directories, one per point and arm (default: in the repository, so a sweep "
                         "committed part way resumes on another machine)")
    ap.add_argument("--cache", default=str(ROOT / "runs" / "budget_sweep" / "cache"),
                    help="the completions cache (default: the one the budget configs name; gigabytes over the grid, "
                         "so out of the repository)")
    ap.add_argument("--summary", default=str(ROOT / "benchmarks" / "data" / "budget_sweep" / "summary.json"))
    ap.add_argument("--plot", default=None, help="also draw the MCTS ratio against the budget here (.png)")
    ap.add_argument("--report_only", action="store_true", help="write the summary from the runs so far; run nothing")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="FLAG=VALUE",
                    help="an eval flag for every run, e.g. --set policy.threads=2 (repeatable; tests use it "
                         "to put a tiny policy in place of the bundled one)")
    return ap.parse_args(argv)


# -- the plan ------------------------------------------------------------------------------------
def config_path(point: str) -> Path:
    path = Path(point)
    if path.suffix in (".yaml", ".yml"):
        return path
    return ROOT / "configs" / "search" / f"{point}.yaml"


def point_settings(path: Path) -> dict[str, Any]:
    """(algorithm, simulations, width) of a point, from its config."""
    import yaml

    if not path.is_file():
        raise InputError("no such search config", path=path, field="points")
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    search = config.get("search") or {}
    algo = str(config.get("algo", ""))
    return {"algorithm": algo, "simulations": int(search.get("num_simulations", 0)) if algo == "mcts" else None,
            "width": int(search.get("width", 0))}


def point_name(path: Path) -> str:
    return path.stem


def arm_flags(arm: str, judge: str) -> list[str]:
    """What an arm adds to its point's config (the config itself is the exact-dedup arm)."""
    if arm == "unpruned":
        return ["--pruner.strategy", "none", "--search.dedupe_exact", "false"]
    if arm == "exact":
        return ["--pruner.strategy", "none"]
    if arm == "model":
        return ["--pruner.strategy", "model", "--pruner.model", judge, "--pruner.device", "cpu"]
    return ["--pruner.strategy", arm]


def formula_points(args: argparse.Namespace, points: list[Path]) -> set[str]:
    settings = {point_name(p): point_settings(p) for p in points}
    if args.formula_at == "all":
        return set(settings)
    if args.formula_at == "largest":
        mcts = [n for n, s in settings.items() if s["algorithm"] == "mcts"]
        return {max(mcts, key=lambda n: settings[n]["simulations"])} if mcts else set()
    return {p.strip() for p in args.formula_at.split(",") if p.strip()}


def arms_of(point: str, arms: list[str], formula: set[str]) -> list[str]:
    return [a for a in arms if a != "formula" or point in formula]


def overrides(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for item in args.overrides:
        flag, sep, value = item.partition("=")
        if not sep or not flag:
            raise InputError(f"expected FLAG=VALUE, got {item!r}", field="set")
        out += [f"--{flag.lstrip('-')}", value]
    return out


# -- running -------------------------------------------------------------------------------------
def run_one(args: argparse.Namespace, config: Path, arm: str, end: int, run_dir: Path) -> None:
    """One eval of one point and arm over problems ``start..end`` (it resumes what it finished)."""
    cmd = [sys.executable, str(ROOT / "search_cli.py"), "eval", "--config", str(config), "--out", str(run_dir),
           "--data.start", str(args.start), "--data.end", str(end), "--run.progress", "false",
           "--run.save_trees", "true", "--policy.cache", str(args.cache),
           *(["--data.path", args.data] if args.data else []), *arm_flags(arm, args.judge), *overrides(args)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if run_dir.exists():
        add_seconds(run_dir, wall=time.perf_counter() - started)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"error: {point_name(config)}/{arm}: search_cli.py eval exited {proc.returncode}: {tail}\n"
                         f"  (rerun the same command to resume; the command was: {' '.join(cmd)})")


def measure(args: argparse.Namespace, points: list[Path], arms: list[str], formula: set[str]) -> None:
    from tqdm import tqdm

    ends = list(range(args.start + args.chunk, args.start + args.problems, args.chunk)) + [args.start + args.problems]
    units = [(end, p, arm) for end in ends for p in points for arm in arms_of(point_name(p), arms, formula)]
    for end, config, arm in tqdm(units, desc="chunk x point x arm", unit="run"):
        run_one(args, config, arm, end, Path(args.out) / point_name(config) / arm)


# -- figures -------------------------------------------------------------------------------------
def read_arm(run_dir: Path) -> dict[str, dict[str, Any]]:
    from equiv.rundir import read_records

    path = run_dir / "results.jsonl"
    records = read_records(path)[0] if path.exists() else []
    return {str(r["id"]): r for r in records if not r.get("error")}


def trace(records: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """Where the tokens go (see the module docstring)."""
    expanded = sum(int(r.get("expanded") or 0) for r in records)
    steps = sum(len(r.get("path") or []) for r in records)
    out: dict[str, Any] = {
        "expansions_per_step": expanded / steps if steps else None,
        "merges_per_expansion": sum(int(r.get("pruned") or 0) for r in records) / expanded if expanded else None,
        "duplicates_per_expansion": sum(int(r.get("duplicates") or 0) for r in records) / expanded if expanded else None,
        "finished_simulation_share": None,
    }
    if settings["algorithm"] == "mcts" and settings["simulations"] and steps:
        simulations = settings["simulations"] * steps
        leaves = sum(max(int(r.get("expanded") or 0) - 1, 0) for r in records)
        out["finished_simulation_share"] = min(max(1.0 - leaves / simulations, 0.0), 1.0)
    return out


def figures(args: argparse.Namespace, points: list[Path], arms: list[str], formula: set[str]) -> list[dict[str, Any]]:
    """One row per point and arm, over the problems every arm of the point finished."""
    rows: list[dict[str, Any]] = []
    out = Path(args.out)
    for config in points:
        name, settings = point_name(config), point_settings(config)
        here = arms_of(name, arms, formula)
        by_arm = {arm: read_arm(out / name / arm) for arm in here}
        common = sorted(set.intersection(*(set(v) for v in by_arm.values())), key=str) if by_arm else []
        base = [by_arm["unpruned"][p] for p in common] if "unpruned" in by_arm else []
        for arm in here:
            recs = [by_arm[arm][p] for p in common]
            tokens = [float(r.get("generated_tokens") or 0) for r in recs]
            correct = [float(bool(r.get("correct"))) for r in recs]
            ratio, ratio_sd = (paired_ratio([float(r.get("generated_tokens") or 0) for r in base], tokens)
                               if base and recs else (None, None))
            diff, diff_sd = (paired_difference([float(bool(r.get("correct"))) for r in base], correct)
                             if base and recs else (None, None))
            requests = sum(int(r.get("policy_requests") or 0) for r in recs)
            seconds_path = out / name / arm / SECONDS
            wall = float(json.loads(seconds_path.read_text())["wall"]) if seconds_path.exists() else 0.0
            row = {
                "algorithm": settings["algorithm"], "simulations": settings["simulations"], "width": settings["width"],
                "problems": len(recs), "arm": arm,
                "accuracy": sum(correct) / len(correct) if correct else None,
                "generated_tokens": sum(tokens) / len(tokens) if tokens else None,
                "ratio": _finite(ratio), "ratio_sd": _finite(ratio_sd),
                "engine_tokens": (sum(float(r.get("engine_tokens", r.get("generated_tokens")) or 0) for r in recs)
                                  / len(recs)) if recs else None,
                "accuracy_minus_unpruned": _finite(diff), "accuracy_sd": _finite(diff_sd),
                "cache_hit_rate": sum(int(r.get("cache_hits") or 0) for r in recs) / requests if requests else None,
                "engine_hours": wall / 3600.0,
                "point": name,
                "trace": trace(recs, settings),
            }
            rows.append(row)
    return rows


def argv_of(args: argparse.Namespace) -> list[str]:
    """The command line as given (what ``sweep.json`` records beside the summary)."""
    return list(getattr(args, "argv", None) or sys.argv[1:])


def machine() -> str:
    """CPU cores and model name, for the record of where the figures were measured."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPU cores{', ' + model if model else ''}"


def _finite(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (f"{'point':<36} {'arm':<8} {'n':>3} {'acc %':>6} {'tokens':>8} {'ratio (sd)':>15} {'hit %':>6} "
              f"{'eng h':>6} {'exp/step':>8} {'fin sim':>7} {'merge/exp':>9}")
    print(header)
    print("-" * len(header))
    for r in rows:
        t = r["trace"]
        acc = None if r["accuracy"] is None else 100 * r["accuracy"]
        hit = None if r["cache_hit_rate"] is None else 100 * r["cache_hit_rate"]
        print(f"{r['point']:<36} {r['arm']:<8} {r['problems']:>3} {_fmt(acc, '6.1f')} {_fmt(r['generated_tokens'], '8.1f')}"
              f" {_fmt(r['ratio'], '7.3f')} ({_fmt(r['ratio_sd'], '.3f')}) {_fmt(hit, '6.1f')} {r['engine_hours']:>6.2f}"
              f" {_fmt(t['expansions_per_step'], '8.2f')} {_fmt(t['finished_simulation_share'], '7.2f')}"
              f" {_fmt(t['merges_per_expansion'], '9.2f')}")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """The MCTS token ratio (to unpruned) against simulations a step, one line per arm, bars the
    paired bootstrap spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in sorted({r["arm"] for r in rows if r["arm"] != "unpruned"}):
        pts = sorted((r["simulations"], r["ratio"], r["ratio_sd"] or 0.0) for r in rows
                     if r["algorithm"] == "mcts" and r["arm"] == arm and r["ratio"] is not None)
        if pts:
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                        label=arm)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("MCTS simulations a step (width 10)")
    ax.set_ylabel("generated tokens / unpruned")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- main ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    with exit_on_input_error():
        return run(args)


def run(args: argparse.Namespace) -> int:
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if set(arms) - set(ARMS) or "unpruned" not in arms:
        raise InputError(f"choose from {', '.join(ARMS)}, including unpruned; got {args.arms}", field="arms")
    if args.chunk < 1:
        raise InputError(f"must be >= 1, got {args.chunk}", field="chunk")
    check_range(args.start, args.problems)
    points = [config_path(p.strip()) for p in args.points.split(",") if p.strip()]
    for p in points:
        point_settings(p)  # a missing config: one line, before anything runs
    overrides(args)
    formula = formula_points(args, points)
    if "model" in arms and not Path(args.judge).exists():
        raise InputError("no trained judge here; build the recommended one first (docs/training.md, "
                         "'The recommended judge') or pass --judge DIR", path=args.judge)
    if not args.report_only:
        measure(args, points, arms, formula)
    rows = figures(args, points, arms, formula)
    print_table(rows)
    summary = Path(args.summary)
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    meta = {"command": " ".join(["python", "benchmarks/bench_budget_sweep.py", *(argv_of(args))]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "start": args.start, "problems": args.problems, "out": args.out}
    (summary.parent / "sweep.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        plot(rows, Path(args.plot))
    print(f"\nsummary: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
