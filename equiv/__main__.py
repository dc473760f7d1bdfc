"""``python -m equiv <command> [options]``: the ``equiv`` command without installing its script
(:func:`equiv.commands.main`)."""

import sys

from equiv.commands import main

if __name__ == "__main__":
    sys.exit(main())
