"""Few-shot prompts for base (non-chat) models: solved exemplars from a training split.

A pretrained base model has no chat template and was never taught to "reason step by step";
it continues text. Shown a few solved problems in one fixed layout, it continues the pattern:

    Question: <exemplar question>
    Answer:
    <step>
    <step>
    The answer is <n>.

    Question: <the problem>
    Answer:

One line is one step, as in GSM8K's own solutions, so the step delimiter is ``"\\n"``; a model that
has finished writes a blank line and would start the next "Question:", which the delimiter
cuts off. Exemplars come from a file the user names (``policy.fewshot_path``, GSM8K's *train*
split in the recipes) -- never from the evaluated problems: a prompt never shows an exemplar
whose question is the question being asked (it is replaced by the next one), and the CLI
refuses a few-shot file that is the evaluated data file.

GSM8K answers are rewritten for the prompt: calculator notes ``<<48/2=24>>`` are removed and the
final ``#### 72`` becomes ``The answer is 72.``, a sentence a base model writes naturally and
the grader reads (``#### 72`` is recognised too).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from equiv.data.problems import read_jsonl_objects
from equiv.errors import InputError
from equiv.text.formula import CALCULATOR_NOTE


@dataclass(frozen=True)
class Exemplar:
    """One solved problem shown in the prompt."""

    question: str
    steps: tuple[str, ...]


def gsm8k_steps(answer: str) -> tuple[str, ...]:
    """A GSM8K ``answer`` as steps: one per non-empty line, calculator notes removed, the
    ``#### n`` line as ``The answer is n.``."""
    steps: list[str] = []
    for line in answer.splitlines():
        line = CALCULATOR_NOTE.sub("", line).strip()
        if not line:
            continue
        if line.startswith("####"):
            line = f"The answer is {line[4:].strip()}."
        steps.append(line)
    return tuple(steps)


def load_exemplars(
    path: str | Path,
    count: int,
    *,
    seed: int = 0,
    question_field: str = "question",
    answer_field: str = "answer",
    field: str = "policy.fewshot_path",
) -> tuple[Exemplar, ...]:
    """``count + 1`` exemplars drawn with ``seed`` from a JSONL file (one spare, in case one is
    the problem being asked). Every line is checked, so a bad file fails before the search."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"few-shot file {file} does not exist (a JSONL with '{question_field}' and "
                         f"'{answer_field}', e.g. GSM8K's train.jsonl)", field=field)
    rows: list[Exemplar] = []
    for number, record in read_jsonl_objects(file):
        for name in (question_field, answer_field):
            if not isinstance(record.get(name), str) or not record[name].strip():
                raise InputError("missing or not a non-empty string", path=file, line=number, field=name)
        steps = gsm8k_steps(record[answer_field])
        if not steps:
            raise InputError("the answer has no steps", path=file, line=number, field=answer_field)
        rows.append(Exemplar(" ".join(record[question_field].split()), steps))
    if len(rows) < count + 1:
        raise InputError(f"holds {len(rows)} exemplars; {count} shots need at least {count + 1}", path=file)
    picked = random.Random(seed).sample(range(len(rows)), count + 1)
    return tuple(rows[i] for i in picked)


def render_block(question: str, steps: Sequence[str] = (), suffix: str = "\n") -> str:
    """``Question: ...\\nAnswer:\\n`` followed by each step and ``suffix`` (one step per line)."""
    return f"Question: {' '.join(question.split())}\nAnswer:\n" + "".join(s + suffix for s in steps)


def render_prompt(
    exemplars: Sequence[Exemplar], count: int, question: str, steps: Sequence[str], suffix: str = "\n"
) -> str:
    """The few-shot prompt for ``question`` after ``steps``: ``count`` exemplars, none of them the
    question itself, each followed by a blank line."""
    asked = " ".join(question.split())
    shots = [e for e in exemplars if e.question != asked][:count]
    head = "".join(render_block(e.question, e.steps, suffix) + "\n" for e in shots)
    return head + render_block(question, steps, suffix)


def with_exemplars(fmt: Any, cfg: Any) -> Any:
    """The ``fewshot`` format with the exemplars ``cfg`` names; any other format unchanged."""
    if fmt.name != "fewshot":
        return fmt
    count = int(getattr(cfg, "fewshot_count", 0) or 0)
    path = getattr(cfg, "fewshot_path", None)
    if count < 0:
        raise InputError(f"must be >= 0, got {count}", field="policy.fewshot_count")
    if count == 0:
        return fmt
    if not path:
        raise InputError("the fewshot format needs exemplars: set policy.fewshot_path (e.g. GSM8K train.jsonl) "
                         "or policy.fewshot_count 0 for zero-shot", field="policy.fewshot_path")
    exemplars = load_exemplars(path, count, seed=int(getattr(cfg, "fewshot_seed", 0)))
    return replace(fmt, exemplars=exemplars, shots=count)
