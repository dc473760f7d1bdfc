"""User-facing input errors.

Every bad input (malformed JSON line, missing field, out-of-range label, wrong path, unknown
option) is reported as one line that names where the problem is, so a user can fix the file
without reading a traceback. Entry points catch :class:`InputError`, print ``str(err)`` to stderr
and exit with status 2.
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

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


def unencodable(text: str) -> str | None:
    """Why ``text`` is not text a tokenizer can read, or ``None``. A JSON string may hold a lone
    surrogate (``"\\ud800"``): Python reads it into a ``str`` that UTF-8 cannot encode, and the
    tokenizer then raises (issue #53: a 500 on the service that failed every request batched with
    it). NUL and other control characters, noncharacters (U+FFFE) and the last code point
    (U+10FFFF) are encodable, and the tokenizers read them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return (f"holds U+{ord(text[err.start]):04X} at character {err.start}, a lone surrogate: not text "
                "(UTF-8 cannot encode it)")
    return None


class JSONShapeError(ValueError):
    """Valid JSON syntax that a file of ours must not hold: a key twice in one object (which
    ``json.loads`` silently resolves to the last value), nesting too deep to walk, or an integer
    with more digits than the interpreter converts (``sys.get_int_max_str_digits()``, 4300)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise JSONShapeError(f"key {key!r} occurs twice in one object (which value is meant?)")
        seen[key] = value
    return seen


def loads_strict(text: str | bytes) -> object:
    """``json.loads`` that refuses duplicate keys, nesting deeper than the interpreter can parse
    (a RecursionError otherwise escapes as a traceback) and integers longer than it converts
    (a plain ValueError from inside the decoder) with :class:`JSONShapeError`; malformed JSON is
    still :class:`json.JSONDecodeError`, so readers keep telling a torn line from a bad one. The
    caller turns either into an :class:`InputError` naming file and line."""
    import json

    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise JSONShapeError("nested too deeply to read (is this a data file?)") from None
    except (json.JSONDecodeError, JSONShapeError):
        raise
    except ValueError as err:  # int('9' * 5000): "Exceeds the limit (4300 digits) for integer string conversion"
        if "digits" not in str(err):
            raise
        raise JSONShapeError(f"holds an integer with more than {sys.get_int_max_str_digits()} digits "
                             "(is this a data file?)") from None


MAX_JSON_BYTES_ENV = "EQUIV_MAX_JSON_BYTES"
DEFAULT_MAX_JSON_BYTES = 1 << 30  # 1 GiB


def max_json_bytes() -> int:
    """The most bytes one JSON document -- a whole ``.json`` file, or one line of a JSONL file --
    is read into memory: ``$EQUIV_MAX_JSON_BYTES``, else 1 GiB. JSON Lines files are streamed
    line by line, so their size is not bounded, only each line's."""
    value = os.environ.get(MAX_JSON_BYTES_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_JSON_BYTES
    if not value.isdigit() or int(value) < 1:
        raise InputError(f"must be a positive number of bytes, got {value!r}", field=MAX_JSON_BYTES_ENV)
    return int(value)


def _too_big(what: str, limit: int) -> str:
    return (f"{what} the {limit:,} bytes read into memory at once (${MAX_JSON_BYTES_ENV} raises the limit; "
            "JSON Lines -- one record a line -- are read line by line, at any size)")


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words a user knows."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def regular_input(path: str | Path, *, field: str | None = None) -> Path:
    """``path`` (a file a command reads), refused in one line when it exists but is not a regular
    file (issue 66, hole 6). A FIFO blocks the reader until some writer opens it (``compare RUN``
    hung on a FIFO ``results.jsonl``) and a character device never ends (``label --out /dev/zero``
    read a GiB before refusing): neither is data. Links are followed (reading through one harms
    nothing); a missing file is left to the caller, which knows whether that means empty."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return p
    if not stat.S_ISREG(mode):
        raise InputError(f"is {_kind(mode)}, not a regular file: refused (a reader takes files only)",
                         path=p, field=field)
    return p


def read_document_bytes(path: str | Path) -> bytes:
    """The bytes of a file read whole as one JSON document, refused past :func:`max_json_bytes`
    (a 2 GB file took 4 GB to read before the first record was checked)."""
    path = regular_input(path)
    limit = max_json_bytes()
    size = path.stat().st_size
    if size > limit:
        raise InputError(_too_big(f"is one JSON document of {size:,} bytes, over", limit), path=path)
    return path.read_bytes()


def raw_lines(path: str | Path) -> Iterator[tuple[int, int, bytes, bool]]:
    """``(line number, byte offset, line, unfinished)`` for each line of a file, streamed: the
    line's bytes without its ``\n``, and whether it is a last line with no ``\n`` after it (a
    writer may have died in it). Lines are split on ``\n`` only (``str.splitlines`` would also
    break at U+2028 and others, which JSON allows raw inside strings); the file is never held
    whole, and a line past :func:`max_json_bytes` is refused naming it."""
    path = regular_input(path)
    limit = max_json_bytes()
    with path.open("rb") as handle:
        offset = 0
        for number in itertools.count(1):
            data = handle.readline(limit + 1)
            if not data:
                return
            if len(data) > limit and not data.endswith(b"\n"):
                raise InputError(_too_big("this line is longer than", limit), path=path, line=number)
            whole = data.endswith(b"\n")
            yield number, offset, data[:-1] if whole else data, not whole
            offset += len(data)


def first_character(path: str | Path) -> str:
    """The file's first character that is not JSON whitespace (``""`` for none): ``[`` says one
    JSON list, anything else JSON Lines. Reads only as far as it."""
    with regular_input(path).open("rb") as handle:
        while chunk := handle.read(1 << 16):
            stripped = chunk.lstrip(b" \t\r\n")
            if stripped:
                return stripped[:1].decode("latin-1")
    return ""


class ServiceError(InputError):
    """A service the whole run depends on (a remote judge) is down or answers badly, after a
    bounded retry: fatal for the run -- one line, a non-zero exit -- never one problem's error
    record, and never a silent "not equivalent"."""


def check_fraction(value: object, field: str, path: str | Path | None = None, closed: bool = True) -> float:
    """A setting that is a fraction -- a number in [0, 1] ([0, 1) when not ``closed``) -- as a
    float; anything else is one line naming ``field`` (and ``path``, the file it came from)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0.0 <= value <= 1.0 if closed else 0.0 <= value < 1.0):
        raise InputError(f"must be in [0, 1{']' if closed else ')'}, got {value!r}", path=path, field=field)
    return float(value)


def check_choice(value: object, choices: Sequence[str], field: str, *, what: str = "value") -> None:
    """A setting with a fixed set of values: anything else is one line naming ``field`` and the
    values it takes (``unknown <what> 'x'; choose from a, b``: ``what`` says what the value is,
    "scope", "prompt format", where the field's name alone would not)."""
    if value not in choices:
        raise InputError(f"unknown {what} {value!r}; choose from {', '.join(choices)}", field=field)


@contextmanager
def exit_on_input_error() -> Iterator[None]:
    """Turn an :class:`InputError` raised inside the block into a one-line message and exit 2."""
    try:
        yield
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None


def output_directory_kind(path: str | Path, *, option: str = "--out") -> Path:
    """The one output rule for a directory the user names (issue 66, hole 6): a directory (or a
    link to one) or a new path; a file, a FIFO, a device or a dangling link there is refused in
    one line. Nothing is created (:func:`writable_directory` creates and proves it)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        mode = os.stat(p).st_mode
        what = "a file" if stat.S_ISREG(mode) else _kind(mode)
        raise InputError(f"{option} names {what}, not a directory", path=p)
    if p.is_symlink() and not p.exists():
        raise InputError(f"{option} is a symbolic link to nothing (a dangling link): refused; give a new path "
                         "or a directory", path=p)
    return p


def writable_directory(path: str | Path, *, option: str = "--out") -> Path:
    """Create ``path`` (an output directory the user named) and prove it can be written.

    A file in its place, a parent that is a file, or a read-only directory would otherwise
    surface as a traceback at the first write -- for ``eval`` after the models were loaded. The
    write is tried for real (a temporary file): permission bits say nothing for root or on a
    read-only mount.
    """
    p = output_directory_kind(path, option=option)
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


def output_file_kind(path: str | Path, *, option: str = "--output") -> Path:
    """The one output rule of every command (issue 66, hole 6): a file a command writes is a
    regular file or a new path; anything else is refused in one line, before any work.

    A write by rename (:func:`equiv.rundir.io.write_atomic`) *replaces* what stands at the path:
    ``agreement --disagreements /dev/stdout`` (as root) replaced the ``/dev/stdout`` link with a
    regular file; ``/dev/full`` and a FIFO likewise. A write by ``open`` goes *through* a link
    (``pairs --output link``) or blocks on a FIFO. Rather than two behaviours for one question,
    neither: a symbolic link (dangling or not), a FIFO, a device, a socket or a directory at the
    path is refused, naming what it is. Links in the directories above the file are followed."""
    p = Path(path)
    try:
        mode = os.lstat(p).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new path (a parent that is a file: said by the caller)
        return p
    except OSError as err:
        raise InputError(f"{option}: cannot inspect this path ({err.strerror or err})", path=p) from None
    if stat.S_ISREG(mode):
        return p
    hint = ("; give the file it points to, or a new path" if stat.S_ISLNK(mode)
            else "; give a file name" if stat.S_ISDIR(mode) else "; give a regular file or a new path")
    raise InputError(f"{option} names {_kind(mode)}, not a regular file: an output is a regular file or a new "
                     f"path (it is never replaced or written through){hint}", path=p)


def writable_file(path: str | Path, *, option: str = "--output") -> Path:
    """Check that ``path`` (an output file the user named) can be written, before the work.

    A directory in its place, a parent that is a file, or a parent that cannot be written would
    otherwise surface as a traceback after all the work was done (``pairs --output DIR``:
    IsADirectoryError once every pair was scored). A link, a FIFO or a device in its place is
    refused (:func:`output_file_kind`). The parent is created; the file is not."""
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        raise InputError(f"{option} names a directory, not a file", path=p)
    output_file_kind(p, option=option)
    writable_directory(p.parent if str(p.parent) else ".", option=option)
    return p


MAX_CONFIG_NODES = 100_000  # YAML values a config may expand to; the shipped recipes hold a few hundred


def check_config_files(argv: list[str] | tuple[str, ...], options: tuple[str, ...] = ("--config", "-c")) -> None:
    """Parse every YAML file named by ``--config`` in ``argv`` first, for the error's sake, and
    refuse any YAML file in ``argv`` that expands past :data:`MAX_CONFIG_NODES` values.

    jsonargparse reads a config file into a string before parsing it, so a YAML syntax error
    would name ``<unicode string>`` instead of the file. Values that are not existing files
    (inline YAML, a missing path) are left to the parser, which reports them itself.

    The bound is counted on the composed node graph, before anything is constructed: an alias
    bomb ("billion laughs": each anchor a list of nine aliases of the one before) is a few
    hundred bytes that PyYAML composes as shared nodes, but the parser copies it out into every
    alias's own values -- ``fit`` hung and took 4 GB. Other ``.yaml`` / ``.yml`` files given
    as option values (jsonargparse reads ``--data group.yaml`` as a config of that group) get
    the same bound; their syntax is left to the parser.
    """
    for index, arg in enumerate(argv):
        value = None
        for option in options:
            if arg == option and index + 1 < len(argv):
                value = argv[index + 1]
            elif arg.startswith(option + "="):
                value = arg[len(option) + 1 :]
        if value is not None and Path(value).is_file():
            _check_yaml_file(value, strict=True)
            continue
        named = arg.partition("=")[2] if arg.startswith("--") and "=" in arg else arg
        if named.endswith((".yaml", ".yml")) and Path(named).is_file() and named != value:
            _check_yaml_file(named, strict=False)


def _check_yaml_file(value: str, *, strict: bool) -> None:
    """One YAML file of ``argv`` (:func:`check_config_files`): bounded, and with ``strict`` well-formed."""
    import yaml

    try:
        text = Path(value).read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is not None and _expanded_size(root, MAX_CONFIG_NODES) > MAX_CONFIG_NODES:
            raise InputError(f"expands to more than {MAX_CONFIG_NODES:,} YAML values once its aliases (*name) are "
                             "expanded: refused (an alias bomb? a config is far smaller)", path=value)
        if strict:
            yaml.safe_load(text)
    except UnicodeDecodeError as err:
        if strict:
            raise InputError(f"is not UTF-8 text ({err.reason} at byte {err.start})", path=value) from None
    except RecursionError:
        raise InputError("is nested too deeply to read (is this a config file?)", path=value) from None
    except yaml.YAMLError as err:
        if strict:
            mark = getattr(err, "problem_mark", None)
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise InputError(f"malformed YAML: {problem}", path=value, line=mark.line + 1 if mark is not None else None) from None
    except OSError as err:
        if strict:
            raise InputError(f"cannot read: {err.strerror or err}", path=value) from None


def _expanded_size(root: object, limit: int) -> int:
    """How many nodes the YAML graph under ``root`` becomes with every alias copied out (each
    shared node counted once per reference), capped at ``limit + 1``; a node that contains
    itself (``&a [*a]``) expands without end and counts ``limit + 1``. Iterative and memoised:
    linear in the composed graph however deep or however often it is shared."""

    def children(node: object) -> list[object]:
        value = getattr(node, "value", None)
        if not isinstance(value, list):  # a scalar
            return []
        return [part for item in value for part in (item if isinstance(item, tuple) else (item,))]

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children(node)))
            on_path.discard(key)
        elif key in on_path:
            return limit + 1
        elif key not in sizes:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children(node) if id(child) not in sizes)
    return sizes[id(root)]


def one_line(text: object, limit: int = 400) -> str:
    """``text`` on one line, at most ``limit`` characters (a parser's message can run to pages)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
