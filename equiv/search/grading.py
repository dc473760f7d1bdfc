"""Answer extraction and grading.

``extract_answer(text, kind)`` finds the final answer in a solution, trying in order:
the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces handled), GSM8K's ``#### n``, the last
"The answer is ...", and finally the last number in the text.

``grade(prediction, answer, kind)`` decides correctness, after :func:`canonical_math` (a Unicode
minus is ``-``; ``\\frac12`` is ``\\frac{1}{2}``, as the reference's ``_fix_fracs``):

- ``gsm8k``: both sides reduced to a number (``$``, thousands commas, ``%``, trailing units and
  full stops dropped; fractions like ``3/4`` allowed) and compared with a relative tolerance of
  1e-6. Pure string handling, no parser that could run code.
- ``math``: a normalised string match first (cheap, catches most), then ``math-verify``
  (``parse`` + ``verify``) with only its LaTeX extraction -- its plain-expression extraction
  goes through sympy's ``parse_expr``, which calls ``eval``, and model text is never evaluated
  as code.

Timeout: sympy can hang inside C code that no signal interrupts (``9^{9^{9^{9}}}`` computes a
huge integer power), and math-verify's own ``signal.alarm`` timeout only works in the main
thread. So math grading runs in one long-lived *worker process* (a plain subprocess started on
first use, so it is safe beside vLLM and CUDA and needs no ``__main__`` guard); a comparison that takes longer than
``timeout_s`` gets the worker killed and restarted and is graded False (logged as a warning).
Grading never raises on model text.

Kinds ``code`` (HumanEval: the program's tests run in a sandbox) and ``choice`` (a multiple-choice
letter) are dispatched to :mod:`equiv.search.code_grading` and :mod:`equiv.search.choice_grading`.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import subprocess
import sys
import threading
from pathlib import Path
from fractions import Fraction
from typing import Literal

from equiv.search import choice_grading, code_grading
from equiv.search.conventions import MATH_SHEPHERD_STEP_TAG

logger = logging.getLogger(__name__)

Kind = Literal["gsm8k", "math", "code", "choice"]
DEFAULT_TIMEOUT_S = 5.0
MAX_PREDICTION_CHARS = 2000  # a longer "answer" is not an answer; do not feed it to sympy

_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?|-?\.\d+")
# r"\s*(?::\s*)?", not r"\s*:?\s*": two runs of spaces side by side try every split (issue #53)
_ANSWER_IS = re.compile(r"answer is\s*(?::\s*)?(.+)", re.IGNORECASE)


# -- canonical spelling --------------------------------------------------------------------------
# ``\frac12`` / ``\frac1{2}`` / ``\frac{1}2``: TeX reads a bare token as an argument, so these
# are 1/2 (the reference's ``_fix_fracs`` brace them); without braces the number regex saw "12".
_BARE_FRAC = re.compile(r"\\([dt]?frac)(?!\s*\{)\s*([0-9A-Za-z])\s*(?:\{([^{}]*)\}|([0-9A-Za-z]))")
_BARE_DENOMINATOR = re.compile(r"\\([dt]?frac)\s*\{([^{}]*)\}\s*([0-9A-Za-z])")
_MINUS_SIGNS = ("\u2212", "\ufe63", "\uff0d")  # Unicode minus; small and full-width hyphen-minus


def canonical_math(text: str) -> str:
    """Spellings that mean the same answer, made one: a Unicode minus sign becomes
    ``-``; a fraction with unbraced arguments gets its braces (``\\frac12`` -> ``\\frac{1}{2}``)."""
    for sign in _MINUS_SIGNS:
        text = text.replace(sign, "-")
    text = _BARE_FRAC.sub(lambda m: f"\\{m.group(1)}{{{m.group(2)}}}{{{m.group(3) if m.group(3) is not None else m.group(4)}}}", text)
    return _BARE_DENOMINATOR.sub(lambda m: f"\\{m.group(1)}{{{m.group(2)}}}{{{m.group(3)}}}", text)


# -- extraction -----------------------------------------------------------------------------


def _last_braced(text: str, commands: tuple[str, ...] = ("\\boxed", "\\fbox")) -> str | None:
    """Content of the last ``\\boxed{...}`` (braces balanced), or ``\\boxed x`` without braces."""
    best = None
    for cmd in commands:
        pos = text.rfind(cmd)
        if pos >= 0 and (best is None or pos > best[0]):
            best = (pos, cmd)
    if best is None:
        return None
    i = best[0] + len(best[1])
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        return None
    if text[i] != "{":
        # "\boxed 5" form: up to the next space or "$".
        m = re.match(r"[^\s$]+", text[i:])
        return m.group(0) if m else None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None  # unbalanced: no answer


def _strip_answer(text: str) -> str:
    text = text.strip().rstrip(" .")
    if len(text) >= 2 and text[0] == "$" and text.count("$") == 2 and text[-1] == "$":
        text = text[1:-1].strip().rstrip(" .")
    return text


def extract_answer(text: str | None, kind: Kind) -> str | None:
    """The final answer stated in ``text`` (see module docstring for the order), or None."""
    if kind in ("code", "choice"):
        return _other_kind(kind).extract(text)
    if not text:
        return None
    text = canonical_math(text)
    boxed = _last_braced(text)
    if boxed:
        return boxed
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip().splitlines()
        if tail and tail[0].strip():
            return _strip_answer(tail[0])
    matches = list(_ANSWER_IS.finditer(text))
    if matches:
        lines = matches[-1].group(1).strip().splitlines()  # none: "answer is" and spaces only
        found = lines[0].strip() if lines else ""
        # "The answer is: 42 ки" (Math-Shepherd) -- drop the step tag.
        found = found.replace(MATH_SHEPHERD_STEP_TAG, "").strip()
        if found:
            return _strip_answer(found)
    numbers = _NUMBER.findall(text)
    if numbers:
        return numbers[-1].strip()
    return None


# -- GSM8K: numbers -------------------------------------------------------------------------


# ``\frac{a}{b}`` / ``\dfrac`` / ``\tfrac``, with an optional sign and whole part in front
# (``-\frac{1}{2}``, ``2\frac{1}{2}`` = 5/2, a mixed number as GSM8K writes them).
# Without its sign, a match never starts after a digit or a space: a start there fails as the start
# of that run of digits and spaces did, and retrying from each is quadratic (issue #53).
_FRACTION = re.compile(r"(?:(-)|(?<![\d\s]))(\d+)?\s*\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(-?\d+)\s*\}")


def _fraction_as_ratio(match: re.Match) -> str:
    """One LaTeX fraction, parsed in place, rewritten as a plain ``p/q`` the number regex reads."""
    sign, whole, num, den = match.groups()
    if int(den) == 0:
        return f"{num}/0"
    value = Fraction(int(num), int(den)) + int(whole or 0)
    if sign:
        value = -value
    return f"{value.numerator}/{value.denominator}"


def parse_number(text: str | None) -> Fraction | None:
    """The last number in ``text`` as an exact fraction (``$1,000.50`` -> 2001/2), or None."""
    if not text:
        return None
    text = canonical_math(text).replace("\\!", "").replace("{,}", ",").replace("\\$", "$")
    text = _FRACTION.sub(_fraction_as_ratio, text)
    numbers = _NUMBER.findall(text)
    if not numbers:
        return None
    raw = numbers[-1].replace(",", "").replace(" ", "")
    if len(raw) > 100:  # no sane GSM8K answer; avoids giant-integer work
        return None
    try:
        if "/" in raw:
            num, den = raw.split("/")
            value = Fraction(num) / Fraction(den)
        else:
            value = Fraction(raw)
    except (ValueError, ZeroDivisionError):
        return None
    return value


def _numbers_match(a: Fraction, b: Fraction, rel_tol: float = 1e-6) -> bool:
    return abs(a - b) <= rel_tol * max(1, abs(a), abs(b))


# -- MATH: strings, then math-verify in a worker ------------------------------------------


def _normalise_math(text: str) -> str:
    text = text.strip().strip("$").strip()
    for old, new in (
        ("\\left", ""),
        ("\\right", ""),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
        ("^\\circ", ""),
        ("^{\\circ}", ""),
        ("\\%", ""),
        ("%", ""),
    ):
        text = text.replace(old, new)
    text = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", text)
    text = re.sub(r"\s+", "", text)
    return text.rstrip(".")


def _math_verify_equal(prediction: str, answer: str) -> bool:
    """math-verify on LaTeX only (no ``parse_expr``/``eval``); runs inside the worker."""
    from math_verify import LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(try_extract_without_anchor=True)]
    gold = parse(f"${answer}$", extraction_config=config, parsing_timeout=None)
    pred = parse(f"${prediction}$", extraction_config=config, parsing_timeout=None)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


def _serve() -> None:  # pragma: no cover - runs in the worker process
    """Worker loop: one JSON ``[prediction, answer]`` per stdin line -> ``true``/``false`` line."""
    import json as _json
    import logging as _logging

    _logging.disable(_logging.WARNING)  # math-verify warns that its timeouts are off: ours is on
    import math_verify  # noqa: F401  (import before saying ready: start-up is not grading time)

    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        try:
            prediction, answer = _json.loads(line)
            result = _math_verify_equal(prediction, answer)
        except Exception:
            result = False
        out.write("true\n" if result else "false\n")
        out.flush()


class _MathWorker:
    """One worker process running math-verify; killed and restarted on timeout.

    A plain ``subprocess`` (not ``multiprocessing``): it needs no ``if __name__ == "__main__"``
    guard in the caller's script and never forks a process holding CUDA or vLLM state.
    """

    STARTUP_S = 120.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def _start(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from equiv.search.grading import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            env=env,
        )
        if self._readline(self.STARTUP_S) != "ready":
            self._kill()
            raise RuntimeError(f"the grading worker did not start within {self.STARTUP_S:.0f}s")

    def _readline(self, timeout_s: float) -> str | None:
        assert self._proc is not None and self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self._proc.stdout.readline()
        return line.strip() if line else None

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
        self._proc = None

    def equal(self, prediction: str, answer: str, timeout_s: float) -> bool | None:
        """True/False, or None when the comparison timed out (the worker is then replaced)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._start()
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(json.dumps([prediction, answer]) + "\n")
                self._proc.stdin.flush()
                line = self._readline(timeout_s)
            except (OSError, ValueError):
                line = None
            if line in ("true", "false"):
                return line == "true"
            self._kill()
            return None

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.stdin is not None:
                try:
                    self._proc.stdin.close()
                    self._proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill()


_WORKER = _MathWorker()
atexit.register(_WORKER.close)


class _OtherKind:
    """Extract and grade of the non-math kinds (modules of their own, read when first used)."""

    def __init__(self, kind: str) -> None:
        if kind == "code":
            self.extract, self.grade = code_grading.extract_program, code_grading.grade_code
        else:
            self.extract, self.grade = choice_grading.extract_choice, choice_grading.grade_choice


def _other_kind(kind: str) -> _OtherKind:
    return _OtherKind(kind)


def grade(prediction: str | None, answer: str, kind: Kind, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Is ``prediction`` (an extracted answer) equal to the reference ``answer``?

    Never raises on model text; a comparison running past ``timeout_s`` is False.
    """
    if kind in ("code", "choice"):
        return _other_kind(kind).grade(prediction, answer)
    if prediction is None or not str(prediction).strip():
        return False
    prediction = str(prediction)
    if len(prediction) > MAX_PREDICTION_CHARS:
        return False
    if kind == "gsm8k":
        pred, gold = parse_number(prediction), parse_number(answer)
        if pred is None or gold is None:
            return False
        return _numbers_match(pred, gold)
    if kind != "math":
        raise ValueError(f"unknown problem kind {kind!r}; expected 'gsm8k' or 'math'")
    prediction, answer = canonical_math(prediction), canonical_math(str(answer))
    if _normalise_math(prediction) == _normalise_math(answer):
        return True
    result = _WORKER.equal(prediction, answer, timeout_s)
    if result is None:
        logger.warning("grading timed out after %.1fs: prediction %.80r vs answer %.80r", timeout_s, prediction, answer)
        return False
    return result
