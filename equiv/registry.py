"""One pattern for every extension point: a named registry of declarative entries.

equiv is extended in four places -- search algorithms (:mod:`equiv.search.algorithms`), pruning
strategies (:mod:`equiv.prune.strategies`), policy backends (:mod:`equiv.search.policies`) and
reward models (:mod:`equiv.search.rewards`). Each keeps a :class:`Registry` of entries: frozen
dataclasses that declare a ``name``, the builder and the flags the rest of the code asks about
(is it learned, does it take a threshold, ...). CLI choices, config validation, docs tables and
test parametrisations read the registry, so adding one is one new module and one
:meth:`Registry.add` (docs/contributing.md, "Extending equiv").

This module sits at the bottom of the layering (beside :mod:`equiv.errors`) so that every layer
may keep a registry; it imports nothing of equiv but the error type.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Generic, Iterator, Protocol, TypeVar

from equiv.errors import InputError


class Named(Protocol):
    """What a registry entry must have: the name users select it by."""

    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


class Registry(Generic[E]):
    """Entries by name, in registration order (the order CLI choices and docs list them).

    ``kind`` names what is registered ("algorithm", "pruning strategy") and ``field`` the setting
    that selects one (``algo``, ``pruner.strategy``), so an unknown name is a one-line
    :class:`~equiv.errors.InputError` naming the setting and the choices.
    """

    def __init__(self, kind: str, field: str) -> None:
        self.kind = kind
        self.field = field
        self._entries: dict[str, E] = {}

    def add(self, entry: E) -> E:
        """Register ``entry`` (returns it); a second, different entry under one name is a bug."""
        if entry.name in self._entries and self._entries[entry.name] != entry:
            raise ValueError(f"{self.kind} {entry.name!r} is already registered")
        self._entries[entry.name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Unregister ``name`` (tests and notebooks that registered a temporary entry)."""
        del self._entries[name]

    @contextmanager
    def temporarily(self, entry: E) -> Iterator[E]:
        """``entry`` registered for the ``with`` block only."""
        self.add(entry)
        try:
            yield entry
        finally:
            self.remove(entry.name)

    def get(self, name: str) -> E:
        """The entry called ``name``; an unknown name is an InputError listing the choices."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise InputError(
                f"unknown {self.kind} {name!r}; choose from {', '.join(self._entries)}", field=self.field
            ) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entries(self) -> tuple[E, ...]:
        return tuple(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[E]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self._entries)
