"""The pruner settings as one command-line group (``--pruner.*``), the same in every command that
builds a judge: ``eval``, ``pairs`` and ``serve``.

Why: the settings are one dataclass (:class:`~equiv.prune.strategies.PrunerConfig`); declaring
them again per command let their help, defaults and checks drift apart. A command leaves out
the fields it has no use for (``skip``: ``serve`` always serves the ``model`` strategy with the
export's own policy). The short names users type (``--model``, ``--strategy``, ...) are one table,
:data:`SHORT_NAMES`, declared by the parser itself in the commands whose one model is the judge
(``pairs``, ``serve``): the same name means the same setting in each (docs/cli.md).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterable, Mapping

from equiv.cliargs import add_short_names
from equiv.helptext import show_choices
from equiv.prune.strategies import STRATEGIES, PrunerConfig

GROUP = "pruner"

SHORT_NAMES: Mapping[str, tuple[str, ...]] = {
    "strategy": ("--strategy",), "model": ("--model",), "threshold": ("--threshold",), "prefilter": ("--prefilter",),
    "batch_size": ("--batch_size", "--batch-size"), "max_length": ("--max_length", "--max-length"),
    "device": ("--device",), "dtype": ("--dtype",), "guard": ("--guard",), "floor": ("--floor",),
    "plan_floor": ("--plan_floor",), "restate": ("--restate",), "plan_items": ("--plan_items",),
}
"""The other option strings of ``--pruner.FIELD``, the same in every command that declares them
(a command that leaves a field out has no short name for it either)."""


def add_pruner_group(parser: Any, *, skip: Iterable[str] = (), strategies: Iterable[str] | None = None,
                     short_names: bool = True) -> None:
    """Add :class:`PrunerConfig` as ``--pruner.*`` to ``parser``, without the fields in ``skip``;
    ``strategies`` are the names the usage lists (default: every registered one). ``short_names``:
    each field also answers to its :data:`SHORT_NAMES` -- for a command whose one model is the
    judge (``pairs``, ``serve``); ``eval`` runs a policy and a reward model too, where a bare
    ``--model`` or ``--device`` would not say which, so it spells ``--pruner.*`` out."""
    skip = set(skip)
    parser.add_class_arguments(PrunerConfig, GROUP, skip=skip)
    if short_names:
        add_short_names(parser, {f"{GROUP}.{name}": spellings for name, spellings in SHORT_NAMES.items()
                                 if name not in skip})
    show_choices(parser, {f"{GROUP}.strategy": list(strategies if strategies is not None else STRATEGIES.names())})


def pruner_config(group: Any, **fixed: Any) -> PrunerConfig:
    """The :class:`PrunerConfig` of a parsed ``--pruner`` group (a namespace or a dict; skipped
    fields take their defaults), with ``fixed`` fields set over it."""
    values = group.as_dict() if hasattr(group, "as_dict") else dict(group or {})
    names = {f.name for f in fields(PrunerConfig)}
    return PrunerConfig(**{k: v for k, v in {**values, **fixed}.items() if k in names})
