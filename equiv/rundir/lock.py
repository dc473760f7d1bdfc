"""One writer per run directory: an advisory lock held for the whole run.

Two ``eval`` runs into one ``--out`` would interleave their appends to ``results.jsonl`` and
``judge_pairs.jsonl``, rewrite ``config.yaml`` under each other and rename each other's
temporary files (issue #44, item 3). So every writer holds an exclusive ``fcntl.flock`` on
:data:`LOCK` inside the directory from before it checks the binding until it exits. The kernel
releases a ``flock`` when the holding process ends in any way (exit, exception, SIGKILL), so a
killed run never leaves a stale lock behind: the file stays, the lock does not.

The holder writes its pid, host and start time into the file, so a refused second writer can
say who holds the directory. The lock is advisory: it binds every equiv writer (``eval``, its
Ray driver and the library's ``run_eval``), not a program that ignores it.

Within one process the lock is re-entrant (the CLI takes it, then ``run_eval`` takes it again for
library callers that come without the CLI): a second ``flock`` on a new descriptor of the same
file would otherwise refuse the process that already holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from equiv.errors import InputError

LOCK = "run.lock"
"""The lock file of a run directory (its content names the holder; the lock is the ``flock``)."""

# lock file (resolved) -> (descriptor, depth): this process's held locks, for re-entry.
_HELD: dict[str, tuple[int, int]] = {}


def holder_text(path: Path) -> str:
    """Who holds the lock, as the holder wrote it (pid, host, start time), for the refusal."""
    try:
        info: Any = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another process (it has not written its pid yet)"
    return f"pid {info.get('pid')} on host {info.get('host')} since {info.get('started')}"


@contextmanager
def hold_run_dir(out_dir: str | Path) -> Iterator[Path]:
    """Hold ``out_dir``'s writer lock for the block; refuse in one line if another process holds it.

    Never waits: a second writer is a mistake to report (two runs would mix their records), not
    a turn to queue for. The directory is followed to the one it really is (symbolic links
    resolved), so two names of one run directory share one lock."""
    with hold_lock(Path(os.path.realpath(out_dir)) / LOCK, Path(out_dir),
                   "run directory is in use by {holder}; wait for that run to finish, or use another --out") as path:
        yield path


@contextmanager
def hold_lock(lock_file: str | Path, names: str | Path, refusal: str) -> Iterator[Path]:
    """Hold the writer lock ``lock_file`` for the block (re-entrant within a process); when another
    process holds it, refuse in one line naming ``names``: ``refusal`` with ``{holder}`` replaced
    by who holds it. The one lock of every equiv writer that appends where another could (a run
    directory, a labelling's ``--out``). The lock file is taken by its real path (symbolic links
    resolved), so a link to it is the same lock (issue #53, item 8)."""
    path = Path(os.path.realpath(lock_file))
    key = str(path)
    if key in _HELD:
        fd, depth = _HELD[key]
        _HELD[key] = (fd, depth + 1)
        try:
            yield path
        finally:
            _release(key)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(refusal.format(holder=holder_text(path)), path=names) from None
    except BaseException:
        os.close(fd)
        raise
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
    _HELD[key] = (fd, 1)
    try:
        yield path
    finally:
        _release(key)


def _release(key: str) -> None:
    fd, depth = _HELD[key]
    if depth > 1:
        _HELD[key] = (fd, depth - 1)
        return
    del _HELD[key]
    os.close(fd)  # closing the last descriptor releases the flock
