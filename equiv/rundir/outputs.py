"""Where a command may write: never over one of its own inputs, never inside a run directory.

Issue #53, item 7: ``agreement a.jsonl b.jsonl --disagreements a.jsonl`` replaced ``a.jsonl`` with
the (empty) disagreements, and ``siblings RUN --out RUN/results.jsonl`` replaced a run's records
while ``eval`` held its lock. Every command that writes a file the user names (``label``,
``agreement``, ``siblings``, ``pairs --output``, ``report --out``, ``solution_pairs``) checks its
outputs here first, before any work, and refuses in one line:

- an output that *is* one of the inputs: the same real path (symbolic links resolved), or the same
  file under another name (a hard link: :func:`os.path.samefile`);
- an output inside an input directory (``siblings RUN --out RUN/trees/x.json``);
- an output inside a run directory (one holding ``run.lock``, or ``results.jsonl`` beside
  ``config.yaml``: what every ``eval`` leaves), the directory itself included: only ``eval`` writes there, under its lock; a file another command drops in
  would be another writer the lock never saw.

Then the one output rule (issue 66, hole 6; :func:`equiv.errors.output_file_kind`): every file
written is a regular file or a new path -- a link, a FIFO or a device there is refused, never
replaced or written through. Then the path is proved writable (:func:`equiv.errors.writable_file` /
:func:`~equiv.errors.writable_directory`), so a directory in a file's place or a read-only
parent is also one line before the work rather than a traceback after it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from equiv.errors import InputError, output_file_kind, writable_directory, writable_file
from equiv.rundir.layout import CONFIG, RESULTS
from equiv.rundir.lock import LOCK


def real(path: str | Path) -> Path:
    """``path`` with every symbolic link resolved (it need not exist): what a path really names."""
    return Path(os.path.realpath(path))


def same_file(a: str | Path, b: str | Path) -> bool:
    """True when ``a`` and ``b`` name one file: one real path, or one inode (hard links)."""
    if real(a) == real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either does not exist: not the same file
        return False


def inside(path: str | Path, directory: str | Path) -> bool:
    """True when ``path`` is ``directory`` or lies under it, comparing real paths."""
    p, d = real(path), real(directory)
    return p == d or d in p.parents


def enclosing_run_dir(path: str | Path) -> Path | None:
    """The run directory ``path`` is or lies in (the nearest one holding ``run.lock``, or
    ``results.jsonl`` with ``config.yaml``), compared by real path; ``None`` outside every run
    directory. A ``results.jsonl`` alone is not enough: the name is common outside runs."""
    p = real(path)
    for d in (p, *p.parents):
        if (d / LOCK).is_file() or ((d / RESULTS).is_file() and (d / CONFIG).is_file()):
            return d
    return None


def check_output(path: str | Path, *, option: str, inputs: Iterable[str | Path | None] = (),
                 directory: bool = False, files: Iterable[str] = (), also: Iterable[str | Path] = ()) -> Path:
    """Refuse ``path`` (the output ``option`` names) in one line when writing it could destroy an
    input or step into a run directory (module docstring); then prove it writable and return it.

    ``inputs``: every file or directory the command reads (``None`` entries are skipped).
    ``directory``: ``path`` is a directory the command writes ``files`` into (their names).
    ``also``: files the command writes beside ``path`` (a labelling's ``.failed.jsonl``, its lock)."""
    field = option.lstrip("-")
    targets = [Path(path)]
    if directory:
        targets += [Path(path) / name for name in files]
    targets += [Path(p) for p in also]
    sources = [Path(p) for p in inputs if p is not None and str(p) != ""]
    for target in targets:
        for source in sources:
            if same_file(target, source):
                what = "is" if target == Path(path) else f"would write {target}, which is"
                raise InputError(f"{what} also an input ({source}); writing it would destroy what the command "
                                 "reads: give another path", path=path, field=field)
    run = enclosing_run_dir(path)
    if run is not None:
        raise InputError(f"lies inside the run directory {run}, which only eval writes (under its lock); "
                         "give a path outside it", path=path, field=field)
    for source in sources:
        if source.is_dir() and any(inside(target, source) for target in targets):
            raise InputError(f"lies inside the input directory {source}; give a path outside it",
                             path=path, field=field)
    for target in targets[1:]:  # the files written inside or beside it follow the one output rule too
        output_file_kind(target, option=option)
    return writable_directory(path, option=option) if directory else writable_file(path, option=option)
