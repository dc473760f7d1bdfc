"""Synthetic GSM8K-style demo pairs in the MathEquiv schema, generated deterministically.

Why synthetic: the demo must train on a fresh machine with no hub access, and the repository must
not redistribute other people's data. So the demo set is made here from templates: small word
problems (buying boxes, sharing, spending, adding up) whose reasoning steps are written several
ways. Each pair is graded on the MathEquiv five-level scale by construction:

* 4 -- the same computation in the same order, worded differently;
* 3 -- the same computation with operands reordered or the result stated first;
* 2 -- a bare claim of the result against a worked computation (cannot judge the method);
* 1 -- the same result reached by a different method (repeated addition, a different split);
* 0 -- a different computation (wrong operation or wrong operand).

About a quarter of the pairs are multi-sentence steps (two sentences per side) whose first
sentences are paraphrases of each other and whose second sentences decide the grade, so a
"not equivalent" pair often contains an equivalent sentence sub-pair -- the situation EM
refinement exists for. ``equiv demo_data [OUT_DIR]`` (``python -m equiv.data.demo [OUT_DIR]``)
rewrites the shipped files, or writes them to OUT_DIR; a test checks that the shipped files are
exactly what this module generates.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from equiv.data.records import PairRecord, write_pair_records

DEMO_DIR = Path(__file__).resolve().parent / "demo_data"
DEMO_SIZES = {"train": 640, "valid": 160}
DEMO_SEEDS = {"train": 1, "valid": 2}

NAMES = ["Ava", "Ben", "Carla", "Dev", "Elif", "Femi", "Grace", "Hugo", "Iris", "Jon", "Kemal", "Lena"]
ITEMS = ["pencils", "apples", "stickers", "marbles", "cookies", "cards", "eggs", "books"]


@dataclass(frozen=True)
class Facts:
    """The numbers of one templated problem: ``a`` groups of ``b`` items, then ``c`` more or less."""

    name: str
    item: str
    a: int
    b: int
    c: int

    @property
    def product(self) -> int:
        return self.a * self.b

    @property
    def total(self) -> int:
        return self.a * self.b + self.c


Writer = Callable[[Facts, random.Random], str]

# Steps that multiply a * b, same order (level 4 among themselves).
MULTIPLY_SAME: list[Writer] = [
    lambda f, r: f"{f.name} buys {f.a} boxes with {f.b} {f.item} each, so {f.name} has {f.a} * {f.b} = {f.product} {f.item}.",
    lambda f, r: f"There are {f.a} boxes and each box holds {f.b} {f.item}, so there are {f.a} * {f.b} = {f.product} {f.item}.",
    lambda f, r: f"{f.a} boxes of {f.b} {f.item} make {f.a} x {f.b} = {f.product} {f.item} in total.",
    lambda f, r: f"The number of {f.item} is {f.a} * {f.b} = {f.product}.",
]
# The same product, operands reordered or result first (level 3 against MULTIPLY_SAME).
MULTIPLY_REORDERED: list[Writer] = [
    lambda f, r: f"Each of the boxes has {f.b} {f.item}, and {f.b} * {f.a} = {f.product}, so {f.name} has {f.product} {f.item}.",
    lambda f, r: f"{f.name} has {f.product} {f.item}, because {f.b} times {f.a} is {f.product}.",
]
# Same result, different method (level 1 against MULTIPLY_SAME).
MULTIPLY_OTHER_METHOD: list[Writer] = [
    lambda f, r: f"{f.name} adds up the boxes one at a time: " + " + ".join([str(f.b)] * f.a) + f" = {f.product} {f.item}.",
    lambda f, r: f"Half of the {f.a} boxes hold {f.b * f.a // 2} {f.item} and the rest hold {f.product - f.b * f.a // 2}, so {f.name} has {f.product} {f.item}.",
]
# A different computation (level 0 against MULTIPLY_SAME).
MULTIPLY_WRONG: list[Writer] = [
    lambda f, r: f"{f.name} buys {f.a} boxes with {f.b} {f.item} each, so {f.name} has {f.a} + {f.b} = {f.a + f.b} {f.item}.",
    lambda f, r: f"There are {f.a} boxes and each box holds {f.b} {f.item}, so there are {f.a} * {f.b + 1} = {f.a * (f.b + 1)} {f.item}.",
    lambda f, r: f"The number of {f.item} is {f.product} - {f.b} = {f.product - f.b}.",
]
# A bare claim of the result (level 2 against a worked step).
MULTIPLY_BARE: list[Writer] = [
    lambda f, r: f"So {f.name} ends up with some {f.item} from the boxes.",
    lambda f, r: f"{f.name} counts the {f.item} in the boxes.",
]
# Second sentences for multi-sentence steps: what happens to the c extra items.
SECOND_SAME: list[Writer] = [
    lambda f, r: f"Then {f.name} gets {f.c} more, so {f.product} + {f.c} = {f.total} {f.item}.",
    lambda f, r: f"After {f.c} more {f.item} arrive, {f.name} has {f.product} + {f.c} = {f.total}.",
    lambda f, r: f"Adding the {f.c} extra {f.item} gives {f.product} + {f.c} = {f.total} {f.item}.",
]
SECOND_WRONG: list[Writer] = [
    lambda f, r: f"Then {f.name} gives away {f.c}, so {f.product} - {f.c} = {f.product - f.c} {f.item}.",
    lambda f, r: f"After sharing with {f.c} friends, each friend gets {f.product} / {f.c} = {f.product // f.c} {f.item}.",
    lambda f, r: f"Adding the {f.c} extra {f.item} gives {f.product} * {f.c} = {f.product * f.c} {f.item}.",
]


def _facts(rng: random.Random) -> Facts:
    return Facts(
        name=rng.choice(NAMES),
        item=rng.choice(ITEMS),
        a=rng.randint(2, 6),
        b=rng.randint(3, 15),
        c=rng.randint(2, 9),
    )


def _two(rng: random.Random, writers: list[Writer]) -> tuple[Writer, Writer]:
    first, second = rng.sample(range(len(writers)), 2)
    return writers[first], writers[second]


def _single_pair(rng: random.Random, f: Facts) -> tuple[str, str, int]:
    """One single-sentence pair; the grade is chosen so classes are roughly balanced."""
    kind = rng.choices(["same", "reordered", "method", "wrong", "bare"], weights=[30, 15, 15, 30, 10])[0]
    if kind == "same":
        w1, w2 = _two(rng, MULTIPLY_SAME)
        return w1(f, rng), w2(f, rng), 4
    base = rng.choice(MULTIPLY_SAME)(f, rng)
    if kind == "reordered":
        return base, rng.choice(MULTIPLY_REORDERED)(f, rng), 3
    if kind == "method":
        return base, rng.choice(MULTIPLY_OTHER_METHOD)(f, rng), 1
    if kind == "wrong":
        return base, rng.choice(MULTIPLY_WRONG)(f, rng), 0
    return base, rng.choice(MULTIPLY_BARE)(f, rng), 2


def _multi_pair(rng: random.Random, f: Facts) -> tuple[str, str, int]:
    """Two sentences per side; the first sentences are always equivalent paraphrases."""
    a1, a2 = _two(rng, MULTIPLY_SAME)
    if rng.random() < 0.45:
        b1, b2 = _two(rng, SECOND_SAME)
        return f"{a1(f, rng)} {b1(f, rng)}", f"{a2(f, rng)} {b2(f, rng)}", 4
    b1 = rng.choice(SECOND_SAME)
    b2 = rng.choice(SECOND_WRONG)
    return f"{a1(f, rng)} {b1(f, rng)}", f"{a2(f, rng)} {b2(f, rng)}", rng.choice([0, 1])


def generate_demo_pairs(n: int, seed: int) -> list[PairRecord]:
    """``n`` demo pairs from a seeded generator (same ``n`` and ``seed`` give the same pairs)."""
    rng = random.Random(seed)
    out: list[PairRecord] = []
    for index in range(n):
        f = _facts(rng)
        multi = rng.random() < 0.25
        s1, s2, level = _multi_pair(rng, f) if multi else _single_pair(rng, f)
        if rng.random() < 0.5:
            s1, s2 = s2, s1
        extra = {"id": f"demo-{seed}-{index}", "multi_sentence": multi, "synthetic": True}
        out.append(PairRecord(s1, s2, level, reasoning_step=2 if multi else 1, extra=extra))
    return out


def write_demo_data(out_dir: str | Path = DEMO_DIR) -> dict[str, Path]:
    """Write ``train.jsonl`` and ``valid.jsonl`` of the demo set into ``out_dir``."""
    out = Path(out_dir)
    paths = {}
    for split, n in DEMO_SIZES.items():
        paths[split] = out / f"{split}.jsonl"
        write_pair_records(generate_demo_pairs(n, DEMO_SEEDS[split]), paths[split])
    return paths


def build_parser() -> Any:
    """The command's parser (jsonargparse through :func:`equiv.cliargs.command_parser`): the same
    ``--help`` layout and one-line errors as every command."""
    from equiv.cliargs import command_parser

    p = command_parser("python -m equiv.data.demo", "Write the synthetic demo pairs (train.jsonl, valid.jsonl).")
    p.add_argument("out", nargs="?", default=str(DEMO_DIR),
                   help="directory to write them to (default: the shipped equiv/data/demo_data)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``equiv demo_data [OUT_DIR]``; returns the exit status."""
    from equiv.cliargs import parse_or_refuse
    from equiv.errors import exit_on_input_error, writable_directory

    args = parse_or_refuse(build_parser(), sys.argv[1:] if argv is None else argv)  # a bad option: one line, exit 2
    with exit_on_input_error():
        out = writable_directory(args.out, option="OUT_DIR")  # created; never a file, a FIFO or a dangling link
        for split, path in write_demo_data(out).items():
            print(f"{split}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
