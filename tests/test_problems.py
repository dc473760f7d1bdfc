"""Benchmark problem loading: the shared JSONL sets, any JSONL, and located input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.problems import Problem, gsm8k_final_answer, load_problems, resolve_data_path
from equiv.errors import InputError


def _shared_file(shared_data, name):
    path = shared_data / name / "test.jsonl"
    if not path.exists():
        pytest.skip(f"shared benchmark file not found: {path}")
    return path


def test_shared_benchmarks(shared_data):
    gsm_path = _shared_file(shared_data, "gsm8k")
    gsm = load_problems("gsm8k", path=gsm_path)
    assert len(gsm) == 1319 and gsm[0] == Problem(
        id="gsm8k-0", question=gsm[0].question, answer="18", kind="gsm8k"
    )
    assert gsm[0].question.startswith("Janet")
    math = load_problems("math500", path=_shared_file(shared_data, "math500"))
    assert len(math) == 500 and math[0].kind == "math"
    assert math[0].id == "test/precalculus/807.json" and "\\frac{\\pi}{2}" in math[0].answer
    aime = load_problems("aime24", path=_shared_file(shared_data, "aime24"))
    assert len(aime) == 30 and all(p.kind == "math" for p in aime)
    assert len({p.id for p in math}) == 500
    # Slices keep the ids of the full file.
    assert [p.id for p in load_problems("gsm8k", path=gsm_path, start=2, end=4)] == ["gsm8k-2", "gsm8k-3"]
    assert all("," not in p.answer for p in gsm)


def test_any_jsonl_with_field_names(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"q": "What is 1+1?", "a": 2}, {"q": "Half of 3?", "a": "\\frac{3}{2}"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    probs = load_problems("jsonl", path=path, question_field="q", answer_field="a")
    assert [(p.id, p.answer, p.kind) for p in probs] == [("mine-0", "2", "math"), ("mine-1", "\\frac{3}{2}", "math")]
    gsm_like = tmp_path / "g.jsonl"
    gsm_like.write_text(json.dumps({"id": 7, "question": "x?", "answer": "so\n#### 1,200"}) + "\n")
    (p,) = load_problems("jsonl", path=gsm_like)
    assert (p.id, p.answer, p.kind) == ("7", "1200", "gsm8k")


@pytest.mark.parametrize(
    ("content", "kwargs", "match"),
    [
        ('{"question": "a", "answer": "1"}\n{oops\n', {}, r"bad\.jsonl:2: malformed JSON"),
        ('[1, 2]\n', {}, r"bad\.jsonl:1: expected a JSON object"),
        ('{"question": "a"}\n', {}, r"bad\.jsonl:1: field 'answer': missing"),
        ('{"text": "a", "answer": "1"}\n', {}, r"bad\.jsonl:1: field 'question or problem': missing"),
        ('{"question": "  ", "answer": "1"}\n', {}, r"field 'question': must be a non-empty string"),
        ('{"question": "a", "answer": null}\n', {}, r"field 'answer': must be a non-empty"),
        ('{"question": "a", "answer": "1", "id": 1}\n{"question": "b", "answer": "2", "id": 1}\n', {}, "duplicate problem id"),
        ("\n\n", {}, "no problems found"),
        ('{"question": "a", "answer": "1"}\n', {"start": 3, "end": 1}, "data.end"),
        ('{"question": "a", "answer": "no final"}\n', {"kind": "gsm8k"}, None),
    ],
)
def test_bad_input_is_located(tmp_path, content, kwargs, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    if match is None:  # a gsm8k answer without #### is taken as is
        assert load_problems("jsonl", path=path, **kwargs)[0].answer == "no final"
        return
    with pytest.raises(InputError, match=match):
        load_problems("jsonl", path=path, **kwargs)


def test_wrong_names_and_paths(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="unknown dataset"):
        load_problems("mmlu")
    with pytest.raises(InputError, match="needs a path"):
        load_problems("jsonl")
    with pytest.raises(InputError, match=r"missing\.jsonl: field 'data\.path': file not found"):
        load_problems("gsm8k", path=tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="is a directory"):
        load_problems("jsonl", path=tmp_path)
    # No path: the hub is taken (never a copy the library finds on its own), and offline it
    # fails with one actionable line.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match=r"could not load HuggingFaceH4/MATH-500 from the Hugging Face Hub.*--data\.path FILE"):
        load_problems("math500")
    with pytest.raises(ValueError, match="####"):
        gsm8k_final_answer("no marker")


def test_a_problems_file_that_is_not_utf8_is_one_line_naming_file_line_and_offset(tmp_path):
    from tests.helpers.cli import search_cli

    path = tmp_path / "problems.jsonl"
    good = (json.dumps({"question": "q", "answer": "#### 1"}) + "\n").encode()
    path.write_bytes(good + b'{"question": "caf\xe9", "answer": "#### 2"}\n')
    proc = search_cli("eval", "--algo", "sbs", "--out", tmp_path / "run", "--data.dataset", "jsonl", "--data.path", path,
                      "--data.question_field", "question", "--data.answer_field", "answer")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"error: {path}:2: is not UTF-8") and f"byte offset {len(good) + 17}" in lines[0]


def test_the_demo_problems_ship_in_the_package_and_are_the_test_splits_first(tmp_path, monkeypatch):
    """``demo:gsm8k`` reads the package's copy from any working directory (the tour needs no
    ``../shared``); it is the start of the GSM8K test split, so ids and answers match it."""
    monkeypatch.chdir(tmp_path)
    demo = load_problems("gsm8k", path="demo:gsm8k")
    assert [p.id for p in demo] == [f"gsm8k-{i}" for i in range(5)]
    assert demo[0].question.startswith("Janet") and demo[0].answer == "18"
    assert resolve_data_path("demo:gsm8k").parent.name == "demo_data"
    assert resolve_data_path("runs/x.jsonl") == Path("runs/x.jsonl")
    with pytest.raises(InputError, match=r"field 'data\.path': unknown demo problems 'math'; choose from demo:gsm8k"):
        load_problems("gsm8k", path="demo:math")


def test_the_demo_problems_equal_the_shared_test_split(shared_data):
    shared = _shared_file(shared_data, "gsm8k").read_text().splitlines()
    shipped = resolve_data_path("demo:gsm8k").read_text().splitlines()
    assert shipped == shared[:len(shipped)]
