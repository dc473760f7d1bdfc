"""Every process ``search_cli.py serve`` starts ends with it, whatever signal stops it.

Why: LitServe forks its uvicorn servers and a multiprocessing manager (both holding the listening
socket) and spawns the judge's inference worker. ``kill PID`` (SIGTERM) ended only the parent,
and ``kill -9`` cannot be caught at all; the children, orphaned to PID 1, kept answering
``/health`` and ``/verdicts`` and held the port (issue 66). So each child asks the kernel to kill
it when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread watching the
parent's PID), and the parent turns SIGTERM into LitServe's own graceful shutdown (the one it
does on Ctrl+C). The resource tracker multiprocessing starts ends by itself once every process
holding its pipe has ended.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

_PR_SET_PDEATHSIG = 1
_armed_parent: int | None = None


def die_with_parent(parent: int | None = None) -> None:
    """Make this process end when ``parent`` (default: the one that started it) ends; when it
    already has (reparented meanwhile), end now. Idempotent."""
    global _armed_parent
    expected = parent if parent is not None else _starter()
    if expected is None or _armed_parent == expected:
        return
    _armed_parent = expected
    if not _pdeathsig():
        threading.Thread(target=_watch, args=(expected,), name="equiv-parent-watch", daemon=True).start()
    if os.getppid() != expected:  # the parent died before the signal was asked for
        os._exit(1)


def _starter() -> int | None:
    """The PID of the process that started this one as a multiprocessing child, else None."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None else None


def _pdeathsig() -> bool:
    """Ask Linux for SIGKILL when the parent ends; False where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def arm_forked_children() -> None:
    """Make every process this one forks from now on die with it (LitServe forks its uvicorn
    servers and its manager; they never call into equiv before serving)."""
    me = os.getpid()
    os.register_at_fork(after_in_child=lambda: die_with_parent(me))


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised as LitServe's Ctrl+C so its graceful shutdown stops the workers."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_on_sigterm() -> None:
    """SIGTERM (``kill PID``, a container's stop) shuts the server down as Ctrl+C does."""
    def handler(signum: int, frame: Any) -> None:
        if os.getpid() == owner:  # a forked child that kept this handler leaves it to uvicorn's
            raise Stopped(signum)
        os._exit(128 + signum)

    owner = os.getpid()
    signal.signal(signal.SIGTERM, handler)
