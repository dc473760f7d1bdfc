"""equiv.text.assignment: the ``name = expression`` lines of a step written as Python, and their
right-hand sides in the expression module's notation (or ``None`` where they are not arithmetic)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from equiv.text.assignment import MAX_NAMES, assignments, names, read
from equiv.text.expression import MAX_CHARS, same_value, values
from tests.helpers.examples import examples


def test_assignments_are_the_last_value_of_each_name_without_comments():
    text = ("Let's compute it.\n```python\n# the first day\nwest_day1 = 80  # miles\n    north = 150\n"
            "west_day1 = 90\ncount += 1\nok = west_day1 == 90\nflag == 3\n```")
    assert assignments(text) == {"west_day1": "90", "north": "150", "ok": "west_day1 == 90"}


def test_prose_and_latex_lines_are_not_assignments():
    assert assignments("Total load = 60 + 20 = 80 minutes.\n- x = 5\n\\[ y = 3 \\]") == {}


@pytest.mark.parametrize("right, order, expression", [
    ("first + second", ("first", "second"), "a+b"),
    ("(first + second) * 2", ("first", "second"), "(a+b)*2"),
    ("rate ** 2 / 1_000", ("rate",), "a^2/1000"),
    ("0.6 * price_3", ("price_3",), "0.6*a"),
    ("160", (), "160"),
])
def test_arithmetic_becomes_one_letter_unknowns(right, order, expression):
    assert names(right) == order
    assert read(right) == (order, expression)


@pytest.mark.parametrize("right", [
    "round(total)", "math.pi * r", "3e5", "x if y else z", "'text'", "values[0]", "(a)(b)", "a b",
    "total == 3", "x" + "+x" * MAX_CHARS,
])
def test_what_is_not_plain_arithmetic_is_not_read(right):
    assert names(right) is None
    assert read(right) is None


def test_more_names_than_letters_are_not_read():
    many = " + ".join(f"v{k}" for k in range(MAX_NAMES + 1))
    assert names(many) is None
    assert read(many) is None


def test_the_same_computation_in_two_orders_of_names_has_the_same_values():
    (order, left), (same_order, right) = read("b * (a + 1)"), read("b * a + b")
    assert order == same_order == ("a", "b")
    assert same_value(values(left), values(right))
    assert not same_value(values(left), values(read("b * a + 1")[1]))


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet="ab_1. +-*/()=#\n[]'", max_size=60))
def test_any_text_gives_assignments_whose_sides_read_or_not_and_never_raises(text):
    for right in assignments(text).values():
        order, found = names(right), read(right)
        if order is not None:
            assert found is not None and found[0] == order and " " not in found[1]
            values(found[1])  # a value, None, never an exception
        else:
            assert found is None
