"""The restatement rule: two steps that compute nothing and say the same thing in other words.

The statement floor (:func:`equiv.text.guard.computes_nothing`) holds back a merge of two steps
that both compute nothing unless the judge is very sure, because the judge learned equivalence
from steps that compute. Its price is recall on sibling steps from search, where the commonest
equivalent pairs a small policy samples are plain rewordings of a statement ("There was 40 people
in the hall." / "There were 40 people in the hall.") or the final answer with and without its
unit ("The answer is 21." / "The answer is 21 gallons."). This rule finds those two kinds by
reading the words, so the floor can let them through without trusting the model's score:

- ``same words``: the steps state the same content words and numbers in the same order once
  function words are set aside (RUBRIC.md: "Wording, word order, filler words ("So", "Thus"), and
  formatting do not matter"). Words that carry a claim of their own are never set aside, though
  :data:`equiv.text.normalize.FUNCTION_WORDS` lists them: negation ("not", "no"), comparison
  ("than", "more", "less"), quantifiers ("each", "every", "all", "both", "per", "only"), order
  ("before", "after"), the connectives ("and", "or") that join two claims, and the personal
  pronouns ("he" / "she": two people). Numbers keep their
  order, so "18 votes for A and 20 for B" and "20 votes for A and 18 for B" differ.
- ``same answer``: both steps state the final answer ("The answer is ...") as one and the same
  number, and the words besides it on one side are among the other's (RUBRIC.md, level 3: "one
  names the unit or restates a given fact in passing"): "The answer is 4200." / "The answer is 4200
  miles.", not "The answer is 15 apples." / "The answer is 15 dollars.".
- ``same boxed answer``: each step boxes one final answer (LaTeX ``boxed``, the policy's own mark
  of the answer it concludes) and it is the same number: "Therefore, the total number of miles
  Molly rode her bike is [boxed 3285]." / "Therefore, the total distance Molly rode her bike is:
  [boxed 3285]". The words around a box name the answer's quantity in the policy's own phrasing,
  which siblings vary freely; the box says what the step concludes. On the bundled 1.5B's
  development siblings every pair of statements boxing the same number is labelled equivalent (85
  pairs); the judge kept 36 of them apart, and this kind merges 27 (the other 9 stop at the
  prefilter, before any rule) (docs/experiments/2026-11-30-boxed-answers.md). A box
  holding anything but one number (a fraction, an equation) is not read (:func:`boxed_answer`).

All three kinds are symmetric by construction (an equality of keys or values; a subset test tried both ways) and
only read steps that compute nothing: a computation's operator is not a word, so two computations
with the same numbers could differ in it. The guard's veto rules run before this rule in
:func:`equiv.judge.decide.decide`; a pair one of them vetoes is never restated.

Measured on every shipped labelled file before it was adopted
(docs/experiments/2026-11-27-restated-statements-pass-the-floor.md): among the pairs no guard rule
vetoes it merges 48, every one labelled equivalent; the corpus snapshot
(``tests/data/guard_corpus.json``) pins them per file, so a change to the rule shows its price.
"""

from __future__ import annotations

import re
from decimal import Decimal

from equiv.text.guard import computes_nothing
from equiv.text.normalize import BOXED, NUMBER, is_function_word, number_value, stem, strip_notes, unescaped_dollars

SAME_WORDS = "same words"
SAME_ANSWER = "same answer"
SAME_BOXED = "same boxed answer"

CLAIM_WORDS = frozenset("""
not no nor than more less fewer each every all both per only before after and or
he she him her his hers it its they them their theirs we us our you your i me my mine
""".split())
"""Function words that carry a claim: never set aside when two steps' words are compared. The
personal pronouns are among them: "He has 5 apples." and "She has 5 apples." name two people."""

_TOKEN = re.compile(r"(?<![\w.])(-?)(\d[\d,]*(?:\.\d+)?)(\s*%)?|([A-Za-z]+(?:'[A-Za-z]+)?)")
"""A signed number with its percent sign, or a word: the units two statements are compared in."""
# r"(?:\s*,\s+|\s+)", not r"\s*,?\s+", which tries every split of a run of spaces (issue #53)
_ANSWER = re.compile(r"^\W*(?:(?:so|thus|therefore|hence)(?:\s*,\s+|\s+))?(?:the\s+)?(?:final\s+)?answer\s+"
                     r"(?:is|was|will be|would be|=|:)\s*(.*)$", re.IGNORECASE | re.DOTALL)


def content_key(step: str) -> tuple[str, ...]:
    """The step's content words (stemmed) and numbers (as values), in order, function words that
    carry no claim set aside: what two rewordings of one statement share. A number keeps its
    sign, and a percent sign reads as the word "percent" ("20%" = "20 percent", not "20")."""
    out: list[str] = []
    for sign, digits, percent, word in _TOKEN.findall(strip_notes(step)):
        if digits:
            value = number_value(digits.rstrip(","))
            out.append(sign + (digits if value is None else format(value, "f")))
            if percent:
                out.append("percent")
        elif word.lower() in CLAIM_WORDS or not is_function_word(word.lower()):
            out.append(stem(word.lower()))
    return tuple(out)


def stated_answer(step: str) -> tuple[Decimal, frozenset[str]] | None:
    """The final answer a step states ("The answer is 21 gallons." -> 21, {"gallon"}), when it
    states one as a single number; None otherwise."""
    match = _ANSWER.match(step.strip())
    if match is None:
        return None
    rest = match.group(1)
    values = {value for digits, _ in NUMBER.findall(strip_notes(rest)) if (value := number_value(digits)) is not None}
    if len(values) != 1:
        return None
    words = frozenset(token for token in content_key(rest) if not token.lstrip("-")[:1].isdigit())
    return values.pop(), words


def boxed_answer(step: str) -> Decimal | None:
    """The one number a step boxes (``\\boxed{1,320}`` -> 1320), or None: no box, more than one,
    or a box that holds anything but one number (a dollar sign before it is allowed; a percent
    sign is not: 20% is not the number 20). Linear: the box's text is trimmed by ``str`` methods
    and read by one full match of :data:`~equiv.text.normalize.NUMBER`."""
    boxes = BOXED.findall(step)
    if len(boxes) != 1:
        return None
    content = unescaped_dollars(boxes[0]).strip()
    if content.startswith("$"):
        content = content[1:].lstrip()
    match = NUMBER.fullmatch(content)
    if match is None or match.group(2):
        return None
    return number_value(match.group(1))


def restatement(a: str, b: str) -> str | None:
    """Which kind of restatement two steps are (:data:`SAME_WORDS`, :data:`SAME_ANSWER`,
    :data:`SAME_BOXED`), or None. Only two steps that both compute nothing can be one."""
    if not (computes_nothing(a) and computes_nothing(b)):
        return None
    if content_key(a) == content_key(b):
        return SAME_WORDS
    first, second = stated_answer(a), stated_answer(b)
    if first is not None and second is not None and first[0] == second[0] and (
            first[1] <= second[1] or second[1] <= first[1]):
        return SAME_ANSWER
    boxed = boxed_answer(a)
    if boxed is not None and boxed == boxed_answer(b):
        return SAME_BOXED
    return None
