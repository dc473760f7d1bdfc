"""Answer extraction and grading: table-driven, including a grading timeout."""

from __future__ import annotations

from fractions import Fraction
import threading
import time

import pytest

from equiv.search.grading import canonical_math, extract_answer, grade, parse_number


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("so the result is \\boxed{5}.", "math", "5"),
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", "math", "\\frac{1}{\\sqrt{2}}"),
        ("first \\boxed{1} then \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "math", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("\\boxed{\\{1, 2\\}} and \\fbox{x}", "math", "x"),
        ("The answer is \\boxed 7$", "math", "7"),
        ("unbalanced \\boxed{\\frac{1}{2}", "math", "2"),  # no box: falls back to the last number
        ("She makes 9 * 2 = $18.\n#### 18", "gsm8k", "18"),
        ("#### 1,000\n", "gsm8k", "1,000"),
        ("Step 3: The answer is: 70000 ки", "gsm8k", "70000"),
        ("so the answer is $\\frac{3}{4}$.", "math", "\\frac{3}{4}"),
        ("He has 5 apples, then 7.5 apples", "gsm8k", "7.5"),
        ("total -3 degrees", "gsm8k", "-3"),
        ("no numbers here", "gsm8k", None),
        ("", "math", None),
        (None, "math", None),
    ],
)
def test_extract_answer(text, kind, expected):
    assert extract_answer(text, kind) == expected


@pytest.mark.parametrize(
    ("prediction", "answer", "kind", "expected"),
    [
        # GSM8K: numbers with commas, dollars, decimals, fractions, units.
        ("18", "18", "gsm8k", True),
        ("$1,000", "1000", "gsm8k", True),
        ("18.00", "18", "gsm8k", True),
        ("18 dollars", "18", "gsm8k", True),
        ("3/4", "0.75", "gsm8k", True),
        ("\\frac{3}{4}", "0.75", "gsm8k", True),
        ("17", "18", "gsm8k", False),
        ("-18", "18", "gsm8k", False),
        ("eighteen", "18", "gsm8k", False),
        ("1" * 500, "18", "gsm8k", False),  # absurdly long number: False, quickly
        (None, "18", "gsm8k", False),
        ("", "18", "gsm8k", False),
        # MATH: equivalent LaTeX forms.
        ("\\frac12", "\\frac{1}{2}", "math", True),
        ("0.5", "\\frac{1}{2}", "math", True),
        ("\\dfrac{1}{2}", "\\frac{1}{2}", "math", True),
        ("(3,\\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", "math", True),
        ("x^2+2x", "2x+x^2", "math", True),
        ("\\sqrt{4}", "2", "math", True),
        ("90^\\circ", "90", "math", True),
        ("3", "\\left( 3, \\frac{\\pi}{2} \\right)", "math", False),
        ("\\frac{1}{3}", "\\frac{1}{2}", "math", False),
        ("}}{{\\frac", "\\frac{1}{2}", "math", False),  # garbage
        ("__import__('os').system('touch /tmp/equiv_pwned')", "0", "math", False),  # never eval'd
        ("x" * 5000, "5", "math", False),
    ],
)
def test_grade(prediction, answer, kind, expected):
    assert grade(prediction, answer, kind) is expected


def test_model_text_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    for text in (f"__import__('pathlib').Path('{marker}').touch()", f"exec(\"open('{marker}','w')\")"):
        assert grade(text, "1", "math") is False
        assert grade(text, "1", "gsm8k") is False
    assert not marker.exists()


def test_timeout_kills_a_hanging_comparison_and_grading_recovers():
    grade("1", "1", "math")  # the worker is up: the timing below is grading only
    start = time.monotonic()
    # sympy computes this huge power in C: no signal could interrupt it.
    assert grade("9^{9^{9^{9}}}", "5", "math", timeout_s=0.5) is False
    assert time.monotonic() - start < 30
    assert grade("\\frac{2}{4}", "0.5", "math") is True  # a fresh worker took over


def test_grading_works_off_the_main_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(grade("\\sqrt{9}", "3", "math")))
    thread.start()
    thread.join(60)
    assert results == [True]


def test_parse_number():
    assert parse_number("$1,234.50") == parse_number("1234.5")
    assert parse_number("no") is None
    assert parse_number("1/0") is None
    with pytest.raises(ValueError, match="kind"):
        grade("1", "1", "physics")


@pytest.mark.parametrize(
    "text, value",
    [
        ("The answer is -\\frac{1}{2}", Fraction(-1, 2)),
        ("\\boxed{2\\frac{1}{2}}", Fraction(5, 2)),  # a mixed number, as GSM8K writes them
        ("\\tfrac{3}{4}", Fraction(3, 4)),
        ("\\dfrac{6}{4} cups", Fraction(3, 2)),
        ("\\frac{3}{4} of 12 is 9", Fraction(9)),  # parsed in place: the last number still wins
        ("-2\\frac{1}{4}", Fraction(-9, 4)),
    ],
)
def test_parse_number_reads_latex_fractions_in_place(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("prediction, answer, kind", [
    ("\\frac12", "1/2", "gsm8k"),  # used to read as 12
    ("\\frac12", "\\frac{1}{2}", "math"),
    ("\\dfrac34", "0.75", "gsm8k"),
    ("\\frac1{2}", "\\frac{1}{2}", "math"),
    ("\u22125", "-5", "gsm8k"),  # a Unicode minus sign used to be dropped (read as 5)
    ("\u22123", "-3", "math"),
])
def test_reference_spellings_grade_as_their_value(prediction, answer, kind):
    assert grade(prediction, answer, kind)


def test_unbraced_fraction_and_unicode_minus_are_not_misread():
    assert not grade("\\frac12", "12", "gsm8k")
    assert not grade("\u22125", "5", "gsm8k")
    assert parse_number("\\frac12") == Fraction(1, 2)
    assert extract_answer("so we owe \u22127 dollars", "gsm8k") == "-7"
    assert canonical_math("\\frac{1}{2} + \\frac ab") == "\\frac{1}{2} + \\frac{a}{b}"
