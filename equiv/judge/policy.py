"""The decision policy: everything that turns a scored pair of sibling steps into "merge" or
"keep apart", as one value saved in every judge export (``config.json`` -> ``equiv.policy``).

Why one value: the decision used to be assembled from settings scattered over the export
(``decision_threshold``, ``prefilter_threshold``, ``claim_guard``, ``statement_threshold``) and
re-stated by each consumer, so a consumer could decide differently from search. Now an export
carries one :class:`DecisionPolicy`, and :func:`equiv.judge.decide.decide` is the one function
that applies it (docs/pruning.md lists the stages in order).

Exports written before the policy existed are converted on load (:func:`policy_from_settings`)
so they keep deciding as they did: ``claim_guard: true`` becomes every guard rule, a
``statement_threshold`` the floor, ``decision_threshold`` / ``prefilter_threshold`` the threshold
and the prefilter (0.5 and 0.75 when absent, the defaults those exports were read with).

Pure data and validation; no torch, so the pruning side reads it before any weights load.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from equiv.backbones import BUNDLED_MINILM
from equiv.errors import InputError
from equiv.text.guard import rule_names

POLICY_VERSION = 1
"""Bumped when a field's meaning changes; an export with a newer version is refused."""
POLICY_KEY = "policy"
"""``equiv.policy`` in an export's ``config.json``."""
DEFAULT_THRESHOLD = 0.5
"""The classifier's own boundary (argmax of a two-class head), the shipped recipe's threshold."""
DEFAULT_PREFILTER = 0.75
"""The paper's Levenshtein prefilter: a ratio at or below it is "not equivalent" without a model."""
SAME_STEP_KEYS = ("format", "whitespace", "off")
"""What "the same step" means for the shortcut: equal up to formatting (the trained judges), up
to whitespace (the rule strategies), or no shortcut (the Levenshtein baseline)."""
RETIRED_FIELDS = {"combine": "mean_logit"}
"""Fields earlier policies stored with the one value they could hold (``combine``: how an
ensemble's members' scores become one probability, always the sigmoid of their mean logit, now
simply how :mod:`equiv.judge.members` scores). A stored export holding that value still loads;
any other value is refused, since this code cannot decide that way."""
COMPARE = (">=", ">")
""">=: the judges; >: the paper's "Levenshtein ratio > 0.95" baseline."""
DEFAULT_PARAPHRASE_MODEL = BUNDLED_MINILM
"""The sentence model the aligned-plan stage reads sub-goals with (:mod:`equiv.judge.paraphrase`)."""
LEGACY_KEYS = ("decision_threshold", "prefilter_threshold", "claim_guard", "statement_threshold")
"""The scattered export settings a version-less export decided with."""


@dataclass(frozen=True)
class DecisionPolicy:
    """How a pair is decided, in the order :func:`equiv.judge.decide.decide` applies it.

    Attributes:
        threshold: merge when the probability is ``>= threshold`` (``compare``).
        prefilter: a Levenshtein ratio at or below this is "not equivalent" and no model runs;
            None = off.
        guard: guard rule names (:mod:`equiv.text.guard`), tried in this order; empty = off.
        floor: the statement floor: two steps that both compute nothing merge only at a
            probability of at least this; None = off.
        plan_floor: the floor of such a pair where a step is a numbered plan
            (:func:`equiv.text.guard.numbered_plan`); None (the default, and an export stored
            without the key) = the statement floor, as before plans had a floor of their own.
            Only with a statement floor: the floor off is off for plans too.
        restate: the restatement rule: two steps that compute nothing and restate each other
            merge without the model (:mod:`equiv.text.restate`). None (the default, and an
            export stored without the key) = on exactly when the floor is on, as it was when
            the rule rode on the floor; resolved when the policy is made, so turning the floor
            off later leaves it as it is.
        plan_items: the aligned-plan stage: two numbered plans that both compute nothing and
            list as many sub-goals merge without the classifier when every pair of sub-goals,
            taken in order, reads alike at a cosine of at least this in ``paraphrase_model``'s
            sentence embeddings (:mod:`equiv.text.plans`, :mod:`equiv.judge.paraphrase`). None (the
            default, and an export stored without the key) = off.
        paraphrase_model: the sentence model of ``plan_items`` (a ``bundled:`` name, a local
            directory or a hub id); stored only beside ``plan_items``.
        same_step: the free same-step shortcut (``format``, ``whitespace`` or ``off``).
        compare: ``>=`` (judges) or ``>`` (the Levenshtein baseline).
        version: :data:`POLICY_VERSION`.
    """

    threshold: float = DEFAULT_THRESHOLD
    prefilter: float | None = DEFAULT_PREFILTER
    guard: tuple[str, ...] = ()
    floor: float | None = None
    plan_floor: float | None = None
    restate: bool | None = None
    plan_items: float | None = None
    paraphrase_model: str = DEFAULT_PARAPHRASE_MODEL
    same_step: str = "format"
    compare: str = ">="
    version: int = POLICY_VERSION

    def __post_init__(self) -> None:
        if self.restate is None:  # the rule rode on the floor before it had its own setting
            object.__setattr__(self, "restate", self.floor is not None)
        check_policy_fields(self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in exports (``guard`` as a list). ``restate`` is written only where
        it differs from what an export without the key reads (on exactly when the floor is on), so
        the stored form, and a served judge's fingerprint, of every earlier policy stay the same;
        so is ``plan_floor`` where it is None (plans floored as every statement), and the
        aligned-plan stage's two fields where it is off."""
        data = asdict(self)
        data["guard"] = list(self.guard)
        if self.plan_floor is None:
            del data["plan_floor"]
        if self.plan_items is None:
            del data["plan_items"], data["paraphrase_model"]
        if self.restate == (self.floor is not None):
            del data["restate"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str | Path | None = None) -> "DecisionPolicy":
        """A policy from its stored form; a bad field is one line naming ``source`` and the field."""
        if not isinstance(data, Mapping):
            raise InputError(f"must be a mapping, got {type(data).__name__}", path=source, field=POLICY_KEY)
        for name, only in RETIRED_FIELDS.items():
            if name in data and data[name] != only:
                raise InputError(f"is {data[name]!r}; this code decides only as {only!r} (the field is retired)",
                                 path=source, field=f"{POLICY_KEY}.{name}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known - set(RETIRED_FIELDS))
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
                             path=source, field=POLICY_KEY)
        values = {k: v for k, v in data.items() if k not in RETIRED_FIELDS}
        if "guard" in values:
            values["guard"] = guard_setting(values["guard"], source)
        try:
            return cls(**values)
        except InputError as err:
            raise InputError(err.message, path=source, field=f"{POLICY_KEY}.{err.field}" if err.field else POLICY_KEY
                             ) from None

    def with_knobs(self, *, threshold: float | None = None, prefilter: float | None = None,
                   guard: bool | Sequence[str] | None = None, floor: float | None = None,
                   plan_floor: float | None = None, restate: bool | None = None,
                   plan_items: float | None = None) -> "DecisionPolicy":
        """This policy with the user's knobs applied (None: keep this policy's). ``prefilter`` and
        ``floor`` of 0 turn them off (the floor off for plans too: ``plan_floor`` goes with it);
        ``plan_floor`` of 0 floors plans as every statement;
        ``guard`` True = every rule, False = off, or rule names;
        ``restate`` on or off; ``plan_items`` of 0 turns the aligned-plan stage off. Each knob
        moves one stage only: the floor no longer takes the restatement rule with it."""
        changes: dict[str, Any] = {}
        if threshold is not None:
            changes["threshold"] = threshold
        if prefilter is not None:
            changes["prefilter"] = _off_at_zero(prefilter, "prefilter")
        if guard is not None:
            changes["guard"] = guard_setting(guard)
        if floor is not None:
            changes["floor"] = _off_at_zero(floor, "floor")
            if changes["floor"] is None:
                changes["plan_floor"] = None
        if plan_floor is not None:
            changes["plan_floor"] = _off_at_zero(plan_floor, "plan_floor")
        if restate is not None:
            changes["restate"] = check_restate(restate)
        if plan_items is not None:
            changes["plan_items"] = _off_at_zero(plan_items, "plan_items")
        return replace(self, **changes) if changes else self


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        raise InputError(f"must be a number, got {value!r}", field=field)
    return float(value)


def _off_at_zero(value: Any, field: str) -> float | None:
    number = _number(value, field)
    if not 0.0 <= number <= 1.0:
        raise InputError(f"must be in [0, 1] (0: off), got {value!r}", field=field)
    return number or None


def check_restate(value: Any, field: str = "restate") -> bool:
    """The restatement knob: true or false."""
    if not isinstance(value, bool):
        raise InputError(f"must be true or false, got {value!r}", field=field)
    return value


def guard_setting(value: Any, source: str | Path | None = None) -> tuple[str, ...]:
    """The guard knob as rule names: True = every rule, False/None = off, else a list of names
    (unknown names are one line listing the known ones)."""
    if value is None or value is False:
        return ()
    if value is True:
        return rule_names()
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(f"must be true, false or a list of rule names, got {value!r}", path=source, field="guard")
    names = tuple(v.strip() for v in value)
    unknown = [n for n in names if n not in rule_names()]
    if unknown:
        raise InputError(f"unknown guard rule(s) {', '.join(unknown)}; known: {', '.join(rule_names())}",
                         path=source, field="guard")
    if len(set(names)) != len(names):
        raise InputError(f"names a rule twice: {list(names)}", path=source, field="guard")
    return names


def check_policy_fields(policy: DecisionPolicy) -> None:
    """Each field on its own; raises :class:`InputError` naming the field."""
    if not isinstance(policy.version, int) or isinstance(policy.version, bool) or policy.version < 1:
        raise InputError(f"must be a positive integer, got {policy.version!r}", field="version")
    if policy.version > POLICY_VERSION:
        raise InputError(f"is {policy.version}, newer than this code's {POLICY_VERSION}; update equiv",
                         field="version")
    threshold = _number(policy.threshold, "threshold")
    if not 0.0 < threshold <= 1.0:
        raise InputError(f"must be in (0, 1], got {policy.threshold!r}", field="threshold")
    for name in ("prefilter", "floor", "plan_floor", "plan_items"):
        value = getattr(policy, name)
        if value is not None and not 0.0 < _number(value, name) <= 1.0:
            raise InputError(f"must be in (0, 1] or null (off), got {value!r}", field=name)
    if policy.plan_floor is not None and policy.floor is None:
        raise InputError(f"is {policy.plan_floor!r} with no statement floor; set floor too (or plan_floor 0)",
                         field="plan_floor")
    if not isinstance(policy.paraphrase_model, str) or not policy.paraphrase_model.strip():
        raise InputError(f"must name a sentence model, got {policy.paraphrase_model!r}", field="paraphrase_model")
    if not isinstance(policy.guard, tuple):
        raise InputError(f"must be a tuple of rule names, got {policy.guard!r}", field="guard")
    guard_setting(policy.guard)
    check_restate(policy.restate)
    for name, allowed in (("same_step", SAME_STEP_KEYS), ("compare", COMPARE)):
        if getattr(policy, name) not in allowed:
            raise InputError(f"must be one of {', '.join(allowed)}, got {getattr(policy, name)!r}", field=name)


def policy_from_settings(settings: Mapping[str, Any], source: str | Path | None = None) -> DecisionPolicy:
    """The policy an export's ``equiv`` block decides with: its ``policy`` when stored, else the
    conversion of the scattered settings of an export written before the policy existed (see the
    module docstring), so old exports keep deciding the same."""
    if POLICY_KEY in settings:
        return DecisionPolicy.from_dict(settings[POLICY_KEY], source)
    try:
        threshold = settings.get("decision_threshold") or DEFAULT_THRESHOLD
        prefilter = settings.get("prefilter_threshold")
        return DecisionPolicy(
            threshold=float(threshold),
            prefilter=DEFAULT_PREFILTER if prefilter is None else (float(prefilter) or None),
            guard=guard_setting(bool(settings.get("claim_guard", False))),
            floor=float(settings.get("statement_threshold") or 0.0) or None,
        )  # restate follows the floor, as it did
    except (InputError, TypeError, ValueError) as err:
        message = err.message if isinstance(err, InputError) else str(err)
        raise InputError(f"cannot convert the export's settings to a decision policy: {message}", path=source,
                         field="equiv") from None
