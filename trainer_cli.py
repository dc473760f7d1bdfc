"""Train, validate, test or run the equivalence judge: ``python trainer_cli.py fit --config configs/demo.yaml``.

Thin entry point; the CLI lives in :mod:`equiv.judge.cli`.
"""

from equiv.judge.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
