"""User-facing input errors.

Every bad input (malformed JSON line, missing field, out-of-range label, wrong path, unknown
option) is reported as one line that names where the problem is, so a user can fix the file
without reading a traceback. Entry points catch :class:`InputError`, print ``str(err)`` to stderr
and exit with status 2.
"""

from __future__ import annotations

import sys
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
