"""One output rule for every command, and readers take regular files only (issue 66, hole 6).

Before: ``agreement ... --disagreements LINK`` replaced the link (and, as root, ``/dev/stdout``)
with a regular file, a FIFO too, exit 0; ``pairs --output LINK`` wrote through the link instead;
``label --out`` at a character device read it before refusing and left a ``.lock`` beside it, and
at a FIFO hung; ``compare RUN`` whose ``results.jsonl`` is a FIFO hung. Now an output is a regular
file or a new path, else one line before any work; a reader refuses what is not a regular file.
Links, FIFOs and devices are made in ``tmp_path`` (a link to ``/dev/null`` stands for a device);
nothing is written into ``/dev``. Where a hang was the defect (a FIFO opened for reading or
writing), the real CLI runs in a bounded subprocess, so a hang fails instead of blocking the suite;
the other reproductions run the same main in this process (:func:`tests.helpers.cli.search_cli`)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import search_cli
from tests.helpers.paths import REPO_ROOT

DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens: a labelling that got past its checks would fail later


def _cli(*argv: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python search_cli.py ARGV`` in a real process (bounded: a hang fails, it does not block)."""
    return subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), *map(str, argv)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _refused(result, *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


def _labels(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": f"p-{i}", "sentence1": f"x = {i}", "sentence2": f"x = {i} + 0",
                                        "result": (4, 0)[i % 2]}) + "\n" for i in range(4)))
    return path


def _hazards(tmp_path: Path) -> dict[str, Path]:
    """A link to a device, a link to a regular file, a dangling link and a FIFO, in ``tmp_path``."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    made = {"link to a device": tmp_path / "devlink", "link to a file": tmp_path / "filelink",
            "dangling link": tmp_path / "dangling", "FIFO": tmp_path / "fifo"}
    made["link to a device"].symlink_to("/dev/null")
    made["link to a file"].symlink_to(victim)
    made["dangling link"].symlink_to(tmp_path / "nowhere" / "x")
    os.mkfifo(made["FIFO"])
    return made


def _unchanged(tmp_path: Path, made: dict[str, Path]) -> None:
    """Every hazard is still what it was: links still links, the FIFO a FIFO, the victim intact."""
    for name, path in made.items():
        if name == "FIFO":
            assert stat.S_ISFIFO(os.lstat(path).st_mode), name
        else:
            assert path.is_symlink(), name
    assert (tmp_path / "victim.txt").read_text() == "keep me\n"
    assert not (tmp_path / "nowhere").exists()


def test_agreement_never_replaces_a_link_or_a_fifo_with_its_disagreements(tmp_path):
    """The issue's reproduction (``--disagreements /dev/stdout``), with links made in a scratch folder."""
    a, b = _labels(tmp_path / "a.jsonl"), _labels(tmp_path / "b.jsonl")
    made = _hazards(tmp_path)
    line = _refused(search_cli("agreement", a, b, "--disagreements", made["link to a device"]),
                    "--disagreements names a symbolic link", "not a regular file")
    assert str(made["link to a device"]) in line
    _refused(_cli("agreement", a, b, "--disagreements", made["FIFO"], timeout=60), "a FIFO (named pipe)")
    for name in ("link to a file", "dangling link"):
        _refused(search_cli("agreement", a, b, "--disagreements", made[name]), "symbolic link")
    _unchanged(tmp_path, made)
    ok = search_cli("agreement", a, b, "--disagreements", tmp_path / "new.jsonl")  # a new path is fine
    assert ok.returncode == 0 and (tmp_path / "new.jsonl").is_file()
    again = search_cli("agreement", a, b, "--disagreements", tmp_path / "new.jsonl")  # and a regular file
    assert again.returncode == 0, again.stderr


def test_pairs_output_is_never_written_through_a_link(tmp_path):
    """Before: ``pairs --output LINK`` wrote the metrics into the file the link names. (In this
    process: ``search_cli.py pairs``'s real process is tests/test_equiv_command.py's.)"""
    data = _labels(tmp_path / "pairs.jsonl")
    made = _hazards(tmp_path)
    _refused(search_cli("pairs", "--strategy", "formula", "--data", data, "--output", made["link to a file"]),
             "--output names a symbolic link")
    for name in ("link to a device", "dangling link", "FIFO"):
        _refused(search_cli("pairs", "--strategy", "formula", "--data", data, "--output", made[name]),
                 "not a regular file")
    _unchanged(tmp_path, made)


def test_label_out_at_a_fifo_or_a_device_is_refused_before_reading_and_leaves_no_lock(tmp_path):
    """Before: ``label --out FIFO`` hung reading it; at a character device it read the device, then
    refused, leaving a ``.lock`` beside it."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p-0", "sentence1": "x = 1", "sentence2": "x = 2"}) + "\n")
    argv = ("label", pairs, "--model", "m", "--base_url", DEAD_URL, "--timeout", 5, "--tries", 1, "--out")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    _refused(_cli(*argv, fifo, timeout=60), "--out names a FIFO")
    device = tmp_path / "null.jsonl"
    try:  # a character device of our own (root only); a link to /dev/null stands in otherwise
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        device.symlink_to("/dev/null")
    _refused(search_cli(*argv, device), "--out names a", "not a regular file")  # no hang to bound: in process
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.jsonl", "null.jsonl", "pairs.jsonl"]


def test_compare_refuses_a_run_whose_records_are_a_fifo(tmp_path):
    """Before: ``compare RUN`` blocked for ever opening a FIFO ``results.jsonl``."""
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "results.jsonl")
    _refused(_cli("compare", run, timeout=60), "results.jsonl", "a FIFO (named pipe), not a regular file")


def test_a_pairs_file_that_is_a_fifo_is_refused_not_read(tmp_path):
    """A reader names what the path is (``label PAIRS`` said "no such file" of a FIFO)."""
    fifo = tmp_path / "pairs.jsonl"
    os.mkfifo(fifo)
    _refused(search_cli("label", fifo, "--model", "m", "--base_url", DEAD_URL, "--out", tmp_path / "l.jsonl"),
             "a FIFO", "field 'pairs'")


def test_an_output_directory_that_is_a_fifo_or_a_dangling_link_is_one_line(tmp_path):
    """``report --out`` (a directory output) at a FIFO or a dangling link: one line, nothing made."""
    from equiv.errors import InputError, writable_directory

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError, match="names a FIFO"):
        writable_directory(tmp_path / "fifo")
    with pytest.raises(InputError, match="dangling link"):
        writable_directory(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()


def test_eval_and_report_never_write_through_a_link_in_their_output_directory(tmp_path, capsys):
    """Before: ``eval --out RUN`` appended its records through a ``RUN/results.jsonl`` link (into
    the file it names), and ``report --out DIR`` wrote ``DIR/index.html`` through a link."""
    from equiv.report.cli import report_main
    from equiv.search.cli import eval_main
    from tests.helpers.runs import base_args
    from tests.helpers.scripted import scripted_factory

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.touch()  # an empty JSONL file: before, the run's records went into it through the link
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").symlink_to(elsewhere)
    args = base_args(tmp_path, n=1)
    args[args.index("--out") + 1] = str(run)
    with pytest.raises(SystemExit) as exc:
        eval_main(args, engine_factory=scripted_factory)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(lines) == 1, lines
    assert f"{run / 'results.jsonl'}: --out names a symbolic link" in lines[0]
    assert elsewhere.read_text() == ""
    (run / "results.jsonl").unlink()
    assert eval_main(args, engine_factory=scripted_factory) == 0  # a run to report on
    report = tmp_path / "report"
    report.mkdir()
    (report / "index.html").symlink_to(victim)
    capsys.readouterr()
    assert report_main([str(run), "--out", str(report)]) == 2
    assert "index.html: --out names a symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "keep me\n" and (report / "index.html").is_symlink()
