"""Strategies behind the SiblingJudge interface: rule-based, embedding (bundled MiniLM) and model
(tiny random-init classifiers saved as real Hugging Face directories)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.prune import (
    EmbeddingJudge,
    FormulaJudge,
    LevenshteinJudge,
    ModelJudge,
    PrunerConfig,
    STRATEGIES,
    build_judge,
    group_siblings,
)
from equiv.prune.boundary import SiblingJudge
from tests.helpers.judges import make_tiny_judge

@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory) -> Path:
    return make_tiny_judge(tmp_path_factory.mktemp("judge") / "export")


@pytest.fixture(scope="module")
def model_judge(tiny_judge_dir) -> ModelJudge:
    return ModelJudge(tiny_judge_dir, device="cpu")


# ----------------------------------------------------------------------------- rule-based


def test_every_strategy_is_a_pair_judge():
    for judge in (LevenshteinJudge(), FormulaJudge()):
        assert isinstance(judge, SiblingJudge)


def test_strategy_exact_is_refused_naming_the_search_setting_that_replaces_it():
    """``exact`` could never merge: search.dedupe_exact drops exact copies before the judge is asked."""
    with pytest.raises(InputError) as err:
        build_judge(PrunerConfig(strategy="exact"))
    assert str(err.value) == ("field 'strategy': strategy 'exact' was removed in 2026-11: exact-text dedup is the "
                              "search setting, on by default; use --search.dedupe_exact true with --pruner.strategy none")
    assert "exact" not in STRATEGIES.names()


def test_levenshtein_is_strictly_greater_than_the_threshold():
    a = "abcdefghijklmnopqrst"  # 20 characters; one substitution -> ratio exactly 0.95
    b = "abcdefghijklmnopqrsX"
    j = LevenshteinJudge(0.95)
    assert j.pair_scores([(a, b)]) == [0.95] and j.pair_probabilities([(a, b)]) == [0.95]
    verdict = j.pair_verdicts([(a, b)])[0]
    assert not verdict.merged and verdict.reason == "below_threshold"  # "ratio > 0.95", as in the paper
    assert LevenshteinJudge(0.9).pair_verdicts([(a, b)])[0].merged
    # the baseline is the ratio alone: whitespace differences are not forgiven
    assert not LevenshteinJudge(0.95).pair_verdicts([("a b", "a  b")])[0].merged


def test_cache_is_order_insensitive_and_stats_add_up():
    j = FormulaJudge()
    out = j.pair_probabilities([("<<1+2=3>>", "<<2+1=3>>"), ("<<2+1=3>>", "<<1+2=3>>"), ("x", "x ")])
    assert out == [1.0, 1.0, 1.0]
    s = j.stats
    assert (s.pairs, s.cache_hits, s.exact, s.scored) == (3, 1, 1, 1)
    assert s.pairs == s.cache_hits + s.exact + s.prefiltered + s.scored + s.ruled
    j.pair_probabilities([("<<2+1=3>>", "<<1+2=3>>")])
    assert j.stats.cache_hits == 2
    j.clear_cache()
    j.pair_probabilities([("<<2+1=3>>", "<<1+2=3>>")])
    assert j.stats.scored == 2


def test_bad_pairs_are_input_errors():
    with pytest.raises(InputError, match="pair 1 must be two strings"):
        FormulaJudge().pair_probabilities([("a", "b"), ("a", None)])
    assert FormulaJudge().pair_probabilities([]) == []


def test_config_validation_and_factory():
    assert build_judge(PrunerConfig()) is None
    assert isinstance(build_judge(PrunerConfig(strategy="levenshtein", threshold=0.8)), LevenshteinJudge)
    assert build_judge(PrunerConfig(strategy="levenshtein")).threshold == 0.95
    for kwargs, field in [
        ({"strategy": "fuzzy"}, "strategy"),
        ({"strategy": "formula", "grouping": "clique"}, "grouping"),
        ({"strategy": "formula", "representative": "last"}, "representative"),
        ({"strategy": "levenshtein", "threshold": 1.5}, "threshold"),
        ({"strategy": "levenshtein", "threshold": 0.0}, "threshold"),
        ({"strategy": "model", "prefilter": -0.1}, "prefilter"),
        ({"strategy": "model", "batch_size": 0}, "batch_size"),
    ]:
        with pytest.raises(InputError) as err:
            PrunerConfig(**kwargs).validate()
        assert err.value.field == field
    for kwargs, field in [
        ({"strategy": "formula", "threshold": 0.5}, "threshold"),
        ({"strategy": "levenshtein", "prefilter": 0.5}, "prefilter"),
        ({"strategy": "formula", "model": "x"}, "model"),
        ({"strategy": "model"}, "model"),
    ]:
        with pytest.raises(InputError) as err:
            build_judge(PrunerConfig(**kwargs))
        assert err.value.field == field


# ----------------------------------------------------------------------------- model strategy


def test_model_defaults_come_from_the_export(model_judge):
    assert isinstance(model_judge, SiblingJudge)
    assert model_judge.threshold == 0.5
    assert model_judge.prefilter == 0.6
    assert model_judge.max_length == 96
    assert model_judge.positive_index == 1


def test_model_two_stage_check_and_cache(model_judge, tiny_judge_dir):
    from equiv.judge.inference import score_pairs

    model_judge.clear_cache()
    model_judge.stats.reset()
    close = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "Janet sells 16 - 7 = <<16-7=9>>9 eggs.")
    far = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "The robe needs 3 bolts.")
    same = ("x =  5", "x = 5")
    probs = model_judge.pair_probabilities([close, far, same, (close[1], close[0])])
    assert probs[1] == 0.0  # prefiltered: ratio <= 0.6
    assert probs[2] == 1.0  # whitespace-identical
    assert probs[0] == probs[3]  # one judgement per unordered pair
    s = model_judge.stats
    assert (s.pairs, s.prefiltered, s.exact, s.scored, s.cache_hits) == (4, 1, 1, 1, 1)
    # the probability is the classifier's, computed on the canonical (sorted) order of the pair
    key = tuple(sorted(close))
    direct = score_pairs(model_judge.model, model_judge.tokenizer, [key], max_length=96)
    assert probs[0] == pytest.approx(float(direct[0]), abs=1e-6)


def test_verdicts_say_which_pairs_took_a_model_forward(model_judge):
    """Search counts judge_calls from these flags, so only the judge applies its shortcuts."""
    model_judge.clear_cache()
    close = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "Janet sells 16 - 7 = <<16-7=9>>9 eggs.")
    far = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.", "The robe needs 3 bolts.")
    same = ("x =  5", "x = 5")
    verdicts = model_judge.pair_verdicts([close, far, same])
    assert [v.model_call for v in verdicts] == [True, False, False]  # scored, prefiltered, whitespace
    assert [v.probability for v in verdicts] == model_judge.pair_probabilities([close, far, same])
    # a cached pair keeps its flag, in either order
    assert [v.model_call for v in model_judge.pair_verdicts([(close[1], close[0]), far])] == [True, False]
    model_judge.clear_cache()
    assert model_judge.pair_verdicts([far])[0].model_call is False


def test_rule_verdicts_never_count_as_model_calls():
    pairs = [("<<1+2=3>>", "<<2+1=3>>"), ("a", "b"), ("x", "x ")]
    for judge in (FormulaJudge(), LevenshteinJudge()):
        assert [v.model_call for v in judge.pair_verdicts(pairs)] == [False] * 3


def test_model_overrides(tiny_judge_dir):
    j = ModelJudge(tiny_judge_dir, threshold=0.7, prefilter=0.0, batch_size=2, device="cpu", dtype="float32")
    assert (j.threshold, j.prefilter, j.batch_size) == (0.7, 0.0, 2)
    pairs = [(f"step {i} costs {i} + 1 = {i + 1}", f"step {i} costs {i + 1} dollars") for i in range(5)]
    probs = j.pair_probabilities(pairs)
    assert all(0.0 < p < 1.0 for p in probs)
    assert j.stats.scored == 5 and j.stats.forward_batches == 3


def test_model_bad_input_never_crashes_inside_the_model(model_judge):
    long_a = "The farmer has " + " and ".join(f"{i} cows" for i in range(3000))  # far beyond 128 positions
    long_b = long_a.replace("cows", "cow")
    latex = r"Für $\frac{\alpha^2}{4} \cdot \sqrt[3]{x} = \int_0^1 f(x)\,dx$ — ≈ 😀"
    probs = model_judge.pair_probabilities([(long_a, long_b), (latex, latex + " !"), ("", " ")])
    assert len(probs) == 3 and all(0.0 <= p <= 1.0 for p in probs)
    g = group_siblings([latex, latex, long_a, long_b], model_judge)
    assert g.representative_of[1] == 0


def test_max_length_beyond_the_model_is_lowered_with_a_warning(tiny_judge_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        j = ModelJudge(tiny_judge_dir, max_length=4096, device="cpu")
    assert j.max_length == 128
    assert any("beyond the model" in str(w.message) for w in caught)


def test_export_without_settings_is_refused(tmp_path):
    """Run at a length and threshold it was never calibrated for, a judge would decide silently
    wrong (issue #44, item 4); its settings are part of a whole export."""
    d = make_tiny_judge(tmp_path / "plain", settings=None)
    with pytest.raises(InputError, match="incomplete judge export, missing: the 'equiv' settings block"):
        ModelJudge(d, device="cpu")


def test_export_with_settings_but_no_prefilter_uses_the_paper_default(tmp_path):
    d = make_tiny_judge(tmp_path / "plain", settings={"max_length": 128, "decision_threshold": 0.5})
    j = ModelJudge(d, device="cpu")
    assert (j.threshold, j.prefilter, j.max_length) == (0.5, 0.75, 128)


def test_tiny_longformer_judge_pads_to_its_window(tmp_path):
    d = make_tiny_judge(tmp_path / "lf", kind="longformer", settings={"max_length": 4096, "decision_threshold": 0.5})
    j = ModelJudge(d, prefilter=0.0, device="cpu")
    assert j.max_length == 256  # 258 positions - (pad 0 + 1), rounded down to the window of 16
    text = "a b c " * 400
    probs = j.pair_probabilities([(text, text + "d"), ("one = 1", "one is 1")])
    assert len(probs) == 2 and all(0.0 <= p <= 1.0 for p in probs)


def test_bad_judge_paths_are_clear_errors(tmp_path):
    from equiv.backbones import bundled_minilm_dir

    with pytest.raises(InputError, match="judge not found"):
        ModelJudge(tmp_path / "missing", device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no config.json"):
        ModelJudge(tmp_path / "empty", device="cpu")
    with pytest.raises(InputError, match="not a sequence classifier"):
        ModelJudge(bundled_minilm_dir(), device="cpu")
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(InputError, match="not a Lightning checkpoint"):
        ModelJudge(tmp_path / "weights.bin", device="cpu")
    (tmp_path / "broken.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(InputError):
        ModelJudge(tmp_path / "broken.ckpt", device="cpu")
    with pytest.raises(InputError, match="device"):
        build_judge(PrunerConfig(strategy="model", model=str(tmp_path), device="tpu"))


# ----------------------------------------------------------------------------- embedding


def test_embedding_baseline_with_bundled_minilm():
    j = EmbeddingJudge(threshold=0.8, device="cpu")
    assert isinstance(j, SiblingJudge)
    a = "Janet sells 9 eggs at $2 each, so she makes 9 * 2 = $18."
    b = "She makes 9 * 2 = $18 by selling 9 eggs at $2 each."
    c = "The robe takes 2 bolts of blue fiber."
    scores = j.pair_scores([(a, a), (a, b), (a, c)])
    assert scores[0] == pytest.approx(1.0, abs=1e-4)
    assert scores[1] > scores[2]
    probs = j.pair_probabilities([(a, b), (b, a)])
    assert probs[0] == probs[1] and j.stats.cache_hits >= 1
    g = group_siblings([a, b, c], j)
    assert g.representative_of[2] == 2
    with pytest.raises(InputError) as err:
        EmbeddingJudge("/no/such/dir", device="cpu")
    assert err.value.field == "model" and err.value.path == "/no/such/dir"


def test_the_embedding_baseline_encodes_through_the_bounded_sentence_encoder():
    """One loader and one bounded per-text cache with the aligned-plan stage (equiv.judge.paraphrase)."""
    from equiv.judge.paraphrase import SentenceEncoder

    j = EmbeddingJudge(threshold=0.8, batch_size=2, device="cpu")
    assert isinstance(j.encoder, SentenceEncoder) and j.encoder.name == j.model_name
    j.encoder.max_cached = 3
    texts = [f"She buys {n} apples." for n in range(5)]
    j.pair_scores([(texts[0], texts[1]), (texts[2], texts[3]), (texts[0], texts[4])])
    assert j.encoder.encoded == 5 and j.stats.forward_batches == 3  # 5 new texts in batches of 2
    assert len(j.encoder._vectors) <= 3  # bounded: the least recent went
    j.clear_cache()
    assert not j.encoder._vectors
    j.pair_scores([(texts[0], texts[1])])
    assert j.encoder.encoded == 7 and j.stats.forward_batches == 4  # pair cache and embeddings both cleared


def test_new_pairs_reach_the_judge_in_canonical_order_and_the_cache_ignores_order():
    """Whichever sibling comes first, the strategy scores the sorted pair (issue #53 item 11)."""
    from equiv.prune import CachedJudge

    class Recording(CachedJudge):
        name = "recording"

        def __init__(self):
            super().__init__()
            self.received = []

        def _judge_new(self, pairs):
            self.received.extend(pairs)
            return [(0.0, 0.0)] * len(pairs)

    judge = Recording()
    judge.pair_probabilities([("zeta: 2 + 2 = 4", "alpha: 4")])  # (earlier, later) sibling
    assert judge.received == [("alpha: 4", "zeta: 2 + 2 = 4")]  # the canonical (sorted) order
    judge.pair_probabilities([("alpha: 4", "zeta: 2 + 2 = 4")])
    assert len(judge.received) == 1 and judge.stats.cache_hits == 1


@pytest.mark.parametrize("command", [
    ["pairs", "--strategy", "exact", "--data", "equiv/data/demo_data/valid.jsonl"],
    ["eval", "--algo", "mcts", "--pruner.strategy", "exact", "--policy.model", "tiny:x", "--reward.model", "tiny:x"],
])
def test_the_real_commands_refuse_strategy_exact_in_one_line(command, tmp_path):
    from tests.helpers.cli import search_cli

    out = tmp_path / "run"
    done = search_cli(*command, *(["--out", str(out)] if command[0] == "eval" else []))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: field 'strategy': strategy 'exact' was removed in 2026-11: exact-text dedup is the search setting, "
        "on by default; use --search.dedupe_exact true with --pruner.strategy none"]
    assert not out.exists()  # refused before the run directory is made
