"""Reading and writing JSON files of a run directory: one durable writer, torn-line-aware reading.

A process killed mid-write leaves at most a torn *last* line of an appended file (no newline
after it): it is left out and reported, so its problem simply reruns. Any other malformed line
is an :class:`~equiv.errors.InputError` naming file and line -- never a silent skip.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path
from typing import IO, Any, Iterable, Mapping

from equiv.errors import InputError, JSONShapeError, loads_strict, raw_lines, read_document_bytes


def temporary_name(path: Path) -> Path:
    """A temporary file name beside ``path`` that no other writer uses: pid plus random bits.

    A fixed ``<name>.tmp`` let two writers rename each other's half-written files (issue #44);
    the run directory's lock (:mod:`equiv.rundir.lock`) keeps out a second ``eval``, and this
    keeps any two writers of one file (a driver and a helper, two tools) from sharing a name."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` by ``text`` durably: a crash at any point leaves the old file or the new one.

    The temporary file is fsynced before the rename (or the rename could land before the data),
    and the directory after it (or the rename itself could be lost).
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        with tmp.open("x", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # platforms that cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def jsonl_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """JSON Lines text of ``rows`` (UTF-8 kept readable, one object per line)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_jsonl_atomic(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """:func:`write_atomic` for a JSON Lines file."""
    write_atomic(path, jsonl_text(rows))


def append_jsonl(handle: IO[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows to an open JSONL file and fsync, so what a crash keeps is whole lines on disk."""
    handle.write(jsonl_text(rows))
    handle.flush()
    os.fsync(handle.fileno())


def read_json_lines(path: str | Path) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """``(line number, object)`` for each line of a JSONL file, and whether a torn final line
    (the writer died mid-write: no newline after it) was left out. A missing file is empty.

    Lines are streamed (:func:`equiv.errors.raw_lines`: the file is never held whole), split on
    ``\\n`` only and decoded one at a time: a torn last line may end inside a multi-byte UTF-8
    character, and decoding the whole file first would turn that tear into an unreadable file
    instead of one dropped line. A bad byte on any other line is an input error naming the line
    and the byte offset in the file.
    """
    path = Path(path)
    if not path.exists():
        return [], False
    rows: list[tuple[int, dict[str, Any]]] = []
    torn = False
    try:
        for number, start, data, last_unfinished in raw_lines(path):
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as err:
                if last_unfinished:
                    torn = True
                    continue
                raise InputError(f"not UTF-8 (byte offset {start + err.start} in the file); fix or delete the line",
                                 path=path, line=number) from None
            if not line.strip():
                continue
            try:
                obj = loads_strict(line)
            except json.JSONDecodeError as err:
                if last_unfinished:
                    torn = True
                    continue
                raise InputError(
                    f"malformed JSON: {err.msg} (column {err.colno}); fix or delete the line", path=path, line=number
                ) from None
            except JSONShapeError as err:
                raise InputError(f"{err}; fix or delete the line", path=path, line=number) from None
            if not isinstance(obj, dict):
                raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=number)
            rows.append((number, obj))
    except OSError as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    return rows, torn


def read_json_file(path: str | Path) -> Any:
    """One JSON document; unreadable or malformed files are located input errors."""
    path = Path(path)
    try:
        text = read_document_bytes(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    try:
        return loads_strict(text)
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno) from None
    except JSONShapeError as err:
        raise InputError(str(err), path=path) from None


def is_int(value: Any) -> bool:
    """An integer that is not a bool (JSON ``true`` parses to a Python int subclass)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """An int or float, not a bool, not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
