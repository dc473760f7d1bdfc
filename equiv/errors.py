"""User-facing input errors.

Every bad input (malformed JSON line, missing field, out-of-range label, wrong path, unknown
option) is reported as one line that names where the problem is, so a user can fix the file
without reading a traceback. Entry points catch :class:`InputError`, print ``str(err)`` to stderr
and exit with status 2.
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

EXIT_BAD_INPUT = 2


class InputError(ValueError):
    """A problem with user input, located by file, line and field where known."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}{what}{self.message}"


@contextmanager
def exit_on_input_error() -> Iterator[None]:
    """Turn an :class:`InputError` raised inside the block into a one-line message and exit 2."""
    try:
        yield
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None


def writable_directory(path: str | Path, *, option: str = "--out") -> Path:
    """Create ``path`` (an output directory the user named) and prove it can be written.

    A file in its place, a parent that is a file, or a read-only directory would otherwise
    surface as a traceback at the first write -- for ``eval`` after the models were loaded. The
    write is tried for real (a temporary file): permission bits say nothing for root or on a
    read-only mount.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} names a file, not a directory", path=p)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{option}: cannot create this directory ({err.strerror or err})", path=p) from None
    try:
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as err:
        raise InputError(f"{option}: cannot write in this directory ({err.strerror or err})", path=p) from None
    return p
