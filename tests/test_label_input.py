"""The labeller's input and what it writes of a model's answers (issue 66, holes 7 and 11).

Before: a lone surrogate (valid JSON ``\\ud800``) in one model answer raised in ``append_jsonl``
and the run lost every answer of the batch (the output left empty); a pairs file holding one was
not refused up front (``pairs`` and ``agreement`` refuse it) and failed at the end; a 5 M-character
step was sent to the server (``pairs`` caps steps at 50,000 characters). The labeller runs against
a loopback OpenAI-compatible stub (tests/helpers/chat_stub.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.helpers.chat_stub import GOOD, chat_stub
from tests.helpers.cli import search_cli
from tests.helpers.paths import REPO_ROOT

SURROGATE_ANSWER = '{"reasoning_step": "the same \ud800 computation", "result": 4}'


def _pairs(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # ensure_ascii: "\ud800" stays valid JSON
    return path


def _argv(pairs: Path, out: Path, url: str) -> list[str]:
    return ["label", str(pairs), "--out", str(out), "--model", "m", "--base_url", url, "--structured", "none",
            "--timeout", "30", "--tries", "1"]


def _label_with_a_surrogate_answer(tmp_path: Path, run: Callable[[list[str]], Any]) -> None:
    """``run(argv)`` labels four pairs, one answered with a lone surrogate: every answer of the
    batch is written, the surrogate stored as U+FFFD."""
    pairs = _pairs(tmp_path / "pairs.jsonl", [{"id": f"p-{i}", "sentence1": f"{'ODD ' if i == 1 else ''}x = {i}",
                                               "sentence2": f"x = {i} + 0"} for i in range(4)])
    out = tmp_path / "labels.jsonl"
    with chat_stub(lambda prompt: SURROGATE_ANSWER if "ODD" in prompt else GOOD) as stub:
        result = run(_argv(pairs, out, stub.url))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    rows = {row["id"]: row for row in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert sorted(rows) == ["p-0", "p-1", "p-2", "p-3"] and all(r["result"] == 4 for r in rows.values())
    assert rows["p-1"]["label_reasoning"] == "the same \ufffd computation"
    assert "\ufffd" in rows["p-1"]["label_raw"][0]["text"]
    assert not (tmp_path / "labels.failed.jsonl").exists()


def test_a_lone_surrogate_in_an_answer_loses_no_answer(tmp_path):
    """Every answer of the batch is written; the surrogate is stored as U+FFFD (``label`` in this
    process, its streams encoded as a real process's: tests/helpers/cli.py)."""
    _label_with_a_surrogate_answer(tmp_path, lambda argv: search_cli(*argv))


@pytest.mark.slow  # a real process (torch imported again); the in-process test above is in the default suite
def test_a_lone_surrogate_in_an_answer_loses_no_answer_in_a_real_process(tmp_path):
    """The same through ``search_cli.py label`` in a real process."""
    _label_with_a_surrogate_answer(tmp_path, lambda argv: subprocess.run(
        [sys.executable, str(REPO_ROOT / "search_cli.py"), *argv], cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=300))


def _refused_before_asking(tmp_path: Path, rows: list[dict], *needles: str) -> None:
    pairs = _pairs(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "labels.jsonl"
    with chat_stub() as stub:
        result = search_cli(*_argv(pairs, out, stub.url))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    for needle in (str(pairs), *needles):
        assert needle in lines[0], lines[0]
    assert stub.requests == 0 and not out.exists()


def test_a_pairs_file_holding_a_lone_surrogate_is_refused_up_front(tmp_path):
    good = {"id": "p-0", "sentence1": "x = 1", "sentence2": "x = 2"}
    for field, bad in (("sentence2", {"sentence2": "x = \ud800"}), ("question", {"question": "Why \udfff?"}),
                       ("prefix[1]", {"prefix": ["a", "b \ud800"]})):
        _refused_before_asking(tmp_path, [good, {**good, "id": "p-1", **bad}], ":2:", f"field '{field}'",
                               "lone surrogate")


def test_a_step_over_the_pairs_limit_is_refused_up_front(tmp_path):
    good = {"id": "p-0", "sentence1": "x = 1", "sentence2": "x = 2"}
    _refused_before_asking(tmp_path, [good, {**good, "id": "p-1", "sentence1": "1 + " * 12_501}], ":2:",
                           "field 'sentence1'", "50,004 characters", "limit of 50,000")
