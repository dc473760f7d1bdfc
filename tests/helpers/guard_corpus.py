"""The claim guard's price on every shipped labelled file: each rule's vetoes on equivalent (3-4)
and on non-equivalent (0-1) pairs, pinned in ``tests/data/guard_corpus.json``.

Changing a rule changes these counts, so the change shows its price in the snapshot's diff. To
regenerate the snapshot after a deliberate change (with ``../shared/data`` present, or
``EQUIV_SHARED_DATA`` set, so the GSM8K labelled files are counted too)::

    python -m tests.helpers.guard_corpus --update
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from equiv.text.guard import GUARD_RULES, guard_veto
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
    vetoes per side, and every equivalent pair the guard vetoes (id -> ``rule: detail``)."""
    sides = {"equivalent": (3, 4), "not_equivalent": (0, 1)}
    pairs = {side: 0 for side in sides}
    alone = {rule.name: {side: 0 for side in sides} for rule in GUARD_RULES}
    guard = {side: 0 for side in sides}
    equivalent_vetoed: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        side = next((s for s, levels in sides.items() if row["result"] in levels), None)
        if side is None:  # level 2: "cannot judge", on neither side
            continue
        a, b, question = row["sentence1"], row["sentence2"], row.get("question") or ""
        pairs[side] += 1
        for rule in GUARD_RULES:
            if rule.check(a, b, question):
                alone[rule.name][side] += 1
        veto = guard_veto(a, b, question)
        if veto:
            guard[side] += 1
            if side == "equivalent":
                equivalent_vetoed[row["id"]] = f"{veto.rule}: {veto.detail}"
    return {"pairs": pairs, "guard": guard, "rule_alone": alone, "equivalent_vetoed": equivalent_vetoed}


def corpus_price(files: dict[str, Path]) -> dict[str, object]:
    return {key: file_price(path) for key, path in sorted(files.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {SNAPSHOT}")
    args = parser.parse_args(argv)
    files = labelled_files()
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
