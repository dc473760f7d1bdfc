"""Where ``search_cli.py serve`` listens, checked before the judge loads.

Why: LitServe accepts only the hosts ``0.0.0.0``, ``127.0.0.1`` and ``::``, and binds the port
only after the judge has loaded and ``serving ... at`` has been printed, so ``--host localhost``
ended in a traceback and a restart on a port still held (by an earlier service's orphaned
workers, issue 66) failed "Address already in use" after claiming to serve. Here a host is read
as users type it, and a port in use is refused in one line naming the process holding it.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from equiv.errors import InputError

SERVABLE = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "0.0.0.0": "0.0.0.0", "0": "0.0.0.0",
            "": "0.0.0.0", "*": "0.0.0.0", "::": "::", "[::]": "::"}
"""What users type -> the address LitServe binds (it takes only these three)."""


def servable_host(host: str) -> str:
    """The address to bind for ``--host`` as typed: ``localhost`` is loopback (127.0.0.1), ``0``
    and ``*`` every IPv4 interface (as ``0.0.0.0``), ``[::]`` every interface; anything else is
    refused in one line (LitServe cannot bind it: not ``::1``, not one interface's address)."""
    typed = host.strip()
    if typed in SERVABLE:
        return SERVABLE[typed]
    hint = " (IPv6 loopback: LitServe binds IPv4 loopback only; use 127.0.0.1)" if typed.strip("[]") == "::1" else ""
    raise InputError(f"--host {host!r} cannot be served: LitServe binds 127.0.0.1 (or localhost), 0.0.0.0 (or 0) or "
                     f"::, nothing else{hint}")


def check_port_free(host: str, port: int) -> None:
    """Refuse, in one line naming who holds it, a port another socket listens on; as uvicorn will
    bind it (``SO_REUSEADDR``), so a port in TIME_WAIT is free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                raise InputError(f"--port {port} on {host} cannot be bound: {err.strerror}") from None
            holder = port_holder(port)
            raise InputError(f"--port {port} on {host} is already in use{f' by {holder}' if holder else ''}; stop it "
                             "or choose another --port") from None


def port_holder(port: int) -> str | None:
    """``PID n (command line)`` of a process listening on TCP ``port`` (the lowest PID of those
    sharing the socket: the one that opened it), from ``/proc`` (Linux; None elsewhere or when
    no readable process holds it)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    holders = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            holders.append(int(proc.name))
    if not holders:
        return None
    pid = min(holders)
    try:
        command = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        command = ""
    return f"PID {pid}" + (f" ({command.strip()[:120]})" if command.strip() else "")


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on ``port`` (``/proc/net/tcp`` and ``tcp6``, state 0A = LISTEN)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found
