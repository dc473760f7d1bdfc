"""What a judge export is made of and how it scores: its classifiers (one, or an ensemble's
members under ``members/``, each at the length it was trained with) and their probabilities
(one member's, or the sigmoid of the members' mean logit).

The layer under :mod:`equiv.judge.ensemble` (which builds and calibrates ensembles) and the
``model`` pruning strategy, so each imports it and none imports the others back.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from equiv.errors import InputError
from equiv.judge.export import load_judge, refuse_removed_settings
from equiv.judge.export_keys import MEMBERS_KEY, SETTINGS_KEY
from equiv.data.tokenize import canonical_pair
from equiv.judge.inference import score_pairs

_LOGIT_CLIP = 1e-6



def model_logit(prob: float) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to ``[1e-6, 1 - 1e-6]`` (a finite feature)."""
    p = min(max(float(prob), _LOGIT_CLIP), 1.0 - _LOGIT_CLIP)
    return math.log(p / (1.0 - p))


def average_logits(member_probs: Sequence[Sequence[float]]) -> list[float]:
    """``sigmoid(mean logit)`` per pair over the members' probabilities (one list per member)."""
    if not member_probs:
        return []
    count = len(member_probs)
    return [1.0 / (1.0 + math.exp(-sum(model_logit(p) for p in column) / count)) for column in zip(*member_probs)]


def member_dirs(judge_dir: str | Path) -> list[Path]:
    """The directories whose models make up the judge: itself, then each of ``equiv.members``."""
    directory = Path(judge_dir)
    config_path = directory / "config.json"
    if directory.is_file() or not config_path.is_file():
        return [directory]
    settings = json.loads(config_path.read_text(encoding="utf-8")).get(SETTINGS_KEY) or {}
    members = settings.get(MEMBERS_KEY) or []
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise InputError("must be a list of member directories", path=config_path, field=f"{SETTINGS_KEY}.{MEMBERS_KEY}")
    out = [directory]
    for name in members:
        path = directory / name
        if not (path / "config.json").is_file():
            raise InputError(f"member {name!r} is missing (no {path / 'config.json'})", path=config_path,
                             field=f"{SETTINGS_KEY}.{MEMBERS_KEY}")
        out.append(path)
    return out


class Member(NamedTuple):
    """One classifier of a judge, with what it was trained with (its ``equiv`` settings)."""

    model: Any
    tokenizer: Any
    positive_index: int
    max_length: int

    @classmethod
    def from_settings(cls, model: Any, tokenizer: Any, settings: dict[str, Any], max_length: int | None = None,
                      source: str | Path | None = None) -> "Member":
        """A loaded classifier and its export's settings; ``max_length`` overrides the stored one.
        An export trained with a removed lever is refused (``source``: its directory)."""
        refuse_removed_settings(settings, None if source is None else Path(source) / "config.json")
        return cls(model, tokenizer, int(settings.get("positive_index", 1)),
                   int(max_length or settings.get("max_length") or 512))


def score_members(
    members: Sequence[Member],
    pairs: Sequence[tuple[str, str]],
    *,
    batch_size: int = 64,
    autocast_dtype: Any = None,
) -> list[float]:
    """P(equivalent) per pair: each member scores the pairs at its own length, and with more than
    one member the result is the sigmoid of their mean logit (:func:`average_logits`). Each pair
    is scored in its canonical order (:func:`equiv.data.tokenize.canonical_pair`), as the
    evaluator asks it, so ``(a, b)`` and ``(b, a)`` get one probability wherever they are scored
    (search, ``pairs``, fit's report, the ensemble's calibration)."""
    ordered = [canonical_pair(a, b) for a, b in pairs]
    per_member = [
        score_pairs(  # cuts huge steps before tokenising, see CHARS_PER_TOKEN_CAP
            m.model, m.tokenizer, ordered, batch_size=batch_size, max_length=m.max_length,
            positive_index=m.positive_index, autocast_dtype=autocast_dtype,
        ).tolist()
        for m in members
    ]
    return per_member[0] if len(per_member) == 1 else average_logits(per_member)


def score_judge_dir(judge_dir: str | Path, pairs: Sequence[tuple[str, str]], *, batch_size: int = 64) -> list[float]:
    """P(equivalent) of each pair by the exported judge, every member at its own length.

    The model part of what :class:`equiv.prune.model_judge.ModelJudge` computes (no prefilter, no
    free same-step check), on CPU; used to calibrate thresholds and combiners.
    """
    members = [Member.from_settings(*load_judge(path), source=path) for path in member_dirs(judge_dir)]
    return score_members(members, pairs, batch_size=batch_size)
