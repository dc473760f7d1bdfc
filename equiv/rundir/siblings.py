"""Sibling step pairs from saved search trees: the search distribution, as pairs to label.

The equivalence judge decides which *siblings* of a search live: steps sampled from one prefix,
which share a template and differ in a number, an operand or a claim. Pairs of steps from
different finished solutions (``gsm8k_equiv``) are a different distribution, and a judge that is
good there merged wrong siblings in real search
(docs/experiments/2026-11-24-the-yardsticks-that-do-not-wear-out.md). This module turns the
trees of any run directory (``search_cli.py eval ... --run.save_trees``, best unpruned:
``--pruner.strategy none``) into MathEquiv-format pairs for labelling against ``RUBRIC.md``, so
a user can build a judge's training and test pairs from their own policy (a GPU user: from their
7B policy). The command (``search_cli.py siblings``: window, balanced sample, split by problem)
is :mod:`equiv.data.sibling_sets`; this module only extracts.

A pair is two children of one node, in generation order (node ids), with:

- exact (whitespace-equal) duplicates left out: search drops them before the judge sees them;
- a Levenshtein ratio above ``prefilter`` (the recommended judge's 0.5): below it the judge never
  runs, so such pairs cannot be false merges;
- each unordered pair of texts once per problem.

Fields: ``id`` (``<problem>-s<seed>n<parent>c<a>c<b>``, so
:func:`equiv.data.records.problem_key` groups by problem), ``problem``, ``question``,
``sentence1`` (the earlier sibling), ``sentence2``, ``prefix`` (the steps from the root to the
parent: what both siblings continue), ``reasoning_step`` (the siblings' depth),
``levenshtein_ratio``, ``multi_sentence`` (false), ``seed``, ``run``. No ``result``: a labeller adds
it. ``holdout`` files (e.g. GSM8K's ``test.jsonl``) make a run over any of their questions an
error, so test-problem siblings never reach a training set by accident.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from equiv.errors import InputError, check_fraction
from equiv.rundir.io import read_json_lines
from equiv.rundir.layout import TREES
from equiv.rundir.outputs import same_file
from equiv.rundir.trees import TreeFile, TreeNode, read_tree
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace

DEFAULT_PREFILTER = 0.5


@dataclass
class SiblingCounts:
    """What extraction saw, so a user can tell an empty file from an empty run."""

    trees: int = 0
    parents: int = 0  # nodes with at least two children
    pairs: int = 0  # sibling pairs in all
    duplicates: int = 0  # whitespace-equal pairs left out
    below_prefilter: int = 0
    repeated: int = 0  # the same two texts already taken for this problem
    written: int = 0

    def summary(self) -> str:
        return (f"{self.trees} trees, {self.parents} nodes with siblings, {self.pairs} sibling pairs: "
                f"{self.duplicates} exact duplicates, {self.below_prefilter} at or below the prefilter, "
                f"{self.repeated} repeats; {self.written} pairs written")


def _path_to(node: TreeNode, by_id: dict[int, TreeNode]) -> list[str]:
    """Step texts from the root's first step down to ``node`` (the root's own text is the question)."""
    steps: list[str] = []
    current: TreeNode | None = node
    while current is not None and current.parent is not None:
        steps.append(current.text)
        current = by_id.get(current.parent)
    return steps[::-1]


def tree_sibling_pairs(
    tree: TreeFile, *, prefilter: float = DEFAULT_PREFILTER, run: str = "", counts: SiblingCounts | None = None
) -> list[dict[str, Any]]:
    """The sibling pairs of one saved tree (see the module docstring for which and in what form)."""
    counts = counts if counts is not None else SiblingCounts()
    counts.trees += 1
    by_id = tree.node_by_id()
    children: dict[int, list[TreeNode]] = {}
    for node in tree.nodes:
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node)
    seed = tree.seed if tree.seed is not None else 0
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []
    for parent_id in sorted(children):
        kids = sorted(children[parent_id], key=lambda n: n.id)
        if len(kids) < 2:
            continue
        counts.parents += 1
        prefix = _path_to(by_id[parent_id], by_id)
        for i, a in enumerate(kids):
            for b in kids[i + 1:]:
                counts.pairs += 1
                na, nb = normalise_whitespace(a.text), normalise_whitespace(b.text)
                if na == nb:
                    counts.duplicates += 1
                    continue
                ratio = levenshtein_ratio(a.text, b.text)
                if ratio <= prefilter:
                    counts.below_prefilter += 1
                    continue
                key = (na, nb) if na <= nb else (nb, na)
                if key in seen:
                    counts.repeated += 1
                    continue
                seen.add(key)
                out.append({
                    "id": f"{tree.id}-s{seed}n{parent_id}c{a.id}c{b.id}",
                    "problem": tree.id,
                    "question": tree.question,
                    "sentence1": a.text,
                    "sentence2": b.text,
                    "prefix": prefix,
                    "reasoning_step": a.depth,
                    "levenshtein_ratio": round(ratio, 4),
                    "multi_sentence": False,
                    "seed": seed,
                    "run": run,
                })
    counts.written += len(out)
    return out


def _tree_files(run_dir: Path) -> list[Path]:
    trees = run_dir / TREES
    if not run_dir.is_dir():
        raise InputError("not a run directory (no such directory)", path=run_dir)
    if not trees.is_dir():
        raise InputError(f"has no {TREES}/ folder: run search_cli.py eval with --run.save_trees true", path=run_dir)
    files = sorted(trees.glob("*.json"))
    if not files:
        raise InputError(f"{TREES}/ holds no tree files", path=run_dir)
    return files


def holdout_questions(paths: Iterable[str | Path]) -> dict[str, str]:
    """Normalised question text -> where it comes from, for every JSONL row in ``paths``."""
    held: dict[str, str] = {}
    for path in paths:
        if not Path(path).is_file():
            raise InputError("no such file", path=path, field="holdout")
        rows, _ = read_json_lines(path)
        for line, row in rows:
            text = row.get("question") or row.get("problem")
            if not isinstance(text, str):
                raise InputError("missing or not a string", path=path, line=line, field="question")
            held.setdefault(" ".join(text.split()), f"{path}:{line}")
    return held


def sibling_pairs(
    run_dirs: Sequence[str | Path], *, prefilter: float = DEFAULT_PREFILTER, holdout: Sequence[str | Path] = ()
) -> tuple[list[dict[str, Any]], SiblingCounts]:
    """Sibling pairs of every tree in ``run_dirs``; a tree whose question a ``holdout`` file holds
    is an error naming both, never a silent skip.

    A pair's ``id`` names its tree, seed, parent and the two nodes. Two run directories of the same
    problems (a pruned and an unpruned run, two policies) hold trees with the same ids, so with
    several run directories each id starts with its run's tag (the directory's name, or ``runK``
    when two names are alike): a labeller resuming by id, or an agreement joining two labellings,
    must never take one run's pair for another's. One run directory given twice (under one name or
    two: a link, ``RUN`` and ``./RUN/``) is refused: it would write every pair twice."""
    check_fraction(prefilter, "prefilter", closed=False)
    dirs = [Path(d) for d in run_dirs]
    for k, run_dir in enumerate(dirs):
        for earlier in dirs[:k]:
            if same_file(run_dir, earlier):
                also = "" if str(run_dir) == str(earlier) else f" (as {earlier})"
                raise InputError(f"is given twice{also}; give each run directory once", path=run_dir,
                                 field="run_dirs")
    held = holdout_questions(holdout)
    counts = SiblingCounts()
    out: list[dict[str, Any]] = []
    names = [d.resolve().name for d in dirs]
    tags = names if len(set(names)) == len(names) else [f"run{k}" for k in range(len(dirs))]
    for run_dir, tag in zip(dirs, tags):
        for file in _tree_files(run_dir):
            tree = read_tree(file)
            where = held.get(" ".join(tree.question.split()))
            if where is not None:
                raise InputError(f"problem {tree.id!r} is a held-out problem ({where}); "
                                 "build training pairs from other problems", path=file, field="question")
            pairs = tree_sibling_pairs(tree, prefilter=prefilter, run=str(run_dir), counts=counts)
            if len(dirs) > 1:
                for pair in pairs:
                    pair["id"] = f"{tag}:{pair['id']}"
            out.extend(pairs)
    return out, counts
