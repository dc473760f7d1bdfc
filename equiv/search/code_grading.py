"""Grading generated programs (HumanEval): run the problem's tests on the final program in a sandbox.

Model code is never ``exec``-ed in the search process. :func:`run_sandboxed` writes the program and
a small harness to a fresh temporary directory and runs the harness in a *separate, fresh
interpreter* (``python -I``: no user site, no ``PYTHON*`` variables) with:

- a wall-clock timeout; on expiry the whole process group is killed;
- resource limits set in ``preexec_fn``: CPU seconds, address space, size of any file written,
  number of processes, no core dumps;
- stdout and stderr sent to an unlinked temporary file whose size the file-size limit caps, so a
  program that prints megabytes is killed by ``SIGXFSZ`` instead of filling the grader's memory;
- when the grader is root, an unprivileged user: the child becomes a uid/gid of its own (``2e9 +
  pid``, which no file and no other process has) with no supplementary groups before ``exec``, in a new network namespace (no network) and, where the
  interpreter lives in a folder only root can search (``/root/.pyenv``), a private mount
  namespace that binds just the interpreter's folders back over an empty tmpfs (nothing mounted
  there reaches the host). The program reads only world-readable files and, by file permissions
  alone, writes nowhere but world-writable folders; an unprivileged grader runs it as itself;
- on x86-64 Linux a seccomp filter (installed with ``prctl`` before ``exec``) that is an
  *allow-list* (:data:`_ALLOWED_SYSCALLS`): every other system call fails with ``EPERM`` -- no
  ``fork``/``clone``, sockets, opening a file for writing, deleting, renaming, chmod, mounting
  (old and new API), namespaces, ptrace; signals only to itself, and no other way to make the
  kernel signal anyone (``fcntl`` only dups and flags its own descriptors: no ``F_SETOWN``/
  ``F_SETSIG``/``O_ASYNC``, leases, watches or locks); x32 calls are refused and any
  other architecture kills the process. Elsewhere the process limit, the network namespace and
  a ``socket`` stand-in in the harness are all there is -- weaker;
- an environment with nothing but ``PATH``, ``HOME`` (the temporary directory), ``LANG`` and
  one-thread settings for numerical libraries.

A pass means every test ran and passed: the harness prints a per-run random marker after
``check(entry_point)`` returned, and the run counts only with exit status 0 *and* that marker last
in the output (the marker reaches the harness through an inherited pipe it closes before model
code runs; see :data:`_HARNESS`). ``sys.exit(0)``, ``os._exit(0)``, ``exit()`` or ``quit()`` in a
program is ``exited_early``, a wrong answer. A program that hangs, crashes, floods its output, hits
a limit or exits early is a *wrong answer* (:class:`SandboxResult.passed` False, with the reason in
``status``); the grader never raises on model code. The sandbox itself fails closed: where the
kernel refuses the filter, a namespace, the uid change or a resource limit, or the harness never
starts, :class:`SandboxError` is raised -- the runner records it as the problem's ``error``
(retried on rerun), never as a silently wrong, an unsandboxed or a passing answer. What this does
and does not promise is in ``docs/reproducing.md`` ("Security: what the code grader promises").

HumanEval problems carry their tests in :class:`equiv.data.humaneval.CodeTask` (prompt, test
code, entry point), serialised as JSON into :attr:`equiv.data.problems.Problem.answer` so the runner's
``grade(prediction, answer, kind)`` contract is unchanged (kind ``"code"``).
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import secrets
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from equiv.data.humaneval import CodeTask
from equiv.errors import unencodable

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_BYTES = 1 << 30  # address space: enough for CPython and a HumanEval test
DEFAULT_OUTPUT_BYTES = 1 << 20  # largest file (and stdout/stderr) the program may write
MAX_PROGRAM_CHARS = 100_000  # a longer "program" is not a HumanEval solution

_FENCE = re.compile(r"```[ \t]*(?:(?:python3?|py)[ \t]*)?\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


# -- the program ------------------------------------------------------------------------------
def extract_program(text: str | None) -> str | None:
    """The program in a solution: the last fenced code block, else the whole text (steps of a
    completion-style solution are plain code). None when there is no code."""
    if not text or not text.strip():
        return None
    blocks = [b for b in _FENCE.findall(text) if b.strip()]
    code = blocks[-1] if blocks else text
    code = code.strip("\n")
    return code if code.strip() else None


def build_test_program(program: str, task: CodeTask) -> str:
    """Program + the problem's tests. A body without ``def <entry_point>`` is taken as the
    continuation of the prompt (completion style) and appended to it.

    The ``def`` is looked for with blanks that stay on its line (space, tab): with any whitespace
    the multiline pattern ran from every line start across all the blank lines after it, quadratic
    in them (issue 66, hole 9: 43 s on 80 KB of blank lines, in the parent, before the sandbox's
    timeout applies). A Python ``def`` and its name never span lines."""
    if not re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(task.entry_point)}[ \t]*\(", program, re.MULTILINE):
        program = task.prompt + program
    return f"{program}\n\n{task.test}\n\ncheck({task.entry_point})\n"


# -- the sandbox ------------------------------------------------------------------------------
class SandboxError(RuntimeError):
    """The sandbox could not be set up, so the program was not run (not the program's fault)."""


class _SeccompNotInstalled(OSError):
    """Raised in the child between fork and exec: the filter is missing, so exec must not happen."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run (defaults suit HumanEval)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    output_bytes: int = DEFAULT_OUTPUT_BYTES
    max_processes: int = 1


@dataclass(frozen=True)
class SandboxResult:
    """``status``: ``passed`` (exit 0 *and* the harness's end-of-tests marker last in the output),
    ``failed`` (non-zero exit), ``exited_early`` (exit 0 without the marker: the program or a test
    ended the interpreter before every test ran -- ``sys.exit(0)``, ``os._exit(0)``, ``exit()``),
    ``timeout``, ``killed`` (a signal: CPU, file size, segfault, a refused architecture...) or
    ``output_limit``. A sandbox that cannot be set up raises :class:`SandboxError` instead: the
    program never ran, so there is no verdict."""

    passed: bool
    status: str
    returncode: int | None
    output: str


# The harness: the script the sandboxed interpreter runs. It reads the end-of-tests marker from
# an inherited pipe (the parent wrote it there and closed its end) and closes that pipe *before*
# any model code runs, so the marker is in no file, argument or environment variable the program
# can read; runs the program + tests as ``__main__``; and writes the marker only after the last
# test returned, then ends the interpreter at once (``os._exit``: no atexit hook of the program runs
# after it, so the marker stays the last thing printed). Any exit before that -- SystemExit from
# ``sys.exit``/``exit()``/``quit()``, ``os._exit`` or a crash -- leaves the marker out. It also
# disables ``socket`` in Python (the only network guard where seccomp is unavailable).
_HARNESS = '''\
import os as _os
import sys as _sys


def _equiv_harness():
    fd, path = int(_sys.argv[1]), _sys.argv[2]
    marker = _os.read(fd, 256)
    _os.close(fd)
    import socket
    import types

    def no_network(*args, **kwargs):
        raise OSError("network access is disabled in the grading sandbox")

    class NoSocket(socket.socket):  # a class still, so that ``class SSLSocket(socket)`` imports
        __init__ = no_network

    socket.socket = NoSocket
    for name in ("create_connection", "getaddrinfo", "socketpair", "fromfd"):
        setattr(socket, name, no_network)
    with open(path, encoding="utf-8") as fh:
        code = compile(fh.read(), path, "exec")
    main = types.ModuleType("__main__")
    main.__file__ = path
    _sys.modules["__main__"] = main
    _sys.argv[:] = [path]
    exec(code, main.__dict__)
    _sys.stdout.flush()
    _sys.stderr.flush()
    _os.write(1, marker)
    _os._exit(0)


_equiv_harness()
'''
_MARKER_PREFIX = "\nequiv-sandbox: all tests ran "

# x86-64 system calls a CPython test program needs (found by tracing the 164 HumanEval canonical
# solutions, this file's tests and imports of the common standard-library modules with ``strace
# -f``): memory, reading files and directories, stdout/stderr, signals to itself, clocks, sleeps,
# limits. Everything else fails with EPERM -- in particular processes (clone/fork), sockets, every
# call that writes to or changes the file system, mounting (old and new API: fsopen, fsmount,
# move_mount, open_tree, fspick, mount_setattr), namespaces, ptrace, keys, bpf, io_uring.
_ALLOWED_SYSCALLS = {
    "read": 0, "write": 1, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7, "lseek": 8,
    "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13, "rt_sigprocmask": 14,
    "rt_sigreturn": 15, "pread64": 17, "readv": 19, "writev": 20, "access": 21, "pipe": 22,
    "select": 23, "sched_yield": 24, "mremap": 25, "madvise": 28, "dup": 32, "dup2": 33, "pause": 34,
    "nanosleep": 35, "getitimer": 36, "alarm": 37, "setitimer": 38, "getpid": 39, "execve": 59,
    "exit": 60, "uname": 63, "getdents": 78, "getcwd": 79, "chdir": 80, "fchdir": 81,
    "readlink": 89, "umask": 95, "gettimeofday": 96, "getrlimit": 97, "getrusage": 98, "sysinfo": 99,
    "times": 100, "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108, "getppid": 110,
    "getpgrp": 111, "getgroups": 115, "getresuid": 118, "getresgid": 120, "sigaltstack": 131,
    "statfs": 137, "fstatfs": 138, "arch_prctl": 158, "setrlimit": 160, "gettid": 186, "time": 201,
    "futex": 202,
    "epoll_create": 213, "getdents64": 217, "set_tid_address": 218, "restart_syscall": 219,
    "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230, "exit_group": 231,
    "epoll_wait": 232, "epoll_ctl": 233, "mbind": 237, "newfstatat": 262, "readlinkat": 267,
    "faccessat": 269, "pselect6": 270, "ppoll": 271, "set_robust_list": 273, "epoll_pwait": 281,
    "epoll_create1": 291, "dup3": 292, "pipe2": 293, "getcpu": 309, "getrandom": 318, "statx": 332,
    "rseq": 334, "close_range": 436, "faccessat2": 439,
}
# Allowed only with checked arguments (the rest of each call's uses fail with EPERM):
_OPEN, _OPENAT = 2, 257  # without a write flag (the program's stdout is a file the parent opened)
# ioctl: only TCGETS, TIOCGWINSZ, FIOCLEX/FIONCLEX and FIONBIO -- what isatty, get_terminal_size,
# os.set_inheritable and os.set_blocking use on the program's own descriptors (not FIOASYNC,
# FIOSETOWN or TIOCSTI, which reach other processes)
_IOCTL = 16
_IOCTL_REQUESTS = (0x5401, 0x5413, 0x5451, 0x5450, 0x5421)
_SIGNALS = (62, 200, 234)  # kill, tkill, tgkill: only at the program itself (os.abort still works)
_PRLIMIT64 = 302  # only on itself (pid 0): other sandboxes run as the same unprivileged user
# Queries that take a pid (getpgid, getsid, sched_getaffinity): only on itself (0 or its own pid).
_SELF_QUERIES = (121, 124, 204)
# fcntl: only what CPython does with its own descriptors (dup, close-on-exec, blocking mode). The
# rest reaches outside the process: F_SETOWN/F_SETOWN_EX + F_SETSIG + O_ASYNC make the kernel send
# any signal, SIGKILL included, to another process of the same user (a non-root grader) when I/O
# happens; F_SETLEASE/F_NOTIFY signal too; record locks (F_SETLK*, OFD locks) block other processes.
_FCNTL = 72
_FCNTL_COMMANDS = (0, 1, 2, 3, 1030)  # F_DUPFD F_GETFD F_SETFD F_GETFL F_DUPFD_CLOEXEC
_F_SETFL = 4  # allowed without O_ASYNC (the flag that arms the signal)
_O_ASYNC = 0o20000
_WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000  # WRONLY RDWR CREAT TRUNC APPEND TMPFILE
_X32_BIT = 0x40000000  # x32 ABI calls are the x86-64 numbers with this bit set: all refused
_AUDIT_ARCH_X86_64 = 0xC000003E
_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
_UID_BASE = 2_000_000_000  # root's sandbox runs as uid = gid = _UID_BASE + its pid (see drop_privileges)


def _seccomp_program(pid: int) -> tuple[bytes, int]:
    """A classic-BPF seccomp filter (x86-64) for the program with process id ``pid``: an allow-list.

    Any architecture other than x86-64 (an ``int 0x80`` i386 call from a 64-bit process, say) kills
    the process; x32 calls (``nr >= 0x40000000``) and every call not in :data:`_ALLOWED_SYSCALLS`
    fail with EPERM; ``open``/``openat`` work only without a write flag, ``ioctl`` only for the
    terminal queries and the flags CPython sets on its own descriptors, ``fcntl`` only for
    :data:`_FCNTL_COMMANDS` and ``F_SETFL`` without ``O_ASYNC``; signals, ``prlimit64`` and the
    pid-taking queries only on the program itself.
    ``clone``/``clone3`` are refused outright, threads included: HumanEval tests need none.
    """
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm, kill_process = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to relative offsets.
    prog: list[tuple[int, str | None, str | None, int]] = [
        (ld, None, None, 4), (jeq, None, "kill", _AUDIT_ARCH_X86_64),
        (ld, None, None, 0), (jset, "deny", None, _X32_BIT),
    ]
    prog += [(jeq, "allow", None, nr) for nr in sorted(set(_ALLOWED_SYSCALLS.values()))]
    prog += [(jeq, "open", None, _OPEN), (jeq, "openat", None, _OPENAT), (jeq, "ioctl", None, _IOCTL),
             (jeq, "prlimit", None, _PRLIMIT64), (jeq, "fcntl", None, _FCNTL)]
    prog += [(jeq, "self", None, nr) for nr in _SIGNALS]
    prog += [(jeq, "self_or_0", None, nr) for nr in _SELF_QUERIES]
    prog.append((ret, None, None, eperm))  # everything else
    labels: dict[str, int] = {"open": len(prog)}
    prog += [(ld, None, None, 24), (jset, "deny", "allow", _WRITE_FLAGS)]  # args[1] (low word)
    labels["openat"] = len(prog)
    prog += [(ld, None, None, 32), (jset, "deny", "allow", _WRITE_FLAGS)]  # args[2]
    labels["ioctl"] = len(prog)
    prog.append((ld, None, None, 24))  # args[1]: the request
    prog += [(jeq, "allow", None, request) for request in _IOCTL_REQUESTS]
    prog.append((ret, None, None, eperm))
    labels["fcntl"] = len(prog)
    prog.append((ld, None, None, 24))  # args[1]: the command (an unsigned int to the kernel)
    prog += [(jeq, "allow", None, command) for command in _FCNTL_COMMANDS]
    prog.append((jeq, None, "deny", _F_SETFL))
    prog += [(ld, None, None, 32), (jset, "deny", "allow", _O_ASYNC)]  # args[2]: the new flags
    labels["prlimit"] = len(prog)
    prog += [(ld, None, None, 16), (jeq, "allow", "deny", 0)]  # args[0]: pid 0 is the caller
    labels["self_or_0"] = len(prog)
    prog += [(ld, None, None, 16), (jeq, "allow", None, 0)]  # args[0] 0, else falls through to "self"
    labels["self"] = len(prog)
    prog += [(ld, None, None, 16), (jeq, "allow", "deny", pid)]  # args[0]
    labels["deny"] = len(prog)
    prog.append((ret, None, None, eperm))
    labels["allow"] = len(prog)
    prog.append((ret, None, None, allow))
    labels["kill"] = len(prog)
    prog.append((ret, None, None, kill_process))

    def rel(label: str | None, at: int) -> int:
        if label is None:
            return 0
        offset = labels[label] - at - 1
        assert 0 <= offset < 256, "seccomp jump out of range"
        return offset

    code = b"".join(struct.pack("HBBI", c, rel(t, i), rel(f, i), k) for i, (c, t, f, k) in enumerate(prog))
    return code, len(prog)


def _closed_ancestor(path: str) -> str | None:
    """The highest directory on ``path`` (itself included) that other users cannot search, if any."""
    parts = Path(path).parts
    for i in range(1, len(parts) + 1):
        here = os.path.join(*parts[:i])
        try:
            if not os.stat(here).st_mode & 0o001:
                return here
        except OSError:
            return None
    return None


def _exposures(paths: list[str]) -> dict[str, list[str]]:
    """Directories the unprivileged user must reach but cannot, grouped by the closed directory
    above them: ``{closed: [path under it, ...]}`` (no path under another).

    The interpreter often lives where only root can search (``/root/.pyenv``, ``/root/.venv``);
    the sandbox then covers the closed directory with an empty tmpfs in a private mount namespace
    and binds just these paths back (read-only for the unprivileged user, like the originals).
    """
    closed_above: dict[str, str] = {}
    for path in sorted({p for path in paths for p in (os.path.abspath(path), os.path.realpath(path))}):
        closed = _closed_ancestor(path)
        if closed == path:
            raise SandboxError(
                f"{path} cannot be searched by other users, and graded programs run as an unprivileged uid "
                "when the grader is root: make it world-searchable (chmod o+x) or run the grader as an ordinary user"
            )
        if closed is not None:
            closed_above[path] = closed
    out: dict[str, list[str]] = {}
    for path, closed in closed_above.items():  # a path inside another bound one comes with it
        if not any(other != path and path.startswith(other.rstrip("/") + "/") for other in closed_above):
            out.setdefault(closed, []).append(path)
    return out


class _Kernel:
    """libc and the run-independent setup facts, found in the parent so that the child makes no
    ``dlopen`` and no decision between fork and exec."""

    def __init__(self) -> None:
        try:
            self.libc: Any = ctypes.CDLL(None, use_errno=True)
        except OSError:
            self.libc = None
        self.linux = self.libc is not None and sys.platform == "linux"
        self.seccomp = self.linux and os.uname().machine == "x86_64"
        # Root does not run model code: the child becomes an unprivileged uid (see drop_privileges).
        self.drop = os.geteuid() == 0
        self.net_flags = _CLONE_NEWNET if self.drop else _CLONE_NEWUSER | _CLONE_NEWNET
        interpreter_dirs = [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable)),
                            sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
        self.exposures = _exposures(interpreter_dirs) if self.drop else {}

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def isolate(self) -> None:
        """New network namespace (empty: no network even without seccomp) and, where the
        interpreter must be exposed, a private mount namespace. Root: required; otherwise best
        effort (an unprivileged grader runs programs as itself, with nothing more to drop)."""
        if not self.linux:
            return
        if not self.drop:
            self.libc.unshare(self.net_flags)
            return
        flags = self.net_flags | (_CLONE_NEWNS if self.exposures else 0)
        self._check(self.libc.unshare(flags), "unshare")
        if not self.exposures:
            return
        # Private first: nothing mounted below may propagate to the host's mount namespace.
        self._check(self.libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
        os.umask(0o022)  # the directories made below must be searchable by the unprivileged user
        for closed, paths in self.exposures.items():
            fds = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in paths]  # before they are hidden
            self._check(self.libc.mount(b"tmpfs", closed.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                                        b"mode=0755,size=64k"), f"mount tmpfs on {closed}")
            for path, fd in zip(paths, fds):
                os.makedirs(path, mode=0o755, exist_ok=True)  # inside the new tmpfs only
                source = f"/proc/self/fd/{fd}".encode()
                self._check(self.libc.mount(source, path.encode(), None, _MS_BIND | _MS_REC, None), f"bind {path}")
                os.close(fd)

    def drop_privileges(self) -> None:
        """Root becomes uid = gid = ``_UID_BASE + pid`` with no supplementary groups, before exec.

        Why a plain uid change and not only a user namespace: in a user namespace the process keeps
        its kernel uid 0, so it still *owns* every root-owned file (reads ``0600`` ones); an
        unprivileged uid owns nothing, reads only world-readable files and writes only where
        others may -- checked by the kernel independently of the seccomp filter. Why one uid per
        run and not ``nobody``: processes of one uid can read each other's ``/proc/<pid>`` (open
        files, memory), so concurrent sandboxes as ``nobody`` could read or take each other's
        marker pipe; the pid is unique among live processes, so no other process has this uid, and
        ``RLIMIT_NPROC`` (counted per uid) is exact even without seccomp.
        """
        if not self.drop:
            return
        uid = _UID_BASE + os.getpid()
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid or os.getgroups():
            raise OSError("the grading sandbox could not drop root")

    def install_seccomp(self) -> bool:
        if not self.seccomp:
            return False
        code, count = _seccomp_program(os.getpid())
        buf = ctypes.create_string_buffer(code, len(code))

        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        prog = _Prog(count, ctypes.cast(buf, ctypes.c_void_p))
        pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
        if self.libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            return False
        return self.libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(prog), 0, 0) == 0


_KERNEL: _Kernel | None = None


def _limiter(limits: SandboxLimits):
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _Kernel()
    kernel = _KERNEL
    cpu = max(1, int(limits.timeout_s) + 1)

    def preexec() -> None:  # runs in the child between fork and exec; any exception aborts the exec
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        kernel.isolate()
        kernel.drop_privileges()
        # After the uid change: set before it, a limit below the new uid's process count would
        # make the exec fail with EAGAIN (the kernel's check on set*uid).
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
        # Fail closed: on a platform where the filter is the protection, running without it
        # would let model code fork, open sockets and write files. Raising here aborts the exec;
        # the parent sees it as a failed start (run_sandboxed).
        if kernel.seccomp and not kernel.install_seccomp():
            raise _SeccompNotInstalled("the seccomp filter could not be installed")

    return preexec


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(fh: Any, size: int, n: int) -> bytes:
    fh.seek(max(0, size - n))
    return fh.read(n)


def run_sandboxed(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run ``source`` as a Python program in the sandbox (module docstring); never raises on it.

    Raises :class:`SandboxError` (without running ``source``, or where the harness never started)
    when the sandbox cannot be set up. A run that times out is ``timeout`` even if the interpreter
    was still starting (a slow machine, not a broken sandbox; never a pass either way).
    """
    problem = unencodable(source)
    if problem is not None:  # a program that cannot be written is a failed program (issue 66, hole 7)
        return SandboxResult(False, "failed", None, f"the program {problem}, so it cannot be written as a "
                             "Python source file; not run")
    marker = f"{_MARKER_PREFIX}{secrets.token_hex(16)}\n".encode()
    with tempfile.TemporaryDirectory(prefix="equiv-sandbox-") as tmp, tempfile.TemporaryFile() as out:
        work = Path(tmp)
        os.chmod(tmp, 0o755)  # readable, not writable, by the unprivileged user
        script = work / "program.py"
        script.write_text(source, encoding="utf-8")
        harness = work / "harness.py"
        harness.write_text(_HARNESS, encoding="utf-8")
        for path in (script, harness):
            os.chmod(path, 0o644)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        nonce_r, nonce_w = os.pipe()
        try:
            os.write(nonce_w, marker)  # fits the pipe buffer; the parent's write end closes at once
            os.close(nonce_w)
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", str(harness), str(nonce_r), str(script)],
                    cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    preexec_fn=_limiter(limits), start_new_session=True, close_fds=True, pass_fds=(nonce_r,),
                )
            except (OSError, subprocess.SubprocessError) as err:
                # preexec_fn failures (the seccomp filter, a namespace, the uid change or a limit)
                # arrive as "Exception occurred in preexec_fn"; nothing of the program ran.
                raise SandboxError(
                    f"could not set up the grading sandbox ({err}: its resource limits, namespaces, "
                    "unprivileged user or seccomp filter); the program was not run"
                ) from None
            deadline = time.monotonic() + limits.timeout_s
            timed_out = False
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(proc)  # the program's own children too (where it could make any)
            if timed_out:
                proc.wait()
            os.set_blocking(nonce_r, False)
            try:
                started = os.read(nonce_r, len(marker)) == b""  # the harness took the marker
            except BlockingIOError:
                started = True
        finally:
            os.close(nonce_r)
        size = out.seek(0, os.SEEK_END)
        tail = _tail(out, size, len(marker))
        out.seek(0)
        output = out.read(4096 + len(marker)).decode("utf-8", "replace")
    code = proc.returncode
    if not started and not timed_out:
        # The harness never ran (the interpreter could not start or read it): a setup failure.
        raise SandboxError(f"the grading sandbox's harness did not start (exit {code}): {output[:300]!r}")
    marked = tail == marker
    if marked:
        output = output.replace(marker.decode(), "")
    output = output[:4096]
    if timed_out:
        status = "timeout"
    elif code == -signal.SIGXFSZ or size >= limits.output_bytes:
        status = "output_limit"
    elif code is not None and code < 0:
        status = "killed"
    elif code != 0:
        status = "failed"
    elif not marked:
        status = "exited_early"
    else:
        status = "passed"
    return SandboxResult(status == "passed", status, code, output)


def grade_code(prediction: str | None, answer: str, *, limits: SandboxLimits = SandboxLimits()) -> bool:
    """Does the program ``prediction`` pass the tests of the task serialised in ``answer``?

    :class:`SandboxError` propagates: an unavailable sandbox is a failed grading, not a wrong answer.
    """
    if prediction is None or not prediction.strip() or len(prediction) > MAX_PROGRAM_CHARS:
        return False
    try:
        task = CodeTask.from_answer(answer)
    except (ValueError, KeyError, TypeError):
        return False
    return run_sandboxed(build_test_program(prediction, task), limits).passed
