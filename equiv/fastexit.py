"""A command that has imported torch, transformers and Lightning ends at once, not a second later.

Why: after its last line, CPython's shutdown tears the modules down and runs the cyclic garbage
collector over every object still alive -- about half a million once torch, transformers,
Lightning and torchmetrics are imported -- several times. On a 2-core machine that was 1.4 s of
CPU after ``equiv pairs`` had printed its result (0.6 s for torch alone), paid by every command,
every test that runs one in a real process, and every pytest worker.

What :func:`install` does: the last exit handler collects the garbage that is already unreachable
(its finalizers run, as they would have) and then freezes what is still alive
(:func:`gc.freeze`), so the shutdown's collections skip it: shutdown falls to about 0.2 s.
Nothing else changes: every other exit handler runs first (they are called in reverse order of
registration, and this one is registered before any library's: W&B, logging and
``weakref.finalize`` still flush and clean up), objects freed by reference counting are still
freed, and CPython never promised ``__del__`` for objects alive at exit. Where a nanobind
extension is loaded (:func:`nanobind_loaded`: triton, with vLLM) the freeze is skipped, since
nanobind would report every frozen object of its own as a leak.
"""

from __future__ import annotations

import atexit
import gc

_installed = False


def nanobind_loaded() -> bool:
    """Whether an extension built with nanobind is loaded (triton's bindings, which vLLM and
    torch's compiler bring in). nanobind checks at shutdown that every instance, type and function
    it made was freed, and lists each one that was not on stderr ("nanobind: leaked 514
    functions!"); frozen objects are never freed, so there the freeze is skipped. Its classes'
    metaclasses are direct subclasses of ``type`` from the module ``nanobind``."""
    return any(getattr(meta, "__module__", None) == "nanobind" for meta in type.__subclasses__(type))


def _collect_then_freeze() -> None:
    if nanobind_loaded():
        return
    gc.collect()
    gc.freeze()


def install() -> None:
    """Register the handler once per process (later calls do nothing). Call it first thing in an
    entry point, so that the handler runs after every handler the command registers later."""
    global _installed
    if not _installed:
        atexit.register(_collect_then_freeze)
        _installed = True
