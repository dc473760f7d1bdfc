"""Train, validate, test or run the equivalence judge: ``python trainer_cli.py fit --config configs/demo.yaml``.

Thin entry point; the CLI lives in :mod:`equiv.judge.cli`. Third-party chatter (weight-loading
bars, load reports, Lightning's notices) is silenced first (:mod:`equiv.quiet`); ``--verbose``
anywhere on the line keeps it.
"""

import sys

from equiv import quiet

if __name__ == "__main__":
    argv, verbose = quiet.take_verbose(sys.argv[1:])
    quiet.configure(verbose)
    from equiv.judge.cli import main

    raise SystemExit(main(argv))
