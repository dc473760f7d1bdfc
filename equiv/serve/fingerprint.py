"""What identifies a served judge: its files' bytes and its decision policy, not where it lies.

A run directory pruned through a service records this (``pruner.judge_fingerprint``), so a
resume against a service holding another judge -- other weights, or the same weights with
another threshold, prefilter, guard or floor -- is refused instead of mixing two judges' records.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from equiv.rundir.binding import file_sha256

# describe() keys that say where the judge lies or how it runs, not what it decides
_NOT_DECIDING = ("model",)


def judge_fingerprint(path: str | Path, policy: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` over every file under the export (or the one checkpoint file) and the
    policy (:meth:`~equiv.prune.cached.CachedJudge.describe` minus its path)."""
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    digest = {"files": {str(p.relative_to(root)) if root.is_dir() else p.name: file_sha256(p) for p in files},
              "policy": {k: v for k, v in sorted(policy.items()) if k not in _NOT_DECIDING}}
    text = json.dumps(digest, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
