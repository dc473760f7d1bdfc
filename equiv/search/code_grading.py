"""Grading generated programs (HumanEval): run the problem's tests on the final program in a sandbox.

Model code is never ``exec``-ed in the search process. :func:`run_sandboxed` writes the program to
a fresh temporary directory and runs it in a *separate, fresh interpreter* (``python -I``: no
user site, no ``PYTHON*`` variables, the script's directory not on ``sys.path``) with:

- a wall-clock timeout; on expiry the whole process group is killed;
- resource limits set in ``preexec_fn``: CPU seconds, address space, size of any file written,
  number of processes, no core dumps;
- stdout and stderr sent to a file whose size the file-size limit caps, so a program that prints
  megabytes is killed by ``SIGXFSZ`` instead of filling the grader's memory;
- on x86-64 Linux a seccomp filter (installed with ``prctl`` before ``exec``) under which
  ``fork``/``clone``, ``socket``, opening a file for writing, deleting, renaming, linking or
  chmod-ing anything, signalling another process, mounting and the like fail with ``EPERM``: no
  subprocesses, no fork bombs, no network and no changes to the file system, even when the grader
  runs as root (for root the kernel ignores ``RLIMIT_NPROC`` and file permissions). The program
  can still *read* what the grader's user can read. Elsewhere the process limit and, where the
  kernel allows, a new network namespace (``unshare``) stand in, plus a prelude that disables
  ``socket`` in the child -- weaker: there, run the grader as an unprivileged user;
- an environment with nothing but ``PATH``, ``HOME`` (the temporary directory) and ``LANG``.

A program that hangs, crashes, floods its output or hits a limit is a *wrong answer*
(:class:`SandboxResult.passed` False, with the reason in ``status``); the grader never raises on
model code. The sandbox itself fails closed: where the seccomp filter is the promised protection
(x86-64 Linux) and the kernel refuses to install it (or a resource limit cannot be set), the
program is not run at all and :class:`SandboxError` is raised -- the runner records it as the
problem's ``error`` (retried on rerun), never as a silently wrong or an unsandboxed answer.

HumanEval problems carry their tests in :class:`equiv.data.humaneval.CodeTask` (prompt, test
code, entry point), serialised as JSON into :attr:`equiv.data.problems.Problem.answer` so the runner's
``grade(prediction, answer, kind)`` contract is unchanged (kind ``"code"``).
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
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

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_BYTES = 1 << 30  # address space: enough for CPython and a HumanEval test
DEFAULT_OUTPUT_BYTES = 1 << 20  # largest file (and stdout/stderr) the program may write
MAX_PROGRAM_CHARS = 100_000  # a longer "program" is not a HumanEval solution

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


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
    continuation of the prompt (completion style) and appended to it."""
    if not re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(task.entry_point)}\s*\(", program, re.MULTILINE):
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
    """``status``: ``passed``, ``failed`` (non-zero exit), ``timeout``, ``killed`` (a signal:
    CPU, file size, segfault...) or ``output_limit``. A sandbox that cannot be set up raises
    :class:`SandboxError` instead: the program never ran, so there is no verdict."""

    passed: bool
    status: str
    returncode: int | None
    output: str


# Prelude run in the child before the program: no sockets even where seccomp is unavailable.
_PRELUDE = (
    "import socket as _s\n"
    "def _no_network(*a, **k):\n"
    "    raise OSError('network access is disabled in the grading sandbox')\n"
    "for _n in ('socket', 'create_connection', 'getaddrinfo', 'socketpair', 'fromfd'):\n"
    "    setattr(_s, _n, _no_network)\n"
    "del _s, _n, _no_network\n"
)

# x86-64 system call numbers the seccomp filter refuses (EPERM): processes, network, and every
# call that changes the file system or other processes (the grader may run as root, and the
# program must not delete, rename or chmod anything, load modules or signal other processes).
_BLOCKED_SYSCALLS = {
    "socket": 41, "clone": 56, "fork": 57, "vfork": 58, "clone3": 435, "unshare": 272, "setns": 308,
    "ptrace": 101, "process_vm_writev": 311, "pidfd_open": 434, "pidfd_send_signal": 424,
    "creat": 85, "openat2": 437, "open_by_handle_at": 304, "truncate": 76, "ftruncate": 77,
    "rename": 82, "renameat": 264, "renameat2": 316, "mkdir": 83, "mkdirat": 258, "rmdir": 84,
    "link": 86, "unlink": 87, "symlink": 88, "linkat": 265, "unlinkat": 263, "symlinkat": 266,
    "chmod": 90, "fchmod": 91, "fchmodat": 268, "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
    "mknod": 133, "mknodat": 259, "utime": 132, "utimes": 235, "utimensat": 280, "futimesat": 261,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
    "fremovexattr": 199, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "swapon": 167,
    "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "kexec_load": 246, "bpf": 321, "perf_event_open": 298,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "settimeofday": 164,
    "clock_settime": 227, "acct": 163, "quotactl": 179, "name_to_handle_at": 303,
}
_OPEN, _OPENAT = 2, 257  # allowed only without a write flag
_SIGNALS = (62, 200, 234)  # kill, tkill, tgkill: allowed only at the program itself
_WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000  # O_WRONLY O_RDWR O_CREAT O_TRUNC O_APPEND
_AUDIT_ARCH_X86_64 = 0xC000003E
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000


def _seccomp_program(pid: int) -> tuple[bytes, int]:
    """A classic-BPF seccomp filter (x86-64) for the program with process id ``pid``.

    Blocked calls (:data:`_BLOCKED_SYSCALLS`) fail with EPERM; ``open``/``openat`` with a write
    flag fail (the program's stdout is a file the parent opened); ``kill``/``tkill``/``tgkill``
    work only on the program itself (``os.abort`` still crashes it); another architecture is
    killed. ``clone`` with ``CLONE_THREAD`` is blocked too: HumanEval tests need no threads.
    """
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to relative offsets.
    prog: list[tuple[int, str | None, str | None, int]] = [
        (ld, None, None, 4), (jeq, "nr", None, _AUDIT_ARCH_X86_64), (ret, None, None, kill),
    ]
    labels: dict[str, int] = {"nr": len(prog)}
    prog.append((ld, None, None, 0))
    for nr in sorted(set(_BLOCKED_SYSCALLS.values())):
        prog.append((jeq, "deny", None, nr))
    prog += [(jeq, "open", None, _OPEN), (jeq, "openat", None, _OPENAT)]
    prog += [(jeq, "self", None, nr) for nr in _SIGNALS]
    prog.append((ret, None, None, allow))
    labels["open"] = len(prog)
    prog += [(ld, None, None, 24), (jset, "deny", "allow", _WRITE_FLAGS)]  # args[1] (low word)
    labels["openat"] = len(prog)
    prog += [(ld, None, None, 32), (jset, "deny", "allow", _WRITE_FLAGS)]  # args[2]
    labels["self"] = len(prog)
    prog += [(ld, None, None, 16), (jeq, "allow", "deny", pid)]  # args[0]
    labels["deny"] = len(prog)
    prog.append((ret, None, None, eperm))
    labels["allow"] = len(prog)
    prog.append((ret, None, None, allow))

    def rel(label: str | None, at: int) -> int:
        if label is None:
            return 0
        offset = labels[label] - at - 1
        assert 0 <= offset < 256, "seccomp jump out of range"
        return offset

    code = b"".join(struct.pack("HBBI", c, rel(t, i), rel(f, i), k) for i, (c, t, f, k) in enumerate(prog))
    return code, len(prog)


class _Kernel:
    """libc, loaded in the parent so that the child makes no ``dlopen`` between fork and exec."""

    def __init__(self) -> None:
        try:
            self.libc: Any = ctypes.CDLL(None, use_errno=True)
        except OSError:
            self.libc = None
        self.seccomp = self.libc is not None and sys.platform == "linux" and os.uname().machine == "x86_64"
        self.net_flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET

    def unshare_network(self) -> None:
        """A new, empty network namespace (root), or a user + network namespace; best effort."""
        if self.libc is not None:
            self.libc.unshare(self.net_flags)

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

    def preexec() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
        kernel.unshare_network()
        # Fail closed: on a platform where the filter is the protection, running without it
        # would let model code fork, open sockets and write files (as root: anywhere). Raising
        # here aborts the exec; the parent sees it as a failed start (run_sandboxed).
        if kernel.seccomp and not kernel.install_seccomp():
            raise _SeccompNotInstalled("the seccomp filter could not be installed")

    return preexec


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_sandboxed(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run ``source`` as a Python program in the sandbox (module docstring); never raises on it.

    Raises :class:`SandboxError` (without running ``source``) when the sandbox cannot be set up.
    """
    with tempfile.TemporaryDirectory(prefix="equiv-sandbox-") as tmp:
        work = Path(tmp)
        script = work / "program.py"
        script.write_text(_PRELUDE + source, encoding="utf-8")
        out_path = work / "output.txt"
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        with out_path.open("wb") as out:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", str(script)],
                    cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    preexec_fn=_limiter(limits), start_new_session=True, close_fds=True,
                )
            except (OSError, subprocess.SubprocessError) as err:
                # preexec_fn failures (the seccomp filter or a limit) arrive as "Exception occurred
                # in preexec_fn"; nothing of the program ran.
                raise SandboxError(
                    f"could not set up the grading sandbox ({err}: its resource limits or seccomp filter); "
                    "the program was not run"
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
        size = out_path.stat().st_size
        with out_path.open("rb") as fh:
            output = fh.read(4096).decode("utf-8", "replace")
        code = proc.returncode
        if timed_out:
            status = "timeout"
        elif code == -signal.SIGXFSZ or size >= limits.output_bytes:
            status = "output_limit"
        elif code is not None and code < 0:
            status = "killed"
        elif code != 0:
            status = "failed"
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
