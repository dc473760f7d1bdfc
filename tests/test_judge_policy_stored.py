"""The decision policy is the only stored form of a judge's decision (issue #54, item 3).

An export stores ``equiv.policy`` and nothing else that decides; an export written before the
policy existed (scattered ``decision_threshold`` / ``prefilter_threshold`` / ``claim_guard`` /
``statement_threshold``) still loads, converted, and decides exactly as the same policy stored
directly; rewriting it leaves the policy alone in the block. The retired ``combine`` field loads
at its one value and is refused at any other.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from equiv.data.records import read_pair_records
from equiv.errors import InputError
from equiv.judge.export import stored_policy, update_policy, update_settings
from equiv.judge.policy import LEGACY_KEYS, DecisionPolicy
from equiv.prune import ModelJudge
from equiv.prune.strategies import STRATEGIES, Strategy
from equiv.prune.yardstick import BARE, baselines, policies
from equiv.text.guard import rule_names
from tests.helpers.judges import SETTINGS, make_tiny_judge

REPO = Path(__file__).resolve().parents[1]
SIBLINGS = REPO / "benchmarks" / "data" / "gsm8k_train_siblings_gemma270m.jsonl"
OLD = dict(SETTINGS, decision_threshold=0.45, prefilter_threshold=0.6, claim_guard=True, statement_threshold=0.9)
"""An export's ``equiv`` block as written before the policy existed."""
NEW_POLICY = DecisionPolicy(threshold=0.45, prefilter=0.6, guard=rule_names(), floor=0.9)
"""The same decision, stored as the policy."""


def _new_format(directory: Path) -> Path:
    block = {k: v for k, v in OLD.items() if k not in LEGACY_KEYS}
    return make_tiny_judge(directory, settings=dict(block, policy=NEW_POLICY.to_dict()))


def _pairs(limit: int = 60) -> tuple[list[tuple[str, str]], list[str]]:
    records, _ = read_pair_records(SIBLINGS)
    records = records[:limit]
    return [(r.sentence1, r.sentence2) for r in records], [r.extra.get("question", "") for r in records]


def _verdicts(directory: Path, pairs, questions) -> list[tuple[float, bool, str]]:
    judge = ModelJudge(directory, device="cpu")
    return [(None if v.probability is None else round(v.probability, 6), v.merged, v.reason)
            for v in judge.pair_verdicts(pairs, questions)]


def test_an_old_format_export_loads_and_decides_as_the_same_policy_stored(tmp_path: Path) -> None:
    old = make_tiny_judge(tmp_path / "old", settings=OLD, legacy=True)
    new = _new_format(tmp_path / "new")
    assert stored_policy(old) == stored_policy(new) == NEW_POLICY
    pairs, questions = _pairs()
    decided = _verdicts(old, pairs, questions)
    assert decided == _verdicts(new, pairs, questions)
    reasons = {reason.split(":")[0] for _, _, reason in decided}
    assert reasons >= {"prefiltered", "guard", "floor"}, reasons  # the stored stages ran


def test_rewriting_an_old_export_leaves_the_policy_alone_and_the_verdicts_as_they_were(tmp_path: Path) -> None:
    old = make_tiny_judge(tmp_path / "old", settings=OLD, legacy=True)
    pairs, questions = _pairs(40)
    before = _verdicts(old, pairs, questions)
    block = update_settings(old, {"note": "rewritten"})
    assert not set(LEGACY_KEYS) & set(block), block  # the scattered keys are gone ...
    assert DecisionPolicy.from_dict(block["policy"]) == NEW_POLICY  # ... converted into the policy
    assert _verdicts(old, pairs, questions) == before
    with pytest.raises(ValueError, match="decision_threshold"):
        update_settings(old, {"decision_threshold": 0.3})  # a change goes through the policy's knobs
    assert update_policy(old, threshold=0.3)["policy"]["threshold"] == 0.3


def test_the_tiny_judge_builder_stores_only_the_policy(tmp_path: Path) -> None:
    from equiv.judge.tiny import build_tiny_judge

    block = json.loads((build_tiny_judge(tmp_path / "t", decision_threshold=0.4) / "config.json").read_text())["equiv"]
    assert not set(LEGACY_KEYS) & set(block)
    assert DecisionPolicy.from_dict(block["policy"]) == DecisionPolicy(threshold=0.4, prefilter=0.75)


def test_the_retired_combine_field_loads_at_its_one_value_and_is_refused_at_another(tmp_path: Path) -> None:
    stored = dict(NEW_POLICY.to_dict(), combine="mean_logit")  # what exports until 2026-11 wrote
    assert DecisionPolicy.from_dict(stored) == NEW_POLICY
    assert "combine" not in NEW_POLICY.to_dict()
    directory = make_tiny_judge(tmp_path / "j", settings=dict(SETTINGS, policy=dict(stored, combine="max")))
    shutil.rmtree(tmp_path / "j" / "members", ignore_errors=True)
    with pytest.raises(InputError) as err:
        ModelJudge(directory, device="cpu")
    line = str(err.value)
    assert "\n" not in line and "config.json" in line and "policy.combine" in line and "'max'" in line


def test_the_yardstick_takes_its_baselines_from_the_strategy_registry() -> None:
    marked = [entry.name for entry in STRATEGIES.entries() if entry.baseline]
    assert set(baselines()) == set(marked) >= {"levenshtein", "formula"}
    table = policies()
    assert table["levenshtein 0.95"].policy == replace(BARE, threshold=0.95, compare=">")
    assert table["formula"].score == "formula" and table["formula+guard"].policy.guard == rule_names()

    class Half:  # a rule judge registered by a user: its score and its default policy
        policy = DecisionPolicy(threshold=0.5, prefilter=None)

        @staticmethod
        def score(a: str, b: str) -> float:
            return 0.5

    with STRATEGIES.temporarily(Strategy("half", lambda cfg: Half(), "test rule", baseline=True)):
        assert "half 0.5" in policies() and "half" in baselines()
    assert "half 0.5" not in policies()


def test_an_export_stored_before_a_rule_was_added_keeps_the_rules_it_stored(tmp_path: Path) -> None:
    """The stored policy names its rules: a rule added later (``changed_comparison``, 2026-11-29)
    does not reach an export made before it; ``guard: true`` as a knob applies every rule."""
    from equiv.judge.decide import decide

    before = [name for name in rule_names() if name != "changed_comparison"]
    block = {k: v for k, v in OLD.items() if k not in LEGACY_KEYS}
    export = make_tiny_judge(tmp_path / "old", settings=dict(block, policy=dict(NEW_POLICY.to_dict(), guard=before)))
    policy = stored_policy(export)
    assert list(policy.guard) == before
    pair, question = ("Debora has 12 more dresses", "Debora has 12 dresses:"), "How many dresses?"
    sure = lambda pairs: [0.99] * len(pairs)  # noqa: E731
    assert decide([pair], policy, sure, [question])[0].merged
    every = decide([pair], policy.with_knobs(guard=True), sure, [question])[0]
    assert not every.merged and every.reason == "guard:changed_comparison"


def test_a_fit_that_attaches_the_statement_floor_keeps_the_restatement_rule_with_it(tmp_path: Path) -> None:
    """Issue 65: the recipe's ``floor: 0.9`` is stored on an export written without a floor, where the
    restatement rule had resolved off; it must be on with the floor, as the recipe was adopted
    (docs/experiments/2026-11-27-restated-statements-pass-the-floor.md)."""
    from equiv.judge.cli import attach_statement_floor
    from equiv.judge.tiny import build_tiny_judge

    judge = build_tiny_judge(tmp_path / "judge")
    assert stored_policy(judge).floor is None and stored_policy(judge).restate is False
    attach_statement_floor(judge, 0.9)
    policy = stored_policy(judge)
    assert policy.floor == 0.9 and policy.restate is True and policy.plan_floor is None
    attach_statement_floor(judge, 0.7, 0.9)  # the recipe's floors: statements 0.7, numbered plans 0.9
    policy = stored_policy(judge)
    assert (policy.floor, policy.plan_floor, policy.restate) == (0.7, 0.9, True)
