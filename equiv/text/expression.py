"""Exact values of a small algebraic expression, so two results with an unknown can be compared.

A 1.5B instruct policy solves "how many did she start with?" by algebra: its sibling steps
conclude with ``\\frac{x}{3} - 1``, ``\\frac{x}{3}`` or ``\\frac{x}{3} + 1``. The claim guard's
number rules have no number to compare there, so a cross-encoder that reads "almost the same
text" decided, and merged different results (15 wrong merges of 152 on one such problem;
docs/results.md). Two expressions in the same unknowns are the same result when they are the same
rational function, and two different rational functions differ at almost every point
(Schwartz-Zippel), so :func:`values` evaluates an expression at :data:`POINTS` fixed points in
exact rational arithmetic and two results are equal when their values are.

Deliberately small, and never ``eval``: the text comes from a model and, through the service, from
anyone. What it reads (a normalised formula, :func:`equiv.text.formula.normalise_formula`):
numbers, one-letter unknowns, ``+ - * / ^``, parentheses and implicit products (``2x``,
``3(x+1)``, ``(a)(b)``). Anything else -- a LaTeX command left over, a word of two letters or more
(``9eggs``: a unit, not a product of five unknowns), a power that is not a small whole number --
gives ``None``: the rule that uses it then does not veto, and the model decides as before.

Bounded (issue #53's crafted steps): at most :data:`MAX_CHARS` characters, and every value's
numerator and denominator at most :data:`MAX_BITS` bits, so no input costs more than a few
microseconds per character.
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_CHARS = 200
"""The longest expression read; a result a step concludes with is a few dozen characters."""
MAX_BITS = 2048
"""The largest numerator or denominator a value may reach (``x^8`` of a point is 88 bits)."""
MAX_POWER = 8
"""The largest whole exponent read (``x^2``, ``1.05^3``); a larger one gives ``None``."""
MAX_DEPTH = 16
"""The deepest nesting of parentheses read (the parser recurses once per level)."""
POINTS: tuple[dict[str, Fraction], ...] = tuple(
    {chr(ord("a") + k): Fraction(prime, denominator) + k for k, prime in enumerate(primes)}
    for primes, denominator in (
        ((101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163,
          167, 173, 179, 181, 191, 193, 197, 199, 211, 223, 227, 229, 233), 7),
        ((239, 241, 251, 257, 263, 269, 271, 277, 281, 283, 293, 307, 311,
          313, 317, 331, 337, 347, 349, 353, 359, 367, 373, 379, 383, 389), 11),
    ))
"""Where each unknown ``a``-``z`` is evaluated: two points of distinct, non-integer values."""

_TOKEN = re.compile(r"\d+(?:\.\d+)?|\.\d+|[a-z]|[-+*/^()]")


class _Unreadable(Exception):
    """The expression is outside what this module reads (or too large); the caller gets None."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None:
            raise _Unreadable(text[pos])
        out.append(found.group(0))
        pos = found.end()
    depth = 0
    for token in out:
        depth += {"(": 1, ")": -1}.get(token, 0)
        if depth > MAX_DEPTH:
            raise _Unreadable("too deep")
    for left, right in zip(out, out[1:]):
        if left.isalpha() and right.isalpha():
            raise _Unreadable("a word")  # "eggs", "xy": a unit or a name, not a product
    return out


def _check(value: Fraction) -> Fraction:
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise _Unreadable("too large")
    return value


class _Parser:
    """Recursive descent over the tokens, evaluating at one point:
    sum := term (("+"|"-") term)*; term := unary (("*"|"/") unary | implicit product)*;
    unary := ("-"|"+") unary | power; power := atom ("^" unary)?; atom := number | letter | "(" sum ")".
    """

    def __init__(self, tokens: list[str], point: dict[str, Fraction]) -> None:
        self.tokens, self.point, self.at = tokens, point, 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise _Unreadable("ends early")
        self.at += 1
        return token

    def whole(self) -> Fraction:
        value = self.sum()
        if self.peek() is not None:
            raise _Unreadable(f"unexpected {self.peek()}")
        return value

    def sum(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            sign = self.take()
            right = self.term()
            value = _check(value + right if sign == "+" else value - right)
        return value

    def term(self) -> Fraction:
        value = self.unary()
        while True:
            token = self.peek()
            if token in ("*", "/"):
                self.take()
                right = self.unary()
                if token == "/" and right == 0:
                    raise ZeroDivisionError
                value = _check(value * right if token == "*" else value / right)
            elif token is not None and (token == "(" or token.isalpha() or token[0].isdigit() or token[0] == "."):
                value = _check(value * self.power())  # 2x, 3(x+1), (a)(b)
            else:
                return value

    def unary(self) -> Fraction:
        if self.peek() in ("-", "+"):
            sign = self.take()
            value = self.unary()
            return -value if sign == "-" else value
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        exponent = self.unary()
        if exponent.denominator != 1 or abs(exponent.numerator) > MAX_POWER:
            raise _Unreadable("power")
        if exponent < 0 and base == 0:
            raise ZeroDivisionError
        return _check(base ** int(exponent))

    def atom(self) -> Fraction:
        token = self.take()
        if token == "(":
            value = self.sum()
            if self.take() != ")":
                raise _Unreadable("unclosed")
            return value
        if token.isalpha():
            return self.point[token]
        if token[0].isdigit() or token[0] == ".":
            return Fraction(token)
        raise _Unreadable(token)


def unknowns(expression: str) -> frozenset[str]:
    """The one-letter unknowns an expression names (none for a number or a sum of numbers)."""
    return frozenset(re.findall(r"(?<![a-z])[a-z](?![a-z])", expression))


def values(expression: str) -> tuple[Fraction | None, ...] | None:
    """The expression's exact value at each of :data:`POINTS` (``None`` at a point where it
    divides by zero), or ``None`` when it is not an expression this module reads (see the module
    docstring) or divides by zero everywhere. ``expression`` is a normalised formula's side:
    lower case, no spaces, ``\\frac`` already ``(a)/(b)``."""
    if not expression or len(expression) > MAX_CHARS:
        return None
    try:
        tokens = _tokens(expression)
    except _Unreadable:
        return None
    out: list[Fraction | None] = []
    for point in POINTS:
        try:
            out.append(_Parser(tokens, point).whole())
        except ZeroDivisionError:
            out.append(None)
        except _Unreadable:
            return None
    return tuple(out) if any(v is not None for v in out) else None


def same_value(left: tuple[Fraction | None, ...], right: tuple[Fraction | None, ...]) -> bool:
    """Whether two expressions' :func:`values` agree at every point where both are defined."""
    return all(x == y for x, y in zip(left, right) if x is not None and y is not None)
