"""equiv.text.normalize: the one reading of numbers and words that guard, formula and formatting share."""

from __future__ import annotations

from decimal import Decimal

import pytest

from equiv.text import formatting, formula
from equiv.text.normalize import (CALCULATOR_NOTE, THOUSANDS, THOUSANDS_COMMA, is_function_word, normalise_whitespace,
                                  number_value, stem, step_numbers, strip_notes)


def test_a_calculator_note_is_one_closed_note_and_an_unclosed_one_keeps_the_prose_after_it():
    assert strip_notes("So 3*4 = <<3*4=12>>12 eggs.") == "So 3*4 =  12 eggs."
    # a truncated "<<" does not swallow the prose up to the next note (it would with <<[^>]*>>)
    assert strip_notes("He has <<5+ then 2*3 = <<2*3=6>>6 pens.", "") == "He has <<5+ then 2*3 = 6 pens."
    assert formula.CALCULATOR_NOTE is CALCULATOR_NOTE


@pytest.mark.parametrize("digits, value", [
    ("1,200", "1200"), ("17 500", "17500"), ("12.0", "12"), ("12.50", "12.5"), ("99.00000000000001", "99"),
    ("1,", "1"), ("0.3333333", "0.333333"),
])
def test_a_number_is_read_as_its_value(digits, value):
    assert number_value(digits) == Decimal(value)


def test_a_steps_numbers_are_values_and_a_percent_is_also_its_fraction():
    assert step_numbers("It costs $1,200 or 20% of $6000, 12.0 a day") == {Decimal(v) for v in ("1200", "20", "0.2", "6000", "12")}
    assert step_numbers("no numbers here") == set()


def test_thousands_separators_are_commas_for_the_same_step_key_and_commas_or_spaces_for_the_guard():
    assert THOUSANDS_COMMA.sub("", "1,200 and 2 100") == "1200 and 2 100"
    assert THOUSANDS.sub("", "1,200 and 17 500") == "1200 and 17500"
    assert formatting.format_key("$1,200.") == formatting.format_key("1200")
    assert formula.normalise_formula("1,200*2") == formula.normalise_formula("1200*2")


def test_stemming_and_function_words_are_read_before_and_after_stemming():
    assert [stem(w) for w in ("Tom's", "eggs", "glass", "has")] == ["tom", "egg", "glass", "has"]
    for word in ("this", "does", "thus", "The", "its"):
        assert is_function_word(word) and is_function_word(stem(word)), word
    assert not is_function_word("trip") and not is_function_word(stem("repairs"))


def test_whitespace_is_collapsed_and_stripped():
    assert normalise_whitespace("  a \n\t b  ") == "a b"
