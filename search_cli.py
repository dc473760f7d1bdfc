"""Search-side entry point: ``python search_cli.py {eval,compare,pairs,siblings,label,agreement,report,serve} ...``.

Thin on purpose: the same commands as ``equiv eval``, ``equiv pairs``, ... (:func:`equiv.commands.search_main`,
also installed as ``equiv-search``), which imports each command only when asked for and silences
third-party chatter first; ``--verbose`` on any command keeps it.
"""

from __future__ import annotations

import sys

from equiv.commands import SEARCH_COMMANDS, usage
from equiv.commands import search_main as main

__all__ = ["SEARCH_COMMANDS", "main", "usage"]

if __name__ == "__main__":
    sys.exit(main())
