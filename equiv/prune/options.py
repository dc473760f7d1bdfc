"""The pruner settings as one command-line group (``--pruner.*``), the same in every command that
builds a judge: ``eval``, ``pairs`` and ``serve``.

Why: the settings are one dataclass (:class:`~equiv.prune.strategies.PrunerConfig`); declaring
them again per command let their help, defaults and checks drift apart. A command leaves out
the fields it has no use for (``skip``: ``serve`` always serves the ``model`` strategy with the
export's own policy) and keeps its older spellings as aliases (``pairs --strategy``).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterable, Mapping

from equiv.cliargs import add_aliases
from equiv.helptext import show_choices
from equiv.prune.strategies import STRATEGIES, PrunerConfig

GROUP = "pruner"


def add_pruner_group(parser: Any, *, skip: Iterable[str] = (), aliases: Mapping[str, Iterable[str]] | None = None,
                     strategies: Iterable[str] | None = None) -> None:
    """Add :class:`PrunerConfig` as ``--pruner.*`` to ``parser``, without the fields in ``skip``;
    ``aliases`` maps a field name to its other spellings; ``strategies`` are the names the
    usage lists (default: every registered one)."""
    parser.add_class_arguments(PrunerConfig, GROUP, skip=set(skip))
    add_aliases(parser, {f"{GROUP}.{name}": spellings for name, spellings in (aliases or {}).items()})
    show_choices(parser, {f"{GROUP}.strategy": list(strategies if strategies is not None else STRATEGIES.names())})


def pruner_config(group: Any, **fixed: Any) -> PrunerConfig:
    """The :class:`PrunerConfig` of a parsed ``--pruner`` group (a namespace or a dict; skipped
    fields take their defaults), with ``fixed`` fields set over it."""
    values = group.as_dict() if hasattr(group, "as_dict") else dict(group or {})
    names = {f.name for f in fields(PrunerConfig)}
    return PrunerConfig(**{k: v for k, v in {**values, **fixed}.items() if k in names})
