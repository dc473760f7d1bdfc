"""Levenshtein ratio (the paper's definition) and the formula strategy's extraction/normalisation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz

from equiv.text.formula import extract_formulas, formula_signature, formulas_equivalent, normalise_formula
from equiv.text.levenshtein import levenshtein_ratio, normalise_whitespace
from tests.helpers.examples import examples


def test_ratio_is_one_minus_distance_over_max_length():
    # "kitten" -> "sitting": distance 3, max length 7.
    assert levenshtein_ratio("kitten", "sitting") == 1 - 3 / 7
    assert levenshtein_ratio("abcd", "abce") == 0.75
    assert levenshtein_ratio("", "") == 1.0
    assert levenshtein_ratio("abc", "") == 0.0


def test_ratio_is_not_the_indel_ratio():
    # python-Levenshtein / fuzz.ratio is an indel ratio: 2*LCS/(len a + len b) = 6/8 here, while
    # the paper's ratio is 1 - 2/4 (two substitutions... or one deletion plus one insertion).
    assert fuzz.ratio("abcd", "bcda") / 100 == 0.75
    assert levenshtein_ratio("abcd", "bcda") == 0.5


@settings(max_examples=examples(60), deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_ratio_properties(a, b):
    r = levenshtein_ratio(a, b)
    assert 0.0 <= r <= 1.0
    assert r == levenshtein_ratio(b, a)
    assert (r == 1.0) == (a == b)


def test_normalise_whitespace():
    assert normalise_whitespace("  a \n\t b  c ") == "a b c"
    assert normalise_whitespace("") == ""


def test_extract_prefers_calculator_notes_then_math_then_bare():
    assert extract_formulas("So 4 x 2 = <<4*2=8>>8 bowls and <<8-2=6>>6 left") == ["4*2=8", "8-2=6"]
    assert extract_formulas(r"We get $x = 3$ and \(y+1=2\) and \[z=\frac{1}{2}\]") == ["x = 3", "y+1=2", r"z=\frac{1}{2}"]
    assert extract_formulas("She makes 9 x 2 = 18 dollars") == ["9 x 2 = 18"]
    assert extract_formulas("No arithmetic here.") == []


def test_normalisation_rules():
    assert normalise_formula(r"\frac{1}{2} \times 4 = 2.0") == "(1)/(2)*4=2"
    assert normalise_formula("1,000 ÷ 4 = 250.50") == "1000/4=250.5"
    assert normalise_formula("4+3=7") == normalise_formula("3 + 4 = 7")
    assert normalise_formula("2*3*5=30") == normalise_formula("5*2*3=30")
    assert normalise_formula("10 − 4 = 6") == "10-4=6"
    assert normalise_formula(r"\left(2\cdot 3\right)=6") == "(2*3)=6"


def test_formula_equivalence_follows_the_rubric():
    # Commuted operands and formatting: same computation.
    assert formulas_equivalent("Janet has 3+4=<<3+4=7>>7 eggs.", "So 4 + 3 = <<4+3=7>>7 eggs are used")
    assert formulas_equivalent("It takes $2 \\times 6 = 12$ min", "Time: $6\\cdot2=12$.")
    # Same number by a different procedure, or a different result: not equivalent.
    assert not formulas_equivalent("<<2*6=12>>12", "<<6+6=12>>12")
    assert not formulas_equivalent("<<13*2=26>>26", "<<13*2=24>>24")
    # An extra computation on one side breaks equivalence.
    assert not formulas_equivalent("<<3+4=7>> and <<16-7=9>>", "<<3+4=7>>")
    # No formula on either side: exact text after whitespace normalisation.
    assert formulas_equivalent("The answer is  ready.", "The answer is ready.")
    assert not formulas_equivalent("Let us start.", "We begin.")
    # Only one side computes something.
    assert not formulas_equivalent("She sells the rest.", "She sells <<16-7=9>>9 eggs.")


def test_non_ascii_and_latex_heavy_text_does_not_break_extraction():
    text = r"Für $\sqrt{\frac{\alpha^2}{4}} = \frac{|\alpha|}{2}$ gilt … 😀 $$\int_0^1 x\,dx = \tfrac12$$"
    sig = formula_signature(text)
    assert len(sig) == 2
    assert formulas_equivalent(text, text.replace("gilt", "folgt"))


def test_latex_units_and_boxes_do_not_make_another_computation():
    """A small instruct model writes its arithmetic in LaTeX with units in ``\\text{}`` and the answer
    boxed; the rubric counts ``12`` and ``12 dollars`` as one number. Before: the units made the two
    spellings different formulas."""
    from equiv.text.formula import formulas_equivalent, normalise_formula

    assert normalise_formula(r"3000 \text{ grams} + 20 \text{ grams} = \boxed{3020} \text{ grams}") == "20+3000=3020"
    assert formulas_equivalent(r"So \[ 3000 \text{ grams} + 20 \text{ grams} = 3020 \text{ grams} \]",
                               r"we add \[ 20 + 3000 = 3020 \] grams")
    assert not formulas_equivalent(r"\[ 3000 \text{ grams} + 20 \text{ grams} = 3020 \]", r"\[ 3000 - 20 = 2980 \]")


def test_latex_math_reads_backslash_spans_only_in_order():
    from equiv.text.formula import latex_math
    text = "Costs $5 and $6. So \\( x - 1 \\) and \\[ \\frac{x}{3} = y \\] then \\( unclosed"
    assert latex_math(text) == [" x - 1 ", " \\frac{x}{3} = y "]
    assert latex_math("no math, $1 to $2") == []
