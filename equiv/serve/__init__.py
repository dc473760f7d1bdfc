"""The judge as a service: one exported judge behind HTTP (LitServe), for many search workers and for
other search frameworks (the reference's client protocol, TEI's ``/predict``).

Layer: above :mod:`equiv.prune` (it serves a prune judge), below :mod:`equiv.search`. Modules:
``verdicts`` (the one adapter every judge call goes through), ``protocol`` (request validation and
response shapes, no torch), ``fingerprint`` (what identifies a served judge), ``api`` (the LitServe
API and its route middleware), ``cli`` (``search_cli.py serve``).
"""
