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


def kernel_holders(path: Path) -> list[int] | None:
    """The pids the kernel's lock table (``/proc/locks``) names as holding an ``flock`` on ``path``'s
    file; ``None`` where the table cannot be read (not Linux). Empty when the holder is out of
    sight: on another host of a network file system, or in a pid namespace this one cannot see."""
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pids = []
    for line in table.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 12345 fe:00:2154676 0 EOF"; a waiter's line has "->" after the number
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            pid = int(parts[4])
            major, minor, inode = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == want and pid > 0:
                pids.append(pid)
        except ValueError:
            continue
    return pids


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours to signal
        return True
    return True


def holder_text(path: Path) -> str:
    """Who holds the lock, for the refusal: what the holder wrote (pid, host, start time) when the
    kernel agrees, else what is known, said as such (issue #53, item 10).

    The file's content is only a note the last equiv holder left; the lock is the ``flock``. A
    program that is not an equiv writer (``flock run.lock ...``), or a writer that has locked but
    not yet written, holds the lock under an earlier holder's note: the kernel's lock table names
    the real holder, and a named pid that is no longer running is no holder at all."""
    try:
        info: Any = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        info = {}
    if not isinstance(info, dict):
        info = {}
    pid = info.get("pid") if isinstance(info.get("pid"), int) and not isinstance(info.get("pid"), bool) else None
    here = info.get("host") == socket.gethostname()
    noted = f"pid {pid} on host {info.get('host')} since {info.get('started')}"
    kernel = kernel_holders(path)
    if kernel:
        if pid in kernel and here:
            return noted
        earlier = f"; the pid {pid} the lock file names is an earlier holder's" if pid is not None else ""
        return (f"{', '.join(f'pid {p}' for p in kernel)} (the kernel's lock table; a program that has not written "
                f"its details: not an equiv writer, or one just starting{earlier})")
    if pid is None:
        return "another process (it has not written its details: not an equiv writer, or one just starting)"
    if here and not _running(pid):
        return (f"another process: the lock file names pid {pid}, which is no longer running, so the holder is a "
                "program that has not written its details (not an equiv writer, or one just starting)")
    return noted


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
