"""The claim guard's price on every shipped labelled file: each rule's vetoes on equivalent (3-4)
and on non-equivalent (0-1) pairs, pinned in ``tests/data/guard_corpus.json``; and the
restatement rule's merges there (:mod:`equiv.text.restate`, on pairs no guard rule vetoes, as
:func:`equiv.judge.decide.decide` applies it), each pair by id.

Changing a rule changes these counts, so the change shows its price in the snapshot's diff. To
regenerate the snapshot after a deliberate change (with ``../shared/data`` present, or
``EQUIV_SHARED_DATA`` set, so the GSM8K labelled files are counted too)::

    python -m tests.helpers.guard_corpus --update

``--sweep`` prints the price of each cut-off of :mod:`equiv.text.guard` against its neighbours (the
guard's vetoes on equivalent and on non-equivalent pairs of every file at each value): the basis
the module's docstring states for each.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import equiv.text.guard as guard_module
from equiv.text.guard import GUARD_RULES, guard_veto, rule_detail
from equiv.text.restate import restatement
from tests.helpers.paths import REPO_ROOT, SHARED_DATA

SNAPSHOT = REPO_ROOT / "tests" / "data" / "guard_corpus.json"
SHARED_PREFIX = "shared:"


def labelled_files() -> dict[str, Path]:
    """Every shipped labelled pair file (rows with ``sentence1``, ``sentence2`` and ``result``), by its
    snapshot key: a path in the repository, or ``shared:`` and a path under the shared data when present."""
    files = {str(p.relative_to(REPO_ROOT)): p for pattern in ("benchmarks/data/*.jsonl", "equiv/data/demo_data/*.jsonl")
             for p in sorted(REPO_ROOT.glob(pattern))}
    files.update({SHARED_PREFIX + str(p.relative_to(SHARED_DATA)): p
                  for p in sorted((SHARED_DATA / "gsm8k_equiv").glob("*.jsonl"))})
    return {key: path for key, path in files.items() if _is_labelled_pairs(path)}


def _is_labelled_pairs(path: Path) -> bool:
    with path.open(encoding="utf-8") as f:
        first = json.loads(f.readline())
    return {"sentence1", "sentence2", "result"} <= first.keys()


def file_price(path: Path) -> dict[str, object]:
    """One file's counts: pairs per side, each rule's vetoes alone per side, the guard's (first rule)
    vetoes per side, every equivalent pair the guard vetoes (id -> ``rule: detail``), and the pairs
    the guard lets through that the restatement rule merges, per side and by id (-> ``kind: side``)."""
    sides = {"equivalent": (3, 4), "not_equivalent": (0, 1)}
    pairs = {side: 0 for side in sides}
    alone = {rule.name: {side: 0 for side in sides} for rule in GUARD_RULES}
    guard = {side: 0 for side in sides}
    equivalent_vetoed: dict[str, str] = {}
    restated = {side: 0 for side in sides}
    restated_pairs: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        side = next((s for s, levels in sides.items() if row["result"] in levels), None)
        if side is None:  # level 2: "cannot judge", on neither side
            continue
        a, b, question = row["sentence1"], row["sentence2"], row.get("question") or ""
        pairs[side] += 1
        for rule in GUARD_RULES:
            if rule_detail(rule, a, b, question):
                alone[rule.name][side] += 1
        veto = guard_veto(a, b, question)
        if veto:
            guard[side] += 1
            if side == "equivalent":
                equivalent_vetoed[row["id"]] = f"{veto.rule}: {veto.detail}"
        elif (kind := restatement(a, b)) is not None:
            restated[side] += 1
            restated_pairs[row["id"]] = f"{kind}: {side}"
    return {"pairs": pairs, "guard": guard, "rule_alone": alone, "equivalent_vetoed": equivalent_vetoed,
            "restated": restated, "restated_pairs": restated_pairs}


def corpus_price(files: dict[str, Path]) -> dict[str, object]:
    return {key: file_price(path) for key, path in sorted(files.items())}


# Each cut-off and the neighbours it is priced against.
SWEEP = {"SHARED_SENTENCE": (0.6, 0.7, 0.8), "SWAP_WORDS": (1, 2, 3), "SAME_WORD": (0.4, 0.5, 0.6),
         "SAME_NAME": (0.7, 0.8, 0.9)}


def sweep(files: dict[str, Path]) -> list[tuple[str, object, int, int]]:
    """(cut-off, value, equivalent pairs vetoed, non-equivalent pairs vetoed) for each value of
    :data:`SWEEP`, the others at their shipped values."""
    rows = []
    for path in files.values():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["result"] in (0, 1, 3, 4):
                rows.append((row["sentence1"], row["sentence2"], row.get("question") or "", row["result"] >= 3))
    out = []
    for name, values in SWEEP.items():
        shipped = getattr(guard_module, name)
        try:
            for value in values:
                setattr(guard_module, name, value)
                guard_module._alignment.cache_clear()  # alignments depend on SHARED_SENTENCE
                vetoed = [equivalent for a, b, question, equivalent in rows if guard_veto(a, b, question)]
                out.append((name, value, sum(vetoed), len(vetoed) - sum(vetoed)))
        finally:
            setattr(guard_module, name, shipped)
            guard_module._alignment.cache_clear()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {SNAPSHOT}")
    parser.add_argument("--sweep", action="store_true", help="print each cut-off's price against its neighbours")
    args = parser.parse_args(argv)
    files = labelled_files()
    if args.sweep:
        print("cut-off value equivalent_vetoed not_equivalent_vetoed")
        for name, value, equivalent, not_equivalent in sweep(files):
            print(name, value, equivalent, not_equivalent)
        return 0
    if args.update and not any(key.startswith(SHARED_PREFIX) for key in files):
        print(f"error: shared data not found at {SHARED_DATA} (set EQUIV_SHARED_DATA); the snapshot must count "
              "the GSM8K labelled files too", file=sys.stderr)
        return 2
    price = corpus_price(files)
    text = json.dumps(price, indent=1, sort_keys=True) + "\n"
    if args.update:
        SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOT} ({len(price)} files)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
