"""``with_question``: a judge that reads each pair with its problem's question after the second
step. The question must reach the classifier the same way in training (the collator), in the fit
(CLI link, export, calibration), in search (``ModelJudge``, its cache) and in EM; a judge trained
so is never silently asked without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.datamodule import PairCollator, PairDataset
from equiv.data.records import PairRecord
from equiv.data.tokenize import append_question, tokenize_pairs
from equiv.errors import InputError
from equiv.judge.em import EMConfig, e_step
from equiv.judge.inference import score_pairs
from equiv.judge.members import score_judge_dir
from equiv.prune import ModelJudge
from tests.helpers.cli import invoke
from tests.helpers.judges import SETTINGS, demo_search_argv, make_tiny_judge, tiny_fit_argv

QUESTION = "Tom buys 3 apples at $2 each and 4 pears at $1 each. How much does he spend on apples?"
PAIR = ("He spends 3 * 2 = 6 dollars on apples.", "He spends 3 * 2 = 6 dollars on pears.")


@pytest.fixture(scope="module")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from equiv.backbones import BUNDLED_MINILM, resolve_model_name

    return AutoTokenizer.from_pretrained(resolve_model_name(BUNDLED_MINILM))


def test_the_question_follows_the_second_step_and_is_cut_before_either_step(minilm_tokenizer):
    tok = minilm_tokenizer
    assert append_question("b", "", "[SEP]") == "b"  # no question, nothing added
    assert append_question("b", " Why\n  so? ", "[SEP]") == "b [SEP] Why so?"
    full = tokenize_pairs(tok, [PAIR], max_length=256, questions=[QUESTION])["input_ids"][0].tolist()
    tokens = tok.convert_ids_to_tokens(full)
    assert tokens.count("[SEP]") == 3  # step 1 [SEP] step 2 [SEP] question [SEP]
    text = tok.decode(full)
    assert text.index("pears") < text.rindex("[SEP]", 0, text.index("how much")) and text.endswith("? [SEP]")
    # A budget too small for the question keeps both steps whole and cuts the question's end.
    plain = tokenize_pairs(tok, [PAIR], max_length=256)["input_ids"][0].tolist()
    short = tokenize_pairs(tok, [PAIR], max_length=len(plain) + 6, questions=[QUESTION])["input_ids"][0].tolist()
    assert len(short) == len(plain) + 6
    assert short[: len(plain)] == plain  # the step pair is untouched
    assert short[len(plain) : len(plain) + 5] == full[len(plain) : len(plain) + 5]  # the question's start


def test_the_collator_reads_questions_only_when_asked(minilm_tokenizer):
    record = PairRecord(PAIR[0], PAIR[1], 1, extra={"question": QUESTION}, source="t.jsonl:1")
    sample = PairDataset([record], [0])[0]
    assert sample["question"] == QUESTION
    plain = PairCollator(minilm_tokenizer, 256, None)([sample])["input_ids"][0].tolist()
    asked = PairCollator(minilm_tokenizer, 256, None, with_question=True)([sample])["input_ids"][0].tolist()
    assert len(asked) > len(plain) and asked[: len(plain)] == plain


def test_a_question_judge_is_never_asked_without_the_question(tmp_path: Path):
    directory = make_tiny_judge(tmp_path / "q", settings=dict(SETTINGS, prefilter_threshold=0.0, with_question=True))
    judge = ModelJudge(directory)
    assert judge.reads_question and judge.describe()["with_question"] is True
    with pytest.raises(InputError, match="question"):
        judge.pair_probabilities([PAIR])
    with pytest.raises(InputError, match="question"):
        score_judge_dir(directory, [PAIR])


def test_the_question_changes_the_score_and_keys_the_cache(tmp_path: Path):
    """Same two steps under two problems: two model scorings, each what score_pairs gives with
    that question; a step-only judge scores the pair once whatever the question."""
    q_dir = make_tiny_judge(tmp_path / "q", settings=dict(SETTINGS, prefilter_threshold=0.0, with_question=True))
    plain_dir = make_tiny_judge(tmp_path / "plain", settings=dict(SETTINGS, prefilter_threshold=0.0))
    other = "Tom buys 3 pears at $2 each. How much does he spend on pears?"
    judge = ModelJudge(q_dir)
    probs = judge.pair_probabilities([PAIR, PAIR, PAIR], [QUESTION, other, QUESTION])
    assert judge.stats.scored == 2 and judge.stats.cache_hits == 1
    model, tok = judge.model, judge.tokenizer
    expected = [score_pairs(model, tok, [PAIR], max_length=96, questions=[q]).item() for q in (QUESTION, other)]
    assert probs[0] == pytest.approx(expected[0], abs=1e-6) and probs[1] == pytest.approx(expected[1], abs=1e-6)
    assert expected[0] != pytest.approx(expected[1], abs=1e-6)  # the question is read
    assert score_judge_dir(q_dir, [PAIR], questions=[other])[0] == pytest.approx(expected[1], abs=1e-6)
    plain = ModelJudge(plain_dir)
    plain.pair_probabilities([PAIR, PAIR], [QUESTION, other])
    assert plain.stats.scored == 1 and plain.stats.cache_hits == 1 and not plain.reads_question


def test_em_scores_each_sub_pair_with_its_samples_question():
    pairs = [("A is 1. B is 2.", "A is 1. B is 3."), ("C is 4.", "C is 5.")]
    seen: list[tuple[tuple[str, str], str]] = []

    def scorer(sub, questions):
        seen.extend(zip(sub, questions))
        return [0.0] * len(sub)

    e_step(pairs, [0, 0], scorer, EMConfig(), questions=["first?", "second?"])
    assert seen and {q for _, q in seen} <= {"first?", "second?"}
    assert all(q == ("first?" if "A" in a or "B" in a else "second?") for (a, _), q in seen)


def _toy_rows(question: bool) -> list[dict]:
    from tests.test_judge_cli import separable_pairs

    rows = separable_pairs(48, seed=5)
    for i, row in enumerate(rows):
        row["id"] = f"toy-{i // 2}-{i % 2}"
        if question:
            row["question"] = f"Problem {i // 2}: how many pages?"
    return rows


def test_fit_with_question_links_the_flag_and_calibrates_on_questions(tmp_path: Path):
    """`--model.with_question=true` reaches the data module and the export; the threshold, the guard
    report are calibrated through the export, so with the questions."""
    from equiv.judge.cli import main
    from equiv.judge.export import read_checkpoint
    from tests.test_judge_cli import write_jsonl

    train = write_jsonl(tmp_path / "train.jsonl", _toy_rows(question=True))
    out = tmp_path / "run"
    tiny = make_tiny_judge(tmp_path / "tiny", settings=None)
    assert main(tiny_fit_argv(tiny, train, out, "--model.max_length=96", "--model.with_question=true",
                              "--guard=true")) == 0
    settings = json.loads((out / "judge" / "config.json").read_text())["equiv"]
    assert settings["with_question"] is True
    ckpt = read_checkpoint(next((out / "checkpoints").glob("*.ckpt")))
    assert ckpt["datamodule_hyper_parameters"]["with_question"] is True  # through the CLI link


def test_fit_with_question_refuses_a_pair_without_one(tmp_path: Path):
    """One line naming the file, the line and the field; non-zero exit, nothing trained."""
    from equiv.judge.cli import main
    from tests.test_judge_cli import write_jsonl

    rows = _toy_rows(question=True)
    del rows[6]["question"]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    tiny = make_tiny_judge(tmp_path / "tiny", settings=None)
    done = invoke(main, tiny_fit_argv(tiny, train, tmp_path / "run", "--model.with_question=true"))
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Warning" not in line]
    assert lines and f"{train}:7" in lines[-1] and "question" in lines[-1]
    assert not (tmp_path / "run" / "judge").exists()


def test_the_recipes_question_overlay_changes_only_the_input_and_the_folders(capsys, monkeypatch):
    from tests.test_em_configs import resolved

    plain = resolved(capsys, monkeypatch, "configs/gsm8k_equiv.yaml")
    asked = resolved(capsys, monkeypatch, "configs/gsm8k_equiv.yaml", "configs/gsm8k_equiv_question.yaml")
    assert asked["model"]["with_question"] is True and plain["model"]["with_question"] is False
    assert "with_question" not in asked["data"]  # linked from the model: given once
    assert {k for k in asked["model"] if asked["model"][k] != plain["model"][k]} == {"with_question", "max_length"}
    assert asked["trainer"]["default_root_dir"] == "outputs/gsm8k_equiv_question"
    assert asked["data"] == plain["data"]


def test_search_eval_passes_each_siblings_question_to_the_judge(tmp_path, shared_data):
    """`search_cli.py eval` with a question-reading judge: search knows every sibling's problem,
    so the judge scores and no pair is refused for lack of a question."""
    from search_cli import main as search_main

    judge = make_tiny_judge(tmp_path / "q", settings=dict(SETTINGS, prefilter_threshold=0.0, with_question=True))
    out = tmp_path / "run"
    assert search_main(demo_search_argv(shared_data / "gsm8k" / "test.jsonl", judge, out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pruner"] == "model" and summary["judge_stats"]["scored"] > 0


def test_pairs_cli_names_the_line_without_a_question_for_a_question_judge(tmp_path: Path):
    """`search_cli.py pairs` with a question-reading judge: a labelled line lacking `question` is
    one error line naming file, line and field, never a silent step-only score."""
    from search_cli import main

    judge = make_tiny_judge(tmp_path / "q", settings=dict(SETTINGS, with_question=True))
    rows = [{"sentence1": PAIR[0], "sentence2": PAIR[1], "result": 1, "question": QUESTION},
            {"sentence1": PAIR[0], "sentence2": PAIR[0] + " So 6.", "result": 4}]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = invoke(main, ["pairs", "--data", data, "--strategy", "model", "--model", judge])
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Warning" not in line]
    assert f"{data}:2" in lines[-1] and "question" in lines[-1]


def test_group_siblings_hands_the_question_to_a_question_judge(tmp_path: Path):
    from equiv.prune import group_siblings

    directory = make_tiny_judge(tmp_path / "q", settings=dict(SETTINGS, prefilter_threshold=0.0, with_question=True))
    judge = ModelJudge(directory)
    steps = [PAIR[0], PAIR[1], "He has 4 * 1 = 4 pears."]
    with pytest.raises(InputError, match="question"):
        group_siblings(steps, judge)
    group_siblings(steps, judge, question=QUESTION)
    assert judge.stats.scored == 3  # the three sibling pairs
    judge.pair_probabilities([(steps[0], steps[1])], [QUESTION])
    assert judge.stats.scored == 3 and judge.stats.cache_hits == 1  # they were asked with this question
    judge.pair_probabilities([(steps[0], steps[1])], ["Another problem?"])
    assert judge.stats.scored == 4
