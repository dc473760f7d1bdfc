"""Reports for evaluation runs: one self-contained HTML page, PNG plots, and a tree viewer.

``python search_cli.py report RUN_DIR [RUN_DIR ...] --out report/`` (see :mod:`equiv.report.cli`;
the work is done by :func:`equiv.report.build.build_report`). The package reads only the
run-directory files documented in docs/ARCHITECTURE.md and imports neither torch nor the search
engines, so a report can be made on any laptop from copied runs. Nothing is imported here, so
``report --help`` does not pay for matplotlib.
"""
