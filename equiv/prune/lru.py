"""A least-recently-used map bounded by entries and by an estimate of the bytes it holds.

Why: a judge lives as long as its process -- a search of many problems, or the service, which
may run for weeks -- and it remembers every pair it decided so a repeat costs nothing. Bounded
by entries alone, a few requests of long steps would still fill the memory (the service grew
about 24 MB per 24 MB request with no plateau), so each entry is also charged an estimate of its
size, and the oldest entries go when either bound is passed. The judge owns its cache; callers
ask the judge (``cache_info``), never the map.

Standard library only (an ``OrderedDict``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAX_ENTRIES = 200_000
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
ENTRY_OVERHEAD = 200
"""Bytes charged per entry besides its texts: the key tuple, the value, the map's slot."""


def text_bytes(*texts: str) -> int:
    """The byte estimate of an entry keyed on ``texts``: their characters plus the overhead."""
    return ENTRY_OVERHEAD + sum(len(t) for t in texts)


class BoundedLRU(Generic[K, V]):
    """``key -> value``, least recently used first out, within ``max_entries`` and ``max_bytes``
    (each entry weighs ``size_of(key, value)``). One entry heavier than ``max_bytes`` is not kept."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES, *,
                 size_of: Callable[[K, V], int]) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError(f"bounds must be positive, got {max_entries} entries, {max_bytes} bytes")
        self.max_entries, self.max_bytes = int(max_entries), int(max_bytes)
        self._size_of = size_of
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value (now the most recently used), or ``default``."""
        found = self._items.get(key)
        if found is None:
            return default
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``key -> value`` as the most recently used, dropping the oldest past a bound."""
        size = int(self._size_of(key, value))
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        if size > self.max_bytes:
            return
        self._items[key] = (value, size)
        self.bytes += size
        while len(self._items) > self.max_entries or self.bytes > self.max_bytes:
            _, (_, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped
            self.evictions += 1

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0

    def info(self) -> dict[str, int]:
        """Entries, bytes (estimated), the bounds and evictions so far (what ``/metrics`` shows)."""
        return {"entries": len(self._items), "bytes": self.bytes, "max_entries": self.max_entries,
                "max_bytes": self.max_bytes, "evictions": self.evictions}
