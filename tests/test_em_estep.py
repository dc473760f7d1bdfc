"""The E-step as pure functions, driven by a deterministic scorer on crafted multi-sentence pairs."""

from __future__ import annotations

from typing import Sequence

import pytest

from equiv.data.records import PairRecord
from equiv.errors import InputError
from equiv.judge import em
from equiv.judge.em import EMConfig, e_step


def exact_scorer(pairs: Sequence[tuple[str, str]]) -> list[float]:
    """Identical sentences (ignoring case and final period) are equivalent with 0.99, others 0.1."""

    def norm(s: str) -> str:
        return s.strip().rstrip(".").lower()

    return [0.99 if norm(a) == norm(b) else 0.1 for a, b in pairs]


def table_scorer(table: dict[tuple[str, str], float]):
    calls: list[list[tuple[str, str]]] = []

    def score(pairs: Sequence[tuple[str, str]]) -> list[float]:
        calls.append(list(pairs))
        return [table.get((a, b), 0.0) for a, b in pairs]

    score.calls = calls  # type: ignore[attr-defined]
    return score


def test_shared_sentence_is_removed_from_a_not_equivalent_pair() -> None:
    pairs = [("We know x is 4. So y is 8.", "We know x is 4. So y is 9.")]
    result = e_step(pairs, [0], exact_scorer, EMConfig())
    (out,) = result.outcomes
    assert out.status == em.CHANGED
    assert (out.sentence1, out.sentence2) == ("So y is 8.", "So y is 9.")
    assert out.removed == ((0, 0, 0.99),)
    assert result.stats["samples_examined"] == 1
    assert result.stats["samples_changed"] == 1
    assert result.stats["sentences_removed"] == 2
    assert result.stats["samples_dropped"] == 0
    assert result.stats["subpairs_scored"] == 4  # 2 x 2 grid
    assert result.stats["prob_max"] == pytest.approx(0.99)


def test_greedy_matching_finds_reordered_sentences_and_aligned_does_not() -> None:
    pairs = [("Add 2 and 3. Then double it. The answer is 10.", "Then double it. Add 2 and 3. The answer is 12.")]
    greedy = e_step(pairs, [0], exact_scorer, EMConfig(pairing="greedy")).outcomes[0]
    assert greedy.status == em.CHANGED
    assert (greedy.sentence1, greedy.sentence2) == ("The answer is 10.", "The answer is 12.")
    assert sorted((i, j) for i, j, _ in greedy.removed) == [(0, 1), (1, 0)]
    aligned = e_step(pairs, [0], exact_scorer, EMConfig(pairing="aligned"))
    assert aligned.outcomes[0].status == em.UNCHANGED
    assert aligned.stats["subpairs_scored"] == 3


def test_matching_is_one_to_one_and_highest_first() -> None:
    s1 = "A one. A two."
    s2 = "B one. B two."
    table = {("A one.", "B one."): 0.95, ("A one.", "B two."): 0.97, ("A two.", "B two."): 0.96}
    out = e_step([(s1, s2)], [0], table_scorer(table), EMConfig(threshold=0.9, both_sides_empty="keep")).outcomes[0]
    # 0.97 (A one, B two) first; then A two and B one are left, scored 0.0 -> only one match.
    assert [(i, j) for i, j, _ in out.removed] == [(0, 1)]
    assert (out.sentence1, out.sentence2) == ("A two.", "B one.")


def test_labels_are_untouched_and_only_refine_labels_are_examined() -> None:
    records = [
        PairRecord("Same start. Different end one.", "Same start. Different end two.", 0, source="a:1"),
        PairRecord("Same start. Equal end.", "Same start. Equal end too.", 4, source="a:2"),
    ]
    pairs = [(r.sentence1, r.sentence2) for r in records]
    result = e_step(pairs, [0, 1], exact_scorer, EMConfig())
    assert [o.status for o in result.outcomes] == [em.CHANGED, em.SKIPPED_LABEL]
    overrides = em.merge_outcomes(records, {}, [0, 1], result.outcomes, cumulative=False)
    refined = em.apply_overrides(records, overrides)
    assert [r.result for r in refined] == [0, 4]
    assert [r.source for r in refined] == ["a:1", "a:2"]
    assert refined[0].sentence1 == "Different end one."
    assert refined[1] is records[1]
    both = e_step(pairs, [0, 1], exact_scorer, EMConfig(refine_labels=(0, 1))).outcomes
    assert both[1].status == em.CHANGED


def test_fully_matched_pair_is_dropped_or_kept() -> None:
    pairs = [("X is 2. Y is 3.", "Y is 3. X is 2.")]
    dropped = e_step(pairs, [0], exact_scorer, EMConfig())
    assert dropped.outcomes[0].status == em.DROPPED
    assert dropped.stats["samples_dropped"] == 1
    assert dropped.stats["sentences_removed"] == 0
    kept = e_step(pairs, [0], exact_scorer, EMConfig(both_sides_empty="keep")).outcomes[0]
    assert kept.status == em.BOTH_SIDES_EMPTY_KEPT
    assert (kept.sentence1, kept.sentence2) == pairs[0]


def test_one_side_empty_keeps_the_original_or_drops() -> None:
    pairs = [("X is 2. Then Y is 5.", "X is 2.")]
    kept = e_step(pairs, [0], exact_scorer, EMConfig()).outcomes[0]
    assert kept.status == em.ONE_SIDE_EMPTY_KEPT
    assert (kept.sentence1, kept.sentence2) == pairs[0]
    assert kept.examined  # examined, just not changed
    dropped = e_step(pairs, [0], exact_scorer, EMConfig(one_side_empty="drop")).outcomes[0]
    assert dropped.status == em.DROPPED


def test_single_sentence_and_long_samples_are_skipped_without_scoring() -> None:
    scorer = table_scorer({})
    pairs = [("Only one.", "Only one."), ("Go on. " * 5 + "End.", "Be. Two.")]
    settings = EMConfig(max_sentences=4)
    result = e_step(pairs, [0, 0], scorer, settings)
    assert [o.status for o in result.outcomes] == [em.SKIPPED_SINGLE, em.SKIPPED_LONG]
    assert scorer.calls == []  # type: ignore[attr-defined]
    assert result.stats["samples_examined"] == 0
    assert result.stats["samples_skipped_long"] == 1


def test_threshold_is_strict() -> None:
    pairs = [("P one. P two.", "Q one. Q two.")]
    table = {("P one.", "Q one."): 0.9}
    assert e_step(pairs, [0], table_scorer(table), EMConfig(threshold=0.9)).outcomes[0].status == em.UNCHANGED
    assert e_step(pairs, [0], table_scorer(table), EMConfig(threshold=0.89)).outcomes[0].status == em.CHANGED


def test_math_sentences_stay_intact_and_text_is_preserved() -> None:
    s1 = "Let $f(x) = 2.5x. Then$ holds. We get $f(2) = 5$.\nSo the answer is 5."
    s2 = "Let $f(x) = 2.5x. Then$ holds. So the answer is 6."
    out = e_step([(s1, s2)], [0], exact_scorer, EMConfig()).outcomes[0]
    assert out.status == em.CHANGED
    assert out.sentence1 == "We get $f(2) = 5$.\nSo the answer is 5."
    assert out.sentence2 == "So the answer is 6."


def test_scorer_gets_one_batched_call_and_probability_stats() -> None:
    scorer = table_scorer({("A1.", "B1."): 0.5, ("A2.", "B2."): 1.0})
    pairs = [("A1. A2.", "B1. B2."), ("C1. C2.", "D1. D2.")]
    result = e_step(pairs, [0, 0], scorer, EMConfig(pairing="aligned", threshold=0.95))
    assert len(scorer.calls) == 1  # type: ignore[attr-defined]
    assert result.probabilities == [0.5, 1.0, 0.0, 0.0]
    assert result.stats["prob_mean"] == pytest.approx(0.375)
    assert result.stats["prob_p50"] == pytest.approx(0.25)
    assert result.stats["subpairs_above_threshold"] == 1


def test_cumulative_merge_composes_and_non_cumulative_starts_over() -> None:
    records = [PairRecord("S1. S2. S3.", "S1. T2. S3.", 0)]
    first = em.merge_outcomes(records, {}, [0], e_step([("S1. S2. S3.", "S1. T2. S3.")], [0],
                              lambda ps: [0.99 if ps_i == ("S1.", "S1.") else 0.0 for ps_i in ps], EMConfig()).outcomes, True)
    assert first == {0: ("S2. S3.", "T2. S3.")}
    indices, current = em.current_pairs(records, first)
    assert (indices, current) == ([0], [("S2. S3.", "T2. S3.")])
    second_out = e_step(current, [0], exact_scorer, EMConfig()).outcomes
    assert em.merge_outcomes(records, first, indices, second_out, cumulative=True) == {0: ("S2.", "T2.")}
    fresh = e_step([("S1. S2. S3.", "S1. T2. S3.")], [0], lambda ps: [0.0] * len(ps), EMConfig()).outcomes
    assert em.merge_outcomes(records, first, [0], fresh, cumulative=False) == {}
    dropped = em.merge_outcomes(records, first, [0], [em.SampleOutcome(0, em.DROPPED, None, None)], cumulative=True)
    assert em.apply_overrides(records, dropped) == []


def test_fingerprint_changes_with_data() -> None:
    a = [PairRecord("x", "y", 0)]
    assert em.fingerprint(a) == em.fingerprint([PairRecord("x", "y", 0)])
    assert em.fingerprint(a) != em.fingerprint([PairRecord("x", "y", 1)])


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"threshold": 1.0}, "em.threshold"),
        ({"pairing": "hungarian"}, "em.pairing"),
        ({"max_sentences": 0}, "em.max_sentences"),
        ({"refine_labels": (2,)}, "em.refine_labels"),
        ({"one_side_empty": "nope"}, "em.one_side_empty"),
        ({"both_sides_empty": "nope"}, "em.both_sides_empty"),
    ],
)
def test_bad_settings_are_input_errors(kwargs, field) -> None:
    with pytest.raises(InputError) as err:
        EMConfig(**kwargs)
    assert err.value.field == field


def test_scorer_returning_wrong_count_fails() -> None:
    with pytest.raises(ValueError, match="probabilities"):
        e_step([("Aa. Bb.", "Cc. Dd.")], [0], lambda ps: [0.5], EMConfig())


def test_unpunctuated_split_setting_reaches_the_e_step() -> None:
    pairs = [("He has 3 apples He buys 2 more", "He has 3 apples He sells 1")]
    on = e_step(pairs, [0], exact_scorer, EMConfig()).outcomes[0]
    assert (on.status, on.sentence1, on.sentence2) == (em.CHANGED, "He buys 2 more", "He sells 1")
    off = e_step(pairs, [0], exact_scorer, EMConfig(split_unpunctuated=False)).outcomes[0]
    assert off.status == em.SKIPPED_SINGLE
