"""Agreement between two labellings of the same pairs, as the paper measured its labeller.

EquivPruner refined its few-shot examples by comparing GPT-4o's labels with human labels on 20
random pairs, three rounds, adding the human verdict and reason for each disagreement, until a
fresh 100 pairs agreed completely. This module is the measuring half of that loop: two label
files (two models, two samplings of one model, a model and a human file) are joined by pair key
(:func:`equiv.labelling.run.pair_key`: the ``id``, else the texts) and compared:

- **level agreement** (the same level 0-4) and Cohen's kappa over the five levels;
- **binary agreement** and kappa after the judge's :class:`~equiv.data.records.LabelMapping`
  (default 3-4 equivalent, 0-1 not), over the pairs both labellings map (a 2 on either side is
  dropped, as training drops it, and counted);
- the 5x5 confusion table, and every disagreement (binary ones first) for a reader to settle.

Kappa is ``None`` where it is undefined (both labellings use one and the same label throughout).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable, Sequence

from equiv.data.records import LEVELS, LabelMapping, iter_json_rows, record_from_row
from equiv.errors import InputError
from equiv.labelling.run import pair_key


def read_labels(path: str | Path) -> dict[str, dict[str, Any]]:
    """Key -> row of a labelled file; every row is validated like training data (a level 0-4)."""
    labels: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    for line, row in iter_json_rows(path):
        if isinstance(row, InputError):
            raise row
        record_from_row(row, path=str(path), line=line)
        key = pair_key(row)
        if key in labels:
            raise InputError(f"pair {key!r} is also on line {lines[key]}", path=path, line=line, field="id")
        labels[key], lines[key] = row, line
    if not labels:
        raise InputError("holds no labelled pairs", path=path)
    return labels


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two equally long label sequences; ``None`` when chance agreement is 1."""
    if len(a) != len(b):
        raise ValueError("kappa needs two sequences of one length")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


@dataclass
class Agreement:
    """The comparison of two labellings (module docstring); ``disagreements`` are rows to settle."""

    common: int
    only_a: int
    only_b: int
    level_agreement: float
    level_kappa: float | None
    binary_pairs: int
    binary_dropped: int
    binary_agreement: float | None
    binary_kappa: float | None
    confusion: list[list[int]]
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "disagreements"}
        out["disagreements"] = len(self.disagreements)
        out["binary_disagreements"] = sum(bool(d["binary_disagree"]) for d in self.disagreements)
        return out


def compare(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], mapping: LabelMapping = LabelMapping(),
            *, names: tuple[str, str] = ("a", "b")) -> Agreement:
    """Compare two labellings keyed by pair (:func:`read_labels`); pairs in only one are counted, not compared."""
    keys = [k for k in a if k in b]
    if not keys:
        raise InputError("the two files have no pair in common (pairs are matched by 'id', else by their texts)",
                         field="files")
    la = [int(a[k]["result"]) for k in keys]
    lb = [int(b[k]["result"]) for k in keys]
    confusion = [[0] * len(LEVELS) for _ in LEVELS]
    for x, y in zip(la, lb):
        confusion[x][y] += 1
    binary = [(mapping.label(x), mapping.label(y)) for x, y in zip(la, lb)]
    both = [(x, y) for x, y in binary if x is not None and y is not None]
    disagreements = []
    for k, x, y, (bx, by) in zip(keys, la, lb, binary):
        if x == y:
            continue
        row_a, row_b = a[k], b[k]
        disagreements.append({
            "key": k, "id": row_a.get("id"), "question": row_a.get("question"),
            "sentence1": row_a["sentence1"], "sentence2": row_a["sentence2"],
            "binary_disagree": None if bx is None or by is None else bx != by,
            names[0]: {"result": x, "reasoning": row_a.get("label_reasoning"), "model": row_a.get("label_model")},
            names[1]: {"result": y, "reasoning": row_b.get("label_reasoning"), "model": row_b.get("label_model")},
        })
    disagreements.sort(key=lambda d: (d["binary_disagree"] is not True, d["key"]))
    return Agreement(
        common=len(keys), only_a=len(a) - len(keys), only_b=sum(k not in a for k in b),
        level_agreement=sum(x == y for x, y in zip(la, lb)) / len(keys),
        level_kappa=cohen_kappa(la, lb),
        binary_pairs=len(both), binary_dropped=len(keys) - len(both),
        binary_agreement=sum(x == y for x, y in both) / len(both) if both else None,
        binary_kappa=cohen_kappa([x for x, _ in both], [y for _, y in both]),
        confusion=confusion, disagreements=disagreements,
    )
