"""The labelling prompt: the paper's five-level recipe as chat messages, with replaceable few-shot examples.

EquivPruner's MathEquiv labels came from GPT-4o with a fixed prompt (arXiv 2505.16312):
the five levels, the four criteria (same concepts, logical structure, notation, method -- the same
result by another method is *not* equivalent), an instruction to explain, reflect and only then
answer, and the answer as ``{"reasoning_step": "...", "result": <int>}``. Its few-shot examples
were refined against human labels; the two failure modes found (judging only the conclusion and
ignoring conditions; calling pairs equivalent because they reach the same answer differently) are
written into the instructions below and into the default examples (``fewshot.jsonl`` beside this
module: a formula with different variables, the same value by a different method, a dropped
condition, an extra computation, and two equivalent pairs so the model does not learn "always 0").

This is the project's own wording of that recipe, not a copy of the paper's prompt, kept in
line with ``../shared/data/gsm8k_equiv/RUBRIC.md``, which the project's human labels followed.

A few-shot file is JSON Lines: ``sentence1``, ``sentence2``, ``result`` (0-4), ``reasoning_step``
(the explanation the model should imitate) and optionally ``question``; each example becomes a
user turn and the assistant's answer dictionary, so the model sees the exact answer shape.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from equiv.errors import InputError
from equiv.rundir.io import read_json_lines

DEFAULT_FEWSHOT = Path(__file__).with_name("fewshot.jsonl")

INSTRUCTIONS = """\
You are an expert in mathematics and logical reasoning. You will be shown two reasoning steps \
written for the same problem (and, when given, the problem and the steps before them). Decide \
whether the two steps are EQUIVALENT as reasoning steps.

Two steps are equivalent only if they agree in ALL of:
1. Concepts: they use the same mathematical concepts and talk about the same quantities.
2. Logical structure: the same assumptions and conditions lead to the same conclusions.
3. Notation: the same formulas on the same variables (renaming a variable that means the same \
thing is fine; a formula on different variables is not).
4. Method: the same procedure. Reaching the same result by a different method, definition or \
order of computation is NOT equivalent.
Wording, word order, filler words and formatting do not matter. A step that adds, drops or \
changes a computation, a condition or a claim is not equivalent to one that does not. Do not \
judge by the final conclusion alone: check the conditions and every intermediate claim.

Answer on this scale:
4 = exactly equivalent: same content, only wording or format differs;
3 = likely equivalent: same reasoning, with minor differences that do not change it;
2 = cannot judge: too ambiguous to decide (use sparingly);
1 = unlikely equivalent: largely overlapping, but a computation, quantity, condition or conclusion differs;
0 = not equivalent: different quantities, computations, methods or conclusions.

First explain your analysis of both steps, then reflect on it (did you check the conditions and \
the method, not only the result?), and only then give the level. Reply with a dictionary and \
nothing else:
{"reasoning_step": "<your explanation and reflection>", "result": <integer 0-4>}"""


@dataclass(frozen=True)
class Example:
    """One few-shot example: a pair, its level and the explanation the model should imitate."""

    sentence1: str
    sentence2: str
    result: int
    reasoning: str
    question: str = ""


def read_fewshot(path: str | Path = DEFAULT_FEWSHOT) -> list[Example]:
    """The examples of a few-shot file; a bad line is one error naming file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", path=path, field="fewshot")
    rows, torn = read_json_lines(path)
    if torn:
        raise InputError("the last line is cut off (no newline, not valid JSON)", path=path, line=len(rows) + 1)
    examples = []
    for line, row in rows:
        for name in ("sentence1", "sentence2", "reasoning_step"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise InputError("needs a non-empty string", path=path, line=line, field=name)
        result = row.get("result")
        if isinstance(result, bool) or result not in (0, 1, 2, 3, 4):
            raise InputError(f"must be an integer 0-4, got {result!r}", path=path, line=line, field="result")
        question = row.get("question", "")
        if not isinstance(question, str):
            raise InputError("must be a string", path=path, line=line, field="question")
        examples.append(Example(row["sentence1"], row["sentence2"], result, row["reasoning_step"], question))
    return examples


def fewshot_digest(path: str | Path = DEFAULT_FEWSHOT) -> str:
    """A short hash of the few-shot file, stored with each label: which prompt made it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def pair_text(sentence1: str, sentence2: str, *, question: str = "", prefix: Sequence[str] = ()) -> str:
    """The user turn for one pair: the problem and the shared prefix first when given, then the two steps."""
    parts = []
    if question.strip():
        parts.append(f"Problem:\n{question.strip()}")
    if prefix:
        parts.append("Steps before the two candidates:\n" + "\n".join(f"- {s}" for s in prefix))
    parts.append(f"Step 1:\n{sentence1}")
    parts.append(f"Step 2:\n{sentence2}")
    return "\n\n".join(parts)


def answer_text(reasoning: str, result: int) -> str:
    """The answer dictionary, exactly as the model is asked to write it."""
    return json.dumps({"reasoning_step": reasoning, "result": result}, ensure_ascii=False)


def build_messages(pair: Mapping[str, Any], examples: Sequence[Example], *, with_question: bool = False,
                   with_prefix: bool = False) -> list[dict[str, str]]:
    """Chat messages for one pair: the instructions, each example as a user/assistant exchange, the pair.

    ``with_question`` / ``with_prefix`` show the problem and the steps both siblings continue (for
    the examples too, where they have a question): without them the model judges the two texts
    alone, as the paper's labeller did.
    """
    messages = [{"role": "system", "content": INSTRUCTIONS}]
    for ex in examples:
        messages.append({"role": "user", "content": pair_text(ex.sentence1, ex.sentence2,
                                                              question=ex.question if with_question else "")})
        messages.append({"role": "assistant", "content": answer_text(ex.reasoning, ex.result)})
    question = str(pair.get("question") or "") if with_question else ""
    prefix = pair.get("prefix") or () if with_prefix else ()
    messages.append({"role": "user", "content": pair_text(str(pair["sentence1"]), str(pair["sentence2"]),
                                                          question=question, prefix=[str(s) for s in prefix])})
    return messages
