"""Every verdict (merged, reason) the one evaluator gives on every shipped labelled pair file in the
repository, under a few policies and a deterministic scorer, pinned in
``tests/data/decide_verdicts.json``.

Why: refactors of the decision path (the order of its stages, the judge interface, the caches)
must change no verdict. The scorer is a hash of the ordered pair (:func:`hash_probability`), so the
probabilities spread over [0, 1] and every stage (threshold, floor, guard, restatement) decides
some pairs, with no model, no torch and no float drift between machines. The snapshot was first
computed with the code before the rules moved ahead of the model (issue #54), so the test holds the
new order to the old verdicts. It was regenerated once since, when every pair came to be decided in
its canonical order (issue #53 item 11; :func:`equiv.data.tokenize.canonical_pair`): the hash of the
ordered pair then reads the sorted texts, which moved 556 of 14,672 (file, policy, pair) verdicts,
each a pair whose ``sentence1`` sorts after its ``sentence2`` and which a model stage decided; the
old code run on the sorted pairs gives the new snapshot exactly. Regenerated again (2026-11-28)
when the statement floor's predicate came to read LaTeX arithmetic (:func:`equiv.text.guard.computes`,
units in ``\\text{}`` dropped): 13 of 16,004 verdicts moved, 12 on the Qwen siblings and 1 on
``no_formula_pairs.jsonl``, each a pair of LaTeX computations the floor used to hold as
statements. Regenerated once more (2026-11-28) for the pinned policies alone, when the guard
gained ``different_algebra``: no verdict moved; and for ``different_assignment``: none moved.
Regenerated (2026-11-29) when the guard gained ``changed_comparison``: 17 of 22,772 verdicts
moved, every one on a non-equivalent pair (levels 0-1) of the gemma-3-270m sibling files, each
now ``guard:changed_comparison`` (3 of them were merges). Regenerated (2026-11-30) when the
restatement rule gained ``same boxed answer``: 85 of 22,772 verdicts moved, every one on an
equivalent pair of the two Qwen2.5-Coder-1.5B sibling files, each now ``restated`` (62 of them
were kept apart). Regenerated (2026-11-30) when the readers of a step's arithmetic and conclusion
came to read a Markdown-escaped dollar sign (``\\$310``) as ``$`` and an operand's label in
parentheses (``$70 (Monday) + $50``): 6 of 22,772 verdicts moved, every one on an equivalent pair
of the two Qwen2.5-Coder-1.5B sibling files, now merged (5 held by the floor as if they computed
nothing, 1 vetoed by ``different_result``, which had read ``= \\$310`` as no conclusion).
Extended (2026-11-30) with the 1,273 pairs of ``gsm8k_train_siblings_qwen_w10_first_steps.jsonl``
when that file was added: no verdict of the other files moved (the pinned verdicts are 27,864).
Regenerated (2026-12-01) when the prefilter moved after the rules (it spares the model, not the
rules that read words): 5,290 of 27,864 verdicts moved, every one from ``prefiltered``: 5,228 to a
guard rule's veto (kept apart as before, the reason now the rule's) and 62 to ``restated`` (31
pairs under each of the two policies with the restatement rule on, on the two gemma-3-270m and
two Qwen2.5-Coder-1.5B sibling files), every one of the 31 pairs labelled equivalent (levels 3-4).
Regenerate only after a deliberate
change of verdicts::

    python -m tests.helpers.verdict_snapshot --update
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from equiv.judge.decide import decide
from equiv.judge.policy import DecisionPolicy
from equiv.text.guard import rule_names
from tests.helpers.guard_corpus import SHARED_PREFIX, labelled_files
from tests.helpers.paths import REPO_ROOT

SNAPSHOT = REPO_ROOT / "tests" / "data" / "decide_verdicts.json"


def policies() -> dict[str, DecisionPolicy]:
    """The policies pinned: every stage on (the shipped recipe's shape), the floor off, the guard
    off, and a rule strategy's (whitespace shortcut, no prefilter, ``>``)."""
    every = rule_names()
    return {
        "full": DecisionPolicy(threshold=0.5, prefilter=0.75, guard=every, floor=0.9),
        "no_floor": DecisionPolicy(threshold=0.5, prefilter=0.75, guard=every, floor=None),
        "no_guard": DecisionPolicy(threshold=0.6, prefilter=0.75, guard=(), floor=0.8),
        "rules": DecisionPolicy(threshold=0.3, prefilter=None, guard=every, floor=0.7, same_step="whitespace",
                                compare=">"),
    }


def hash_probability(a: str, b: str) -> float:
    """A deterministic probability for the ordered pair (the scorer every snapshot run uses)."""
    digest = hashlib.sha256(a.encode("utf-8") + b"\x00" + b.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def hash_scorer(pairs: list[tuple[str, str]]) -> list[float]:
    return [hash_probability(a, b) for a, b in pairs]


def repo_files() -> dict[str, Path]:
    """The labelled pair files the repository ships (the shared data is not always beside it)."""
    return {key: path for key, path in labelled_files().items() if not key.startswith(SHARED_PREFIX)}


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def encode(merged: bool, reason: str) -> str:
    return f"{int(merged)} {reason}"


def file_verdicts(path: Path, policy: DecisionPolicy) -> dict[str, str]:
    """id -> ``"<merged 0/1> <reason>"`` for every pair of one file under ``policy``."""
    rows = read_rows(path)
    pairs = [(row["sentence1"], row["sentence2"]) for row in rows]
    questions = [row.get("question") or "" for row in rows]
    found = decide(pairs, policy, hash_scorer, questions)
    return {row["id"]: encode(v.merged, v.reason) for row, v in zip(rows, found)}


def snapshot() -> dict[str, object]:
    return {"policies": {name: p.to_dict() for name, p in policies().items()},
            "verdicts": {key: {name: file_verdicts(path, p) for name, p in policies().items()}
                         for key, path in sorted(repo_files().items())}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {SNAPSHOT}")
    args = parser.parse_args(argv)
    text = json.dumps(snapshot(), indent=0, sort_keys=True) + "\n"
    if args.update:
        SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOT}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
