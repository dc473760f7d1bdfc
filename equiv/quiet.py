"""What the entry scripts print by default: our own lines, not the libraries' chatter.

Why one place: transformers, Lightning, huggingface_hub and torch each print on their own (a
"Loading weights" bar and a LOAD REPORT for every local checkpoint, "GPU available: False", an
advertisement for Lightning's cloud logger, deprecation warnings raised inside those libraries).
None of it is the user's to act on, and it buried the one line per stage that our commands print.
Both entry scripts (``trainer_cli.py``, ``search_cli.py``) call :func:`configure` once, before any
of those libraries is imported; ``--verbose`` (:func:`take_verbose`) keeps everything.

The settings travel as environment variables as well, so subprocesses and Ray workers started by
the command are as quiet as the command itself; a variable the user has set is left alone.
Warnings raised by equiv's own code, and every error, are always shown.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator, Sequence

VERBOSE_FLAG = "--verbose"

QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",  # LOAD REPORTs, "Some weights were not initialised" notes
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # the "Loading weights" bars (transformers reads this too)
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
QUIET_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero", "lightning.fabric.utilities.seed",
    "lightning.pytorch", "lightning.fabric",
)
"""Lightning's INFO lines: devices found, seeds set, the LitLogger tip, dataloader notes. The
emitting child loggers are named because importing Lightning resets its two top loggers to INFO."""

THIRD_PARTY = r"(?!equiv(\.|$))"
"""A warnings-filter module pattern: any module outside equiv."""


def take_verbose(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--verbose``, and whether it was there (anywhere on the line, so every
    subcommand takes it without each parser declaring it)."""
    rest = [a for a in argv if a != VERBOSE_FLAG]
    return rest, len(rest) != len(argv)


_verbose = False
"""Set by :func:`configure`: ``--verbose`` was given, so :func:`loading_quietly` hides nothing."""


@contextmanager
def loading_quietly() -> Iterator[None]:
    """Within: no "Loading weights" bar from transformers, then as it was. Why: a library caller
    (README's ``build_judge`` snippet) never calls :func:`configure`, and the bar of each judge load
    landed in the middle of its output; the entry scripts' ``--verbose`` still shows it."""
    if _verbose:
        yield
        return
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def configure(verbose: bool = False) -> None:
    """Silence third-party progress bars, load reports, INFO logs and deprecation warnings unless
    ``verbose``. Call before transformers or Lightning is imported; calling later still works for
    what those libraries read at run time."""
    global _verbose
    _verbose = verbose
    if verbose:
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=THIRD_PARTY)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if "transformers" in sys.modules:  # already imported: its module-level flags are read
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
