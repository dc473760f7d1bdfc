"""Pairs the judge is asked per expansion: every sibling pair (before issue 67) against greedy
grouping's pairs only (the judge's ``group``: each candidate against the representatives before it).

Greedy grouping reads only pairs with a representative, yet search used to send all n(n-1)/2
sibling pairs of an expansion to the judge. Now every caller hands the judge the families and
:func:`equiv.prune.boundary.group_families` asks, in rounds batched across families, only the
pairs greedy grouping reads. This script measures both on real sibling sets, in one process:

- the families are the sibling sets of the shipped sibling files (``benchmarks/data/*siblings*.jsonl``,
  read in place; a row's id ``...-s<seed>n<parent>c<i>c<j>`` names its expansion and its two
  candidates): the candidates of one expansion that share a pair above the files' 0.5
  Levenshtein prefilter;
- **before**: every pair of each family (what search asked);
- **after**: the pairs ``judge.group(families)`` asks, for each judge: ``labels`` (the readers'
  levels: 3-4 merge, the paper's mapping; a pair not in the file, under the prefilter, does not),
  the rule strategies ``formula`` and ``levenshtein`` (no model), and with ``--model DIR`` an
  exported judge (``model``).

For every judge the classes are checked to equal greedy grouping over every pair's verdict
(the change is verdict-neutral). Prints a table and ``ratio: <x>`` (pairs before / after, the
``labels`` judge, all files)::

    python benchmarks/bench_judge_calls.py [--model DIR] [--device cpu] [--quick]
"""

from __future__ import annotations

import common  # noqa: F401  (offline env, this checkout on sys.path)

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from common import ROOT

FILES = sorted((ROOT / "benchmarks" / "data").glob("*siblings*.jsonl"))
_ID = re.compile(r"^(?P<expansion>.+-s\d+n\d+)c(?P<i>\d+)c(?P<j>\d+)$")


def read_families(path: Path) -> tuple[list, dict]:
    """The file's sibling sets (:class:`~equiv.prune.boundary.Family`, candidates in index order)
    and each pair's readers' level, keyed by its two texts (either order)."""
    from equiv.prune import Family

    texts: dict[str, dict[int, str]] = defaultdict(dict)
    questions: dict[str, str] = {}
    levels: dict[frozenset, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        found = _ID.match(row["id"])
        if found is None:
            continue
        key = found["expansion"]
        texts[key][int(found["i"])] = row["sentence1"]
        texts[key][int(found["j"])] = row["sentence2"]
        questions[key] = row.get("question") or ""
        levels[frozenset((row["sentence1"], row["sentence2"]))] = int(row["result"])
    families = [Family.of([t for _, t in sorted(texts[k].items())], questions[k]) for k in sorted(texts)]
    return [f for f in families if len(f.texts) >= 2], levels


def labels_judge(levels: dict):
    """A judge whose verdict is the readers' level (3-4 merge), asked through the same ``group``."""
    from equiv.judge.decide import BELOW_THRESHOLD, THRESHOLD, Verdict
    from equiv.prune.boundary import GroupsSiblings
    from equiv.prune.stats import JudgeStats

    class Labels(GroupsSiblings):
        name = "labels"

        def __init__(self) -> None:
            self.stats = JudgeStats()

        def pair_verdicts(self, pairs: Sequence[tuple[str, str]], questions=None, *, score_ruled=False):
            out = []
            for a, b in pairs:
                merged = levels.get(frozenset((a, b)), 0) >= 3
                out.append(Verdict(1.0 if merged else 0.0, merged, THRESHOLD if merged else BELOW_THRESHOLD))
            self.stats.count(out, [True] * len(out))
            return out

    return Labels()


def count(judge, families: list) -> dict:
    """Pairs before (all) and after (``judge.group``), the judge calls ``group`` made, and whether
    the classes equal greedy grouping over every pair's verdict."""
    from equiv.prune import group_equivalent, sibling_pairs

    calls = []
    real = judge.pair_verdicts

    def counted(pairs, questions=None, *, score_ruled=False):
        calls.append(len(pairs))
        return real(pairs, questions, score_ruled=score_ruled)

    judge.pair_verdicts = counted
    found = judge.group(families)
    judge.pair_verdicts = real
    same = True
    for family, got in zip(families, found):
        every = sibling_pairs(len(family.texts))
        verdicts = real([(family.texts[i], family.texts[j]) for i, j in every], [family.question] * len(every))
        full = group_equivalent(len(family.texts), {p: v.merged for p, v in zip(every, verdicts)},
                                probs={p: v.probability for p, v in zip(every, verdicts)})
        same = same and full.classes == got.grouping.classes and full.representatives == got.grouping.representatives
    return {"before": sum(len(f.texts) * (len(f.texts) - 1) // 2 for f in families),
            "after": sum(g.asked for g in found), "calls": len(calls), "same": same,
            "merged": sum(len(f.texts) - len(g.grouping.representatives) for f, g in zip(families, found))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="an exported judge directory, asked as the `model` strategy too")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true", help="the smallest file only (the test's setting)")
    args = ap.parse_args(argv)
    from equiv.prune import PrunerConfig, build_judge

    files = FILES[:1] if args.quick else FILES
    judges = ["labels", "formula", "levenshtein"] + (["model"] if args.model else [])
    print(f"{'file':46} {'judge':11} {'families':>8} {'width':>5} {'before':>6} {'after':>6} {'ratio':>5} "
          f"{'calls':>5} {'merged':>6} {'same classes':>12}")
    totals = {name: [0, 0] for name in judges}
    all_same = True
    for path in files:
        families, levels = read_families(path)
        width = sum(len(f.texts) for f in families) / max(len(families), 1)
        for name in judges:
            judge = labels_judge(levels) if name == "labels" else build_judge(
                PrunerConfig(strategy=name, model=args.model, device=args.device) if name == "model"
                else PrunerConfig(strategy=name))
            row = count(judge, families)
            totals[name][0] += row["before"]
            totals[name][1] += row["after"]
            all_same = all_same and row["same"]
            print(f"{path.name:46} {name:11} {len(families):8d} {width:5.2f} {row['before']:6d} {row['after']:6d} "
                  f"{row['before'] / max(row['after'], 1):5.2f} {row['calls']:5d} {row['merged']:6d} "
                  f"{'yes' if row['same'] else 'NO':>12}")
    for name in judges:
        before, after = totals[name]
        print(f"{'all':46} {name:11} {'':8} {'':5} {before:6d} {after:6d} {before / max(after, 1):5.2f}")
    print(f"classes equal greedy grouping over every pair, every judge and file: {'yes' if all_same else 'NO'}")
    before, after = totals["labels"]
    print(f"ratio: {before / max(after, 1):.2f}")
    return 0 if all_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
