"""The official ``openai`` client's back-off between its own retries, shortened for a test.

The labeller's client (equiv/labelling/client.py) retries a refused connection, a timeout or a 5xx
``max_retries`` times, sleeping 0.5 s, then 1 s, ... between tries: the library's schedule, not
what the labeller's tests check (how many tries, what each try's failure is recorded as). With
the sleep at 0.01 s every try still happens, in the same order."""

from __future__ import annotations

from typing import Any


def short_backoff(monkeypatch: Any, seconds: float = 0.01) -> None:
    """For the rest of the test, the client sleeps ``seconds`` between its tries."""
    import openai._base_client

    monkeypatch.setattr(openai._base_client.BaseClient, "_calculate_retry_timeout", lambda *args, **kw: seconds)
