"""``search_cli.py siblings``: saved search trees -> pair files to label, the MathEquiv way.

Extraction is :mod:`equiv.rundir.siblings` (sibling pairs of any algorithm's saved trees, SBS
included; held-out problems refused). This command then applies :mod:`equiv.data.pair_sampling`:
the Levenshtein window (default the paper's [0.75, 0.99]; ``--prefilter P`` instead keeps every
pair above ``P``, the judge's own prefilter), a seeded sample balanced over ratio bins and
problems with a cap per problem, and, with ``--split``, a split by problem written as
``train.jsonl`` / ``valid.jsonl`` / ``test.jsonl`` in the ``--out`` directory. The problems are
split before the window and the sample, as the paper did, so which split a problem lands in does
not depend on the window or the sample size.

    python search_cli.py siblings runs/unpruned --out pairs --split 8 1 1 --per_problem 20 --sample 1000
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

from equiv.cliargs import as_lists, check_counts, command_parser, parse_or_refuse
from equiv.data.pair_sampling import (DEFAULT_BINS, PAPER_WINDOW, SPLIT_NAMES, balanced_sample, check_window,
                                      in_window, pair_problem, sample_splits, split_by_problem)
from equiv.errors import InputError, check_fraction, exit_on_input_error
from equiv.rundir.io import write_jsonl_atomic
from equiv.rundir.outputs import check_output
from equiv.rundir.siblings import sibling_pairs


def build_parser() -> Any:
    """``siblings``' parser (jsonargparse, :func:`equiv.cliargs.command_parser`): the same flags as
    ever, and ``--config`` for a YAML file of them (``run_dirs: [...]``, ``window: [LOW, HIGH]``)."""
    p = command_parser(
        "search_cli.py siblings",
        "Write the sibling step pairs of saved search trees as MathEquiv-format pairs to label "
        "(no 'result' field: search_cli.py label adds it, or a reader against RUBRIC.md).",
    )
    p.add_argument("run_dirs", nargs="+", help="run directories written with --run.save_trees true")
    p.add_argument("--out", required=True,
                   help="JSONL file to write (replaced atomically); with --split, a directory for train/valid/test.jsonl")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--window", type=float, nargs=2, metavar=("LOW", "HIGH"), default=None,
                        help=f"keep pairs with Levenshtein ratio in [LOW, HIGH] (default the paper's "
                             f"{PAPER_WINDOW[0]} {PAPER_WINDOW[1]})")
    window.add_argument("--prefilter", type=float, default=None,
                        help="instead of --window: keep every pair with ratio above this (the judge's prefilter, e.g. 0.5); "
                             "wins over a window from a config file")
    p.add_argument("--split", type=int, nargs=3, metavar=("TRAIN", "VALID", "TEST"), default=None,
                   help="split by problem in these proportions (the paper's: 8 1 1) into --out/{train,valid,test}.jsonl")
    p.add_argument("--per_problem", type=int, default=None, help="at most this many pairs of any one problem")
    p.add_argument("--sample", type=int, default=None,
                   help="at most this many pairs in all (shared by the split proportions), balanced over ratio bins "
                        "and problems; default: every pair in the window")
    p.add_argument("--bins", type=int, default=DEFAULT_BINS, help="Levenshtein-ratio bins the sample is balanced over")
    p.add_argument("--seed", type=int, default=0, help="seeds the split and the sample")
    p.add_argument("--holdout", action="append", default=[],
                   help="JSONL of problems that must not appear (e.g. GSM8K test.jsonl); repeatable")
    return p


def _describe(pairs: Sequence[dict[str, Any]]) -> dict[str, int]:
    return {"pairs": len(pairs), "problems": len({pair_problem(p) for p in pairs})}


def _window(args: Any) -> tuple[float, float, float]:
    """``(extraction prefilter, low, high)``: the window as the user gave it, or (P, 1] for ``--prefilter P``."""
    if args.prefilter is not None:
        prefilter = check_fraction(args.prefilter, "prefilter", closed=False)
        return prefilter, prefilter, 1.0
    low, high = check_window(*(args.window or PAPER_WINDOW))
    return 0.0, low, high


def siblings_main(argv: list[str] | None = None) -> int:
    args = as_lists(parse_or_refuse(build_parser(), sys.argv[1:] if argv is None else argv), "run_dirs", "holdout")
    with exit_on_input_error():
        check_counts(args, window=2, split=3)
        prefilter, low, high = _window(args)
        out = Path(args.out)
        if args.split is None and out.is_dir():
            raise InputError("is a directory; give a file name (or --split to write train/valid/test.jsonl there)",
                             path=out, field="out")
        if args.split is not None and out.exists() and not out.is_dir():
            raise InputError("names a file; with --split it is the directory for train/valid/test.jsonl",
                             path=out, field="out")
        check_output(out, option="--out", inputs=[*args.run_dirs, *args.holdout], directory=args.split is not None,
                     files=[f"{name}.jsonl" for name in SPLIT_NAMES])
        pairs, counts = sibling_pairs(args.run_dirs, prefilter=prefilter, holdout=args.holdout)
        kept = pairs if args.prefilter is not None else in_window(pairs, low, high)
        print(counts.summary().rsplit(";", 1)[0] + f"; {len(pairs) - len(kept)} outside the window "
              f"[{low}, {high}], {len(kept)} in it", file=sys.stderr)
        if args.split is None:
            chosen = balanced_sample(kept, args.sample, per_problem=args.per_problem, window=(low, high),
                                     bins=args.bins, seed=args.seed)
            out.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl_atomic(out, chosen)
            print(f"{len(chosen)} pairs written to {out}", file=sys.stderr)
            print(json.dumps({**_describe(chosen), "out": str(out)}))
            return 0
        # Problems first (every extracted pair's problem, window or not), then window and sample.
        by_split = split_by_problem(pairs, args.split, seed=args.seed)
        windowed = {name: in_window(rows, low, high) for name, rows in by_split.items()}
        chosen_by_split = sample_splits(windowed, args.sample, args.split, per_problem=args.per_problem,
                                        window=(low, high), bins=args.bins, seed=args.seed)
        out.mkdir(parents=True, exist_ok=True)
        summary: dict[str, Any] = {}
        for name in SPLIT_NAMES:
            rows = chosen_by_split[name]
            write_jsonl_atomic(out / f"{name}.jsonl", rows)
            summary[name] = _describe(rows)
            problems = len({pair_problem(p) for p in by_split[name]})
            note = "" if rows else " (EMPTY: too few problems or pairs for this split; add runs or change --split)"
            print(f"{name}: {problems} problems, {len(windowed[name])} pairs in the window, "
                  f"{len(rows)} written{note}", file=sys.stderr)
        print(json.dumps({**summary, "out": str(out)}))
    return 0
