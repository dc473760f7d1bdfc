"""The completions cache (``policy.cache: DIR``): a request already answered is answered from disk.

Why: a search's tokens are what it *asked* the policy for, but an engine need not generate them
twice. With common random numbers (:class:`equiv.search.expansion.SeedStream`) two arms of a
comparison that reach the same prefix send the same request, so the second arm's shared requests
cost nothing; a finished arm rerun with a warm cache reproduces its records without the engine --
which also makes runs reproducible on llama.cpp, whose batched decoding is not bit-deterministic.

A request's key is a SHA-256 over everything that decides its completions: the backend, the model
by its content hash (:func:`equiv.rundir.binding.fingerprint`; a hub id by its name), the engine
settings that change numbers (dtype, context length, top-p, token limit), and the request's prompt,
``n``, seed, temperature and stop string. Another model file, temperature or stop misses.

The store is SQLite (the standard library's ``sqlite3``; no new dependency): one file,
``DIR/completions.sqlite3``, in WAL mode with a generous busy timeout, so several runs (processes)
may read and write one cache at once. The first answer stored for a key is kept (``INSERT OR
IGNORE``): a key names one request, so any stored answer is a right one, and keeping the first
makes every later run agree with it. A value is JSON holding the request's fields beside the
completions; on reading it is checked field by field and type by type. A value that does not
decode to the request's ``n`` well-typed completions (a damaged entry) is never returned: it is
logged in one line, deleted and recomputed. A file that is not a SQLite database is refused in one
line naming it. The cache is not bounded (evicting an entry would make a rerun ask the engine
again); its size is reported (:meth:`CompletionCache.stats`, ``summary.json``'s ``policy_cache``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from equiv.errors import InputError
from equiv.search.policies.base import RawCompletion

logger = logging.getLogger(__name__)

FILE = "completions.sqlite3"
"""The database inside ``policy.cache``."""

SCHEMA = 1
"""Bumped when the key or the value layout changes (old entries then simply miss)."""


@dataclass(frozen=True)
class CacheRequest:
    """What, beside the cache's identity, decides one request's completions."""

    prompt: str
    n: int
    seed: int
    temperature: float
    stop: str | None

    def fields(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "n": self.n, "seed": self.seed, "temperature": float(self.temperature),
                "stop": self.stop}


def model_identity(model: str) -> dict[str, Any]:
    """The model as the key sees it: a local file or directory by its content fingerprint, a hub
    id (or any name that is no local path) by the name itself."""
    from equiv.rundir.binding import fingerprint

    path = Path(model)
    if path.exists():
        found = fingerprint(path)
        return {"sha256": found["sha256"], "bytes": found["bytes"]}
    return {"name": model}


def _decode(raw: str, request: Mapping[str, Any]) -> list[RawCompletion] | None:
    """The stored completions when the value is whole and answers ``request``; None otherwise."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("request") != request:
        return None
    items = value.get("completions")
    if not isinstance(items, list) or len(items) != request["n"]:
        return None
    out = []
    for item in items:
        if not isinstance(item, dict):
            return None
        text, tokens, logprob = item.get("text"), item.get("num_tokens"), item.get("logprob")
        eos, stopped = item.get("eos"), item.get("stopped")
        if not (isinstance(text, str) and type(tokens) is int and tokens >= 0
                and isinstance(logprob, (int, float)) and not isinstance(logprob, bool) and math.isfinite(logprob)
                and type(eos) is bool and type(stopped) is bool):
            return None
        out.append(RawCompletion(text=text, num_tokens=tokens, logprob=float(logprob), eos=eos, stopped=stopped))
    return out


def _encode(request: Mapping[str, Any], completions: Sequence[RawCompletion]) -> str:
    items = [{"text": c.text, "num_tokens": int(c.num_tokens), "logprob": float(c.logprob), "eos": bool(c.eos),
              "stopped": bool(c.stopped)} for c in completions]
    return json.dumps({"request": dict(request), "completions": items}, ensure_ascii=False, allow_nan=False)


class CompletionCache:
    """One policy's view of a cache directory (:mod:`equiv.search.policies.completion_cache`)."""

    def __init__(self, directory: str | Path, identity: Mapping[str, Any]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE
        self.identity = {"schema": SCHEMA, **dict(identity)}
        self._prefix = json.dumps(self.identity, sort_keys=True, ensure_ascii=False)
        self.hits = 0
        self.misses = 0
        self.damaged = 0
        self._lock = threading.Lock()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # Runs opening one cache at once take turns here: switching a new database to WAL and
            # creating its table can answer "database is locked" at once, without the busy
            # timeout (SQLite does not wait on every lock of a schema or journal-mode change).
            with open(self.directory / (FILE + ".lock"), "a") as turn:
                fcntl.flock(turn, fcntl.LOCK_EX)
                self._db = sqlite3.connect(str(self.path), timeout=120.0, isolation_level=None,
                                           check_same_thread=False)
                self._db.execute("PRAGMA busy_timeout = 120000")
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        except sqlite3.DatabaseError as err:
            raise InputError(f"is not a usable completions cache ({err}); delete it or choose another policy.cache",
                             path=self.path, field="policy.cache") from None
        except OSError as err:
            raise InputError(f"cannot hold a completions cache ({err.strerror or err})", path=self.directory,
                             field="policy.cache") from None

    @staticmethod
    def request(prompt: str, n: int, seed: int, temperature: float, stop: str | None) -> CacheRequest:
        """A request as the cache keys it (so the policy base need not import this module)."""
        return CacheRequest(prompt, n, seed, temperature, stop)

    def key(self, request: CacheRequest) -> str:
        text = self._prefix + "\x00" + json.dumps(request.fields(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _stored(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.identity, **request}

    def get_many(self, requests: Sequence[CacheRequest]) -> list[list[RawCompletion] | None]:
        """Each request's stored completions, or None (a miss; a damaged entry is deleted and
        counts as a miss)."""
        out: list[list[RawCompletion] | None] = []
        with self._lock:
            for request in requests:
                key = self.key(request)
                row = self._query("SELECT value FROM completions WHERE key = ?", (key,)).fetchone()
                found = _decode(row[0], self._stored(request.fields())) if row is not None else None
                if row is not None and found is None:
                    self.damaged += 1
                    logger.warning("%s: a damaged completions-cache entry (key %s) is not a completion; recomputed",
                                   self.path, key[:16])
                    self._query("DELETE FROM completions WHERE key = ?", (key,))
                if found is None:
                    self.misses += 1
                else:
                    self.hits += 1
                out.append(found)
        return out

    def put_many(self, items: Sequence[tuple[CacheRequest, Sequence[RawCompletion]]]) -> None:
        """Store answers; a key another run stored first keeps its answer."""
        rows = [(self.key(r), _encode(self._stored(r.fields()), c)) for r, c in items]
        with self._lock:
            self._query("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR IGNORE INTO completions (key, value) VALUES (?, ?)", rows)
                self._query("COMMIT")
            except BaseException:
                self._db.rollback()
                raise

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, args)
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
                raise
            raise InputError(f"is not a usable completions cache ({err}); delete it or choose another policy.cache",
                             path=self.path, field="policy.cache") from None

    def stats(self) -> dict[str, Any]:
        """What ``summary.json`` reports: this process's hits, misses and damaged entries, and the
        whole cache's entries and bytes on disk (the cache is not bounded; watch this)."""
        with self._lock:
            entries = int(self._query("SELECT COUNT(*) FROM completions").fetchone()[0])
        size = sum(p.stat().st_size for p in self.directory.glob(FILE + "*") if p.is_file())
        return {"path": str(self.path), "hits": self.hits, "misses": self.misses, "damaged": self.damaged,
                "entries": entries, "bytes": size}

    def close(self) -> None:
        with self._lock:
            self._db.close()
