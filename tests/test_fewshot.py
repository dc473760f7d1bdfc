"""Few-shot prompts for base models: exemplars from a training file, never the asked
problem, bad files named by line and field, and the CLI refusing the evaluated file as exemplars."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from equiv.errors import InputError
from equiv.search.policies.fewshot import gsm8k_steps, load_exemplars, render_prompt, with_exemplars
from equiv.search.policies.prompts import resolve_format

TRAIN = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gsm8k" / "train.jsonl"


def write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def solved(i: int) -> dict:
    return {"question": f"Q{i}: what is {i} + 1?", "answer": f"Add <<{i}+1={i + 1}>>one.\n{i} + 1 = {i + 1}\n#### {i + 1}"}


def test_gsm8k_answers_become_steps():
    assert gsm8k_steps("She has 3 + 2 = <<3+2=5>>5 eggs.\n\nSo 5 * 2 = <<5*2=10>>10\n#### 10") == (
        "She has 3 + 2 = 5 eggs.", "So 5 * 2 = 10", "The answer is 10.")


def test_prompt_layout_and_the_asked_question_is_never_an_exemplar(tmp_path):
    shots = load_exemplars(write(tmp_path / "train.jsonl", [solved(i) for i in range(6)]), 2, seed=3)
    assert len(shots) == 3  # one spare
    prompt = render_prompt(shots, 2, "What is 9 + 9?", ["9 + 9 = 18"])
    assert prompt.count("Question: ") == 3 and prompt.endswith("Question: What is 9 + 9?\nAnswer:\n9 + 9 = 18\n")
    assert "\n\nQuestion: What is 9 + 9?" in prompt and "<<" not in prompt
    # Asking one of the exemplars: it is left out and the spare takes its place.
    asked = shots[0].question
    prompt = render_prompt(shots, 2, asked, [])
    assert prompt.count(asked) == 1 and prompt.count("Question: ") == 3
    assert shots[2].question in prompt


def test_fewshot_format_through_resolve_format(tmp_path):
    train = write(tmp_path / "train.jsonl", [solved(i) for i in range(6)])
    fmt = resolve_format("fewshot", "any-base-model")
    assert fmt.step_delimiter == "\n" and fmt.is_final("The answer is 5.") and not fmt.is_final("5 + 1 = 6")
    assert fmt.is_final("") and not resolve_format("plain", "m").is_final("")  # a blank line ends a base model's answer
    fmt = with_exemplars(fmt, SimpleNamespace(fewshot_path=str(train), fewshot_count=2, fewshot_seed=0))
    prompt = fmt.build("What is 9 + 9?", ["Nine and nine.", "9 + 9 = 18"])
    assert prompt.count("Question: ") == 3 and prompt.endswith("Answer:\nNine and nine.\n9 + 9 = 18\n")
    assert fmt.clean_step("9 + 9 = 18\nQuestion: next") == "9 + 9 = 18"
    zero = with_exemplars(resolve_format("fewshot", "m"), SimpleNamespace(fewshot_path=None, fewshot_count=0))
    assert zero.build("Q?", []) == "Question: Q?\nAnswer:\n"
    # Other formats are untouched.
    plain = resolve_format("plain", "m")
    assert with_exemplars(plain, SimpleNamespace(fewshot_path=str(train), fewshot_count=2)) is plain


def test_real_gsm8k_train_exemplars():
    if not TRAIN.exists():
        pytest.skip("shared GSM8K data not present")
    shots = load_exemplars(TRAIN, 4, seed=0)
    assert len(shots) == 5 and all(s.steps[-1].startswith("The answer is ") for s in shots)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([solved(0), "{not json", solved(2)], ":2: malformed JSON"),
        ([solved(0), {"question": "q"}, solved(2)], ":2: field 'answer': missing"),
        ([solved(0), {"question": "", "answer": "#### 1"}], ":2: field 'question': missing"),
        ([solved(0), solved(1)], "holds 2 exemplars; 4 shots need at least 5"),
    ],
)
def test_bad_fewshot_files_name_line_and_field(tmp_path, rows, message):
    path = write(tmp_path / "train.jsonl", rows)
    with pytest.raises(InputError, match=message) as err:
        load_exemplars(path, 4)
    assert str(path) in str(err.value)


def test_missing_file_and_missing_path(tmp_path):
    with pytest.raises(InputError, match="policy.fewshot_path.*does not exist"):
        load_exemplars(tmp_path / "nope.jsonl", 2)
    with pytest.raises(InputError, match="policy.fewshot_path"):
        with_exemplars(resolve_format("fewshot", "m"), SimpleNamespace(fewshot_path=None, fewshot_count=4))


def test_cli_refuses_the_evaluated_file_as_exemplars(tmp_path, capsys):
    from equiv.search.cli import eval_main

    data = write(tmp_path / "test.jsonl", [solved(i) for i in range(6)])
    with pytest.raises(SystemExit) as exit_info:
        eval_main([
            "--algo", "mcts", "--out", str(tmp_path / "run"), "--data.dataset", "gsm8k", "--data.path", str(data),
            "--policy.backend", "transformers", "--policy.model", "tiny:" + str(tmp_path / "tiny"),
            "--policy.prompt_format", "fewshot", "--policy.fewshot_path", str(data),
            "--reward.kind", "likelihood", "--run.progress", "false",
        ])
    assert exit_info.value.code == 2
    assert not (tmp_path / "tiny").exists()  # refused before any model is built
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "policy.fewshot_path" in err[0] and "training split" in err[0]
