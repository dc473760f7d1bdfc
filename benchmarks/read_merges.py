"""A blind reading of a search's merges: sample them, hand them to two readers, put the readings together.

Issue 64 item 4 asks that a random sample of the judge's merges in a search be read twice blind
against ``RUBRIC.md`` (``../shared/data/gsm8k_equiv/RUBRIC.md``), so that a token saving is shown to
come from merges that are right. Two steps:

``sample``: every merged pair of the given run directories (their ``judge_pairs.jsonl``, the pairs
the pruner merged, written by ``equiv.search.pairlog``), on the problems that finished (in
``results.jsonl``), drawn at random with a seed. It writes, in ``--out``:

- ``pairs_a.jsonl`` and ``pairs_b.jsonl``: one reader's file each (``id``, ``question``,
  ``sentence1``, ``sentence2``), in two different random orders with the steps of each pair in
  random and opposite order, and no probability, reason or arm: what a reader must not see;
- ``key.jsonl``: each id's run, problem, depth, the judge's probability and reason, the steps as the
  pair log holds them.

Each reader writes ``labels_a.jsonl`` / ``labels_b.jsonl`` beside them, one ``{"id", "result"}``
a pair on the MathEquiv scale (0-4).

``assemble``: checks that each reader read every pair once with a level 0-4 (else one line naming
the file, line and field, exit 2), writes ``--output`` (the key's rows with ``reader_a``,
``reader_b`` and ``result``, the lower of the two levels) and prints the count of merges both readers
put at 3 or 4 (right), at 0-2 on either side, and where they disagree.

    python benchmarks/read_merges.py sample --runs RUN_DIR ... --n 100 --out READING_DIR
    python benchmarks/read_merges.py assemble --reading READING_DIR --output merges_read.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import common  # noqa: F401  (offline env, this checkout on sys.path)

from equiv.data.problems import read_jsonl_objects  # noqa: E402
from equiv.errors import InputError, exit_on_input_error  # noqa: E402

READER_FIELDS = ("id", "question", "sentence1", "sentence2")
READERS = ("a", "b")
EQUIVALENT = 3  # levels 3-4 are equivalent on the MathEquiv scale (RUBRIC.md)


def _finished(run: Path) -> dict[str, str]:
    """The questions of a run's finished problems, by problem id (``results.jsonl``)."""
    questions: dict[str, str] = {}
    path = run / "results.jsonl"
    for line, row in read_jsonl_objects(path):
        for field in ("id", "question"):
            if not isinstance(row.get(field), str):
                raise InputError("missing or not a string", path=path, line=line, field=field)
        questions[row["id"]] = row["question"]
    return questions


def merged_pairs(runs: list[Path]) -> list[dict[str, Any]]:
    """Every merged pair of the runs' finished problems, in file order, each with its run and question.
    A problem still in progress is left out: its tree, and so its merges, may still change."""
    out: list[dict[str, Any]] = []
    for run in runs:
        questions = _finished(run)
        path = run / "judge_pairs.jsonl"
        for line, row in read_jsonl_objects(path):
            if row.get("merged") is not True:
                continue
            for field in ("id", "a", "b"):
                if not isinstance(row.get(field), str):
                    raise InputError("missing or not a string", path=path, line=line, field=field)
            if row["id"] in questions:
                out.append({"run": str(run), "line": line, "problem": row["id"], "question": questions[row["id"]],
                            "depth": row.get("depth"), "probability": row.get("probability"),
                            "reason": row.get("reason"), "a": row["a"], "b": row["b"]})
    return out


def sample(runs: list[Path], n: int, seed: int, out: Path) -> int:
    """Write the readers' files and the key for ``n`` merges drawn at random (all, when fewer)."""
    pairs = merged_pairs(runs)
    rng = random.Random(seed)
    chosen = rng.sample(pairs, min(n, len(pairs)))
    out.mkdir(parents=True, exist_ok=True)
    key = []
    for i, pair in enumerate(chosen):
        flip = rng.random() < 0.5
        key.append({"id": f"m{i:04d}", **pair, "first": "b" if flip else "a"})
    for reader, salt in zip(READERS, (1, 2)):
        order = key[:]
        random.Random(seed * 1000 + salt).shuffle(order)
        with (out / f"pairs_{reader}.jsonl").open("w") as f:
            for row in order:
                one, two = (row["b"], row["a"]) if row["first"] == "b" else (row["a"], row["b"])
                if reader == "b":  # the other reader sees each pair the other way round
                    one, two = two, one
                f.write(json.dumps({"id": row["id"], "question": row["question"],
                                    "sentence1": one, "sentence2": two}) + "\n")
    with (out / "key.jsonl").open("w") as f:
        for row in key:
            f.write(json.dumps(row) + "\n")
    return len(chosen)


def _readings(path: Path, ids: set[str]) -> dict[str, int]:
    """One reader's levels by id: every id of the key once, each a level 0-4."""
    levels: dict[str, int] = {}
    for line, row in read_jsonl_objects(path):
        pair_id, level = row.get("id"), row.get("result")
        if pair_id not in ids:
            raise InputError(f"{pair_id!r} is not a pair of this reading", path=path, line=line, field="id")
        if pair_id in levels:
            raise InputError(f"{pair_id!r} read twice", path=path, line=line, field="id")
        if isinstance(level, bool) or level not in (0, 1, 2, 3, 4):
            raise InputError(f"{level!r} is not a level 0-4", path=path, line=line, field="result")
        levels[pair_id] = level
    missing = sorted(ids - set(levels))
    if missing:
        raise InputError(f"{len(missing)} pairs not read (first: {missing[0]})", path=path, field="id")
    return levels


def assemble(reading: Path, output: Path) -> dict[str, int]:
    """Put the two readings beside the key; the counts of right, wrong and disagreeing merges."""
    key = [row for _, row in read_jsonl_objects(reading / "key.jsonl")]
    ids = {row["id"] for row in key}
    levels = {reader: _readings(reading / f"labels_{reader}.jsonl", ids) for reader in READERS}
    counts = {"merges": len(key), "right": 0, "wrong": 0, "disagree": 0}
    with output.open("w") as f:
        for row in key:
            a, b = levels["a"][row["id"]], levels["b"][row["id"]]
            f.write(json.dumps({**row, "reader_a": a, "reader_b": b, "result": min(a, b)}) + "\n")
            counts["right" if min(a, b) >= EQUIVALENT else "wrong"] += 1
            counts["disagree"] += (a >= EQUIVALENT) != (b >= EQUIVALENT)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="draw merges and write the two readers' files and the key")
    s.add_argument("--runs", type=Path, nargs="+", required=True, help="run directories (search_cli.py eval --out)")
    s.add_argument("--n", type=int, default=100, help="merges to draw (all, when the runs have fewer)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", type=Path, required=True, help="the reading's directory")
    a = sub.add_parser("assemble", help="check the two readings and write them beside the key")
    a.add_argument("--reading", type=Path, required=True, help="the directory `sample` wrote")
    a.add_argument("--output", type=Path, required=True, help="the read merges (JSONL)")
    args = parser.parse_args(argv)
    with exit_on_input_error():
        if args.command == "sample":
            if args.n < 1:
                raise InputError(f"{args.n} is not a positive count", field="--n")
            drawn = sample(args.runs, args.n, args.seed, args.out)
            print(f"{drawn} merges drawn into {args.out}: give pairs_a.jsonl and pairs_b.jsonl to two readers")
        else:
            c = assemble(args.reading, args.output)
            print(f"{c['right']} of {c['merges']} merges read right (both readers at level 3-4), {c['wrong']} not; "
                  f"the readers disagree on {c['disagree']}: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
