"""Linear-time scanning helpers shared by the readers of user text (issue #53: no quadratic scans)."""

from __future__ import annotations


class MonotoneFinder:
    """``text.find(token, start)`` for starts that only grow: each token's last answer is reused
    while it still lies ahead, so openers that never close do not each rescan the rest of the text
    and a scan that found nothing is never repeated (linear in all)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._last: dict[str, tuple[int, int]] = {}

    def find(self, token: str, start: int) -> int:
        known = self._last.get(token)
        if known is not None and known[0] <= start and (known[1] == -1 or known[1] >= start):
            return known[1]
        found = self.text.find(token, start)
        self._last[token] = (start, found)
        return found
