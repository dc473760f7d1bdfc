"""A verdict does not depend on which sibling comes first (issue #53 item 11).

The cross-encoder reads ``[CLS] a [SEP] b`` and is not symmetric, so before every pair was put in
its canonical order (:func:`equiv.data.tokenize.canonical_pair`) the first-asked order chose the
probability: on fresh solution pairs the shipped judge made 18 false merges one way and 17 with
every pair swapped, and a judge's cache kept whichever order it saw first. The scorer used here
is the verdict snapshot's hash of the ordered pair, as asymmetric as a model can be.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from equiv.data.tokenize import canonical_pair
from equiv.judge.decide import decide
from equiv.judge.members import score_judge_dir
from equiv.prune.model_judge import ModelJudge
from tests.helpers.judges import SETTINGS, make_tiny_judge
from tests.helpers.verdict_snapshot import hash_probability, hash_scorer, policies, read_rows, repo_files
from tests.helpers.examples import examples

ROWS = [row for _, path in sorted(repo_files().items()) for row in read_rows(path)]
POLICIES = policies()


def _full(verdicts):
    return [(v.merged, v.reason, v.probability, v.detail) for v in verdicts]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(ROWS), name=st.sampled_from(sorted(POLICIES)), score_ruled=st.booleans())
def test_decide_gives_one_verdict_whichever_sibling_comes_first(row, name, score_ruled):
    a, b, question = row["sentence1"], row["sentence2"], row.get("question") or ""
    policy = POLICIES[name]
    forward = decide([(a, b)], policy, hash_scorer, [question], score_ruled=score_ruled)
    backward = decide([(b, a)], policy, hash_scorer, [question], score_ruled=score_ruled)
    assert _full(forward) == _full(backward), row["id"]


def test_swapping_every_pair_of_a_labelled_file_changes_no_verdict():
    path = repo_files()["benchmarks/data/gsm8k_train_solution_pairs.jsonl"]
    rows = read_rows(path)
    pairs = [(row["sentence1"], row["sentence2"]) for row in rows]
    questions = [row.get("question") or "" for row in rows]
    swapped = [(b, a) for a, b in pairs]
    for policy in POLICIES.values():
        forward = decide(pairs, policy, hash_scorer, questions, score_ruled=True)
        assert _full(forward) == _full(decide(swapped, policy, hash_scorer, questions, score_ruled=True))
        # the scorer saw the canonical order: the probabilities are those of the sorted texts
        scored = [v.probability for v in forward if v.reason in ("below_threshold", "floor", "threshold")]
        want = [hash_probability(*canonical_pair(a, b)) for (a, b), v in zip(pairs, forward)
                if v.reason in ("below_threshold", "floor", "threshold")]
        assert scored == want and scored


A = "She pays 3 * 4 = 12 dollars for the apples."
B = "The apples cost 12 dollars in total because 4 * 3 = 12."


def _judge(directory: Path) -> ModelJudge:
    return ModelJudge(directory, device="cpu", prefilter=0.0, guard=False, threshold=0.5)


def test_the_cache_answers_a_swapped_pair_as_whichever_order_came_first(tmp_path: Path):
    directory = make_tiny_judge(tmp_path / "j", settings=dict(SETTINGS, prefilter_threshold=0.0), seed=3)
    from equiv.judge.inference import score_pairs

    raw = _judge(directory)
    ab, ba = score_pairs(raw.model, raw.tokenizer, [(A, B), (B, A)], max_length=96).tolist()
    assert ab != ba  # the tiny cross-encoder is order-sensitive, as the trained one is

    first_ab, first_ba = _judge(directory), _judge(directory)
    answers = [
        first_ab.pair_verdicts([(A, B)])[0], first_ab.pair_verdicts([(B, A)])[0],
        first_ba.pair_verdicts([(B, A)])[0], first_ba.pair_verdicts([(A, B)])[0],
    ]
    assert len({(v.merged, v.reason, v.probability) for v in answers}) == 1
    assert answers[0].probability == ab if A <= B else ba  # the canonical order's probability
    for judge in (first_ab, first_ba):
        assert judge.cache_info()["entries"] == 1 and judge.stats.cache_hits == 1
        assert judge.pair_probabilities([(B, A)]) == judge.pair_probabilities([(A, B)])
        assert judge.pair_scores([(B, A)]) == judge.pair_scores([(A, B)])
    # an export scored directly (fit's report, the ensemble's calibration) gives the same number
    assert score_judge_dir(directory, [(A, B), (B, A)]) == [answers[0].probability] * 2


def test_evaluation_batches_are_canonical_and_training_batches_keep_the_file_order(tmp_path: Path):
    """Validation (fit's threshold and report), test and predict read pairs as the judge scores
    them; training batches keep the file's order (training on both orders was removed)."""
    from equiv.data.datamodule import MathEquivDataModule, PairDataset
    from equiv.data.demo import DEMO_DIR
    from equiv.data.records import PairRecord

    dm = MathEquivDataModule(train=str(DEMO_DIR / "train.jsonl"), val=str(DEMO_DIR / "valid.jsonl"))
    dm.setup("fit")
    assert dm.val_dataloader().collate_fn.canonical and not dm.train_dataloader().collate_fn.canonical
    later, earlier = sorted((A, B), reverse=True)

    def ids(collator, first, second):
        return collator([PairDataset([PairRecord(first, second, 4, source="t:1")], [1])[0]])["input_ids"].tolist()

    evaluation, training = dm.collator(canonical=True), dm.collator()
    assert ids(evaluation, later, earlier) == ids(evaluation, earlier, later) == ids(training, earlier, later)
    assert ids(training, later, earlier) != ids(training, earlier, later)
