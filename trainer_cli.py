"""Train, validate, test or run the equivalence judge: ``python trainer_cli.py fit --config configs/demo.yaml``.

Thin entry point: the same commands as ``equiv fit``, ``equiv recipe``, ...
(:func:`equiv.commands.train_main`, also installed as ``equiv-train``); the CLI lives in
:mod:`equiv.judge.cli` (LightningCLI). Third-party chatter (weight-loading
bars, load reports, Lightning's notices) is silenced first (:mod:`equiv.quiet`); ``--verbose``
anywhere on the line keeps it.
"""

import sys

from equiv.commands import train_main as main

if __name__ == "__main__":
    sys.exit(main())
