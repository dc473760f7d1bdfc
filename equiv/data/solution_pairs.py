"""Step pairs of different finished solutions of one problem: the ``gsm8k_equiv`` distribution, to label.

``gsm8k_equiv`` pairs steps of *different finished solutions* of one GSM8K problem (the reference
solution and weak models' solutions). Cross-validation over it says the recommended judge is still
data-limited: trained on half of the training problems' pairs its solution-pair F1 drops by about
0.02, mostly in recall
(docs/experiments/2026-11-27-more-solution-pairs-a-learning-curve-and-849-new-labelled-pa.md);
pairs of correct, tidy solutions did not help, so the solutions should come from a weak policy,
as ``gsm8k_equiv``'s did. This module makes such pairs from any set of solutions -- a policy's
sampled solutions on GSM8K *train* problems, the reference solutions of ``train.jsonl`` -- for
labelling against ``RUBRIC.md``, the way ``gsm8k_equiv`` was made:

- a step is one solution line, or two consecutive lines joined (``multi_sentence``), so that
  multi-sentence steps exist for EM refinement; final-answer lines (``#### 72``, ``A: 72``,
  ``The answer is 72``) are not steps;
- a pair joins steps at the same or neighbouring positions (1-based ``reasoning_step``) of two
  different solutions, both single lines or both joined;
- with Levenshtein ratio (``1 - distance / max(len)``) in ``(low, high]`` -- (0.5, 0.99] as in
  ``gsm8k_equiv``: below 0.5 the judge's prefilter never asks, above 0.99 the texts are the same;
- each unordered pair of texts once per problem, at most ``per_problem`` pairs per problem, drawn
  by a seeded shuffle so a rerun writes the same file.

Input: JSON Lines, one problem a line: ``problem`` (an id; pairs get ``<problem>-<k>`` so
:func:`equiv.data.records.problem_key` groups them), ``question``, ``solutions`` (a list of
solution texts, steps separated by newlines). ``holdout`` files (GSM8K's ``test.jsonl``) make any
of their questions an error, so test problems never reach a training set by accident. Output:
MathEquiv-format pairs without ``result`` (a reader adds it), with ``solutions`` (which two
solutions, by index in the input list).

    python -m equiv.data.solution_pairs SOLUTIONS.jsonl --out pairs.jsonl --holdout ../shared/data/gsm8k/test.jsonl
"""

from __future__ import annotations

import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from equiv.cliargs import as_lists, command_parser, parse_or_refuse
from equiv.errors import InputError, check_fraction, exit_on_input_error
from equiv.rundir.io import read_json_lines, write_jsonl_atomic
from equiv.rundir.outputs import check_output
from equiv.rundir.siblings import holdout_questions
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace

FINAL_ANSWER = re.compile(r"^\s*(####|A:|Answer:|The (final )?answer is\b)", re.IGNORECASE)


@dataclass(frozen=True)
class Step:
    """One step of a solution: its text, 1-based position of its (first) line, and whether it joins two lines."""

    text: str
    position: int
    multi_sentence: bool


def solution_steps(solution: str) -> list[Step]:
    """The steps of a solution text: every line, and every two consecutive lines joined by a space;
    empty and final-answer lines are left out."""
    lines = [normalise_whitespace(line) for line in solution.split("\n")]
    lines = [line for line in lines if line and not FINAL_ANSWER.match(line)]
    singles = [Step(line, i + 1, False) for i, line in enumerate(lines)]
    joined = [Step(f"{a} {b}", i + 1, True) for i, (a, b) in enumerate(zip(lines, lines[1:]))]
    return singles + joined


def problem_pairs(problem: str, question: str, solutions: Sequence[str], *, low: float = 0.5, high: float = 0.99,
                  per_problem: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    """Up to ``per_problem`` labelled-to-be pairs of one problem's solutions (rules: module docstring)."""
    steps = [solution_steps(s) for s in solutions]
    candidates: list[tuple[int, int, Step, Step, float]] = []
    seen: set[frozenset[str]] = set()
    for a in range(len(steps)):
        for b in range(a + 1, len(steps)):
            for one in steps[a]:
                for two in steps[b]:
                    if one.multi_sentence != two.multi_sentence or abs(one.position - two.position) > 1:
                        continue
                    key = frozenset((one.text, two.text))
                    if len(key) == 1 or key in seen:
                        continue
                    ratio = levenshtein_ratio(one.text, two.text)
                    if low < ratio <= high:
                        seen.add(key)
                        candidates.append((a, b, one, two, ratio))
    random.Random(f"{seed}:{problem}").shuffle(candidates)
    return [{
        "id": f"{problem}-{k}", "problem": problem, "question": question, "sentence1": one.text, "sentence2": two.text,
        "reasoning_step": one.position, "levenshtein_ratio": round(ratio, 4), "multi_sentence": one.multi_sentence,
        "solutions": [a, b],
    } for k, (a, b, one, two, ratio) in enumerate(candidates[:per_problem])]


def read_solutions(path: str | Path) -> list[tuple[int, str, str, list[str]]]:
    """``(line, problem, question, solutions)`` per line of a solutions file; a bad line is one
    error naming the file, line and field."""
    if not Path(path).is_file():
        raise InputError("no such file", path=path, field="solutions")
    found, _ = read_json_lines(path)
    rows: list[tuple[int, str, str, list[str]]] = []
    for number, row in found:
        problem, question, solutions = row.get("problem"), row.get("question"), row.get("solutions")
        if not isinstance(problem, str) or not problem.strip():
            raise InputError("needs a non-empty string", path=path, line=number, field="problem")
        if not isinstance(question, str) or not question.strip():
            raise InputError("needs a non-empty string", path=path, line=number, field="question")
        if not isinstance(solutions, list) or len(solutions) < 2 or not all(isinstance(s, str) for s in solutions):
            raise InputError("needs a list of at least two solution texts", path=path, line=number, field="solutions")
        rows.append((number, problem, question, solutions))
    if not rows:
        raise InputError("holds no solutions", path=path)
    return rows


def solution_pairs(paths: Sequence[str | Path], *, low: float = 0.5, high: float = 0.99, per_problem: int = 3,
                   seed: int = 0, holdout: Sequence[str | Path] = ()) -> list[dict[str, Any]]:
    """The pairs of every problem of the ``paths`` solution files; a held-out question is an error."""
    check_fraction(low, "low")
    check_fraction(high, "high")
    if not low < high:
        raise InputError(f"low {low} must be below high {high}", field="low")
    if per_problem < 1:
        raise InputError(f"must be at least 1, got {per_problem}", field="per_problem")
    held = holdout_questions(holdout)
    pairs: list[dict[str, Any]] = []
    for path in paths:
        for line, problem, question, solutions in read_solutions(path):
            if normalise_whitespace(question) in held:
                raise InputError(f"problem {problem} is a held-out question ({held[normalise_whitespace(question)]}); "
                                 "its steps must not become training pairs", path=path, line=line, field="question")
            pairs.extend(problem_pairs(problem, question, solutions, low=low, high=high, per_problem=per_problem,
                                       seed=seed))
    return pairs


def build_parser() -> Any:
    """The command's parser (jsonargparse through :func:`equiv.cliargs.command_parser`): the same
    ``--help`` layout and one-line errors as every command, and ``--config`` for a YAML file of
    these options (``solutions: [...]``, ``holdout: FILE``)."""
    p = command_parser("python -m equiv.data.solution_pairs", __doc__.splitlines()[0])
    p.add_argument("solutions", nargs="+", help="JSON Lines: problem, question, solutions (a list of texts)")
    p.add_argument("--out", required=True, help="the pairs to write (JSON Lines)")
    p.add_argument("--per_problem", type=int, default=3, help="at most this many pairs of any one problem")
    p.add_argument("--low", type=float, default=0.5, help="Levenshtein ratio must be above this")
    p.add_argument("--high", type=float, default=0.99, help="... and at most this")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw of each problem's pairs")
    p.add_argument("--holdout", action="append", default=[],
                   help="a JSONL of questions (e.g. GSM8K test.jsonl) no solution may be for")
    return p


def main(argv: list[str] | None = None) -> int:
    args = as_lists(parse_or_refuse(build_parser(), sys.argv[1:] if argv is None else argv), "solutions", "holdout")
    args.out = Path(args.out)
    with exit_on_input_error():
        check_output(args.out, option="--out", inputs=[*args.solutions, *args.holdout])
        pairs = solution_pairs(args.solutions, low=args.low, high=args.high, per_problem=args.per_problem,
                               seed=args.seed, holdout=args.holdout)
        write_jsonl_atomic(args.out, pairs)
    problems = len({p["problem"] for p in pairs})
    print(f"{len(pairs)} pairs of {problems} problems ({sum(p['multi_sentence'] for p in pairs)} multi-sentence): "
          f"{args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
