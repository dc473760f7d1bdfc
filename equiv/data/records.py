"""MathEquiv-format pair records: reading, validation and the level-to-label mapping.

A record is two reasoning steps (``sentence1``, ``sentence2``) and a five-level equivalence grade
``result`` (4 exactly equivalent ... 0 not equivalent), optionally with ``reasoning_step``. Extra
fields are kept in :attr:`PairRecord.extra`, never fatal. Files may be a JSON list (the MathEquiv
release) or JSON lines. Every problem is reported with file, line (1-based; the list index + 1 for
JSON lists, the row index + 1 for hub datasets) and field, see :class:`equiv.errors.InputError`.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from equiv.errors import (
    InputError, JSONShapeError, first_character, loads_strict, raw_lines, read_document_bytes, unencodable,
)

REQUIRED_FIELDS = ("sentence1", "sentence2", "result")
LEVELS = (0, 1, 2, 3, 4)
# Longformer handles 4096 tokens; a step beyond ~50k characters is not a reasoning step but a
# broken export, and tokenising it would stall training. Configurable per call.
DEFAULT_MAX_CHARS = 50_000


@dataclass(frozen=True)
class PairRecord:
    """One labelled pair of reasoning steps."""

    sentence1: str
    sentence2: str
    result: int
    reasoning_step: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""  # "path:line", for messages and for tracing refined samples back

    def with_sentences(self, sentence1: str, sentence2: str) -> "PairRecord":
        """A copy with new texts (used by EM refinement); label and provenance stay."""
        return PairRecord(sentence1, sentence2, self.result, self.reasoning_step, self.extra, self.source)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out.update(sentence1=self.sentence1, sentence2=self.sentence2, result=self.result)
        if self.reasoning_step is not None:
            out["reasoning_step"] = self.reasoning_step
        return out


def problem_key(record: PairRecord) -> str:
    """The problem a pair belongs to: its ``problem`` field when it has one, else its ``id``
    without the last ``-<pair>`` part.

    ``gsm8k-test-12-3`` and ``gsm8k-test-12-m40`` both belong to ``gsm8k-test-12``. Sibling pairs
    of several runs carry their run's tag in the id (``mcts_base:gsm8k-test-12-s0n3c4c5``) and the
    problem in ``problem``, so the same problem's pairs of two runs stay in one fold. Records
    without either fall back to their ``question`` text, then to their source line.
    """
    problem = record.extra.get("problem")
    if isinstance(problem, str) and problem:
        return problem
    rid = record.extra.get("id")
    if isinstance(rid, str) and "-" in rid:
        return rid.rsplit("-", 1)[0]
    question = record.extra.get("question")
    return str(question) if question else record.source


@dataclass(frozen=True)
class LabelMapping:
    """Maps the five MathEquiv levels to the judge's binary label.

    Default (the paper's): 3-4 equivalent (label 1), 0-1 not equivalent (label 0), 2 dropped from
    training and evaluation. Stored in the exported model's config so the search side knows what
    "equivalent" meant when the judge was trained.
    """

    equivalent: tuple[int, ...] = (3, 4)
    not_equivalent: tuple[int, ...] = (0, 1)

    def __post_init__(self) -> None:
        eq, neq = set(self.equivalent), set(self.not_equivalent)
        bad = (eq | neq) - set(LEVELS)
        if bad:
            raise InputError(f"label mapping uses levels {sorted(bad)} outside 0-4", field="label_mapping")
        if eq & neq:
            raise InputError(f"levels {sorted(eq & neq)} are mapped to both labels", field="label_mapping")
        if not eq or not neq:
            raise InputError("label mapping needs at least one level per label", field="label_mapping")

    def label(self, result: int) -> int | None:
        """1 for equivalent, 0 for not equivalent, None for a dropped level."""
        if result in self.equivalent:
            return 1
        if result in self.not_equivalent:
            return 0
        return None

    def binary_pairs(self, records: Sequence["PairRecord"]) -> tuple[list[tuple[str, str]], list[int]]:
        """``(pairs, labels)`` of the records whose level maps to a label, in order (dropped levels left out)."""
        kept = [(r, y) for r in records if (y := self.label(r.result)) is not None]
        return [(r.sentence1, r.sentence2) for r, _ in kept], [y for _, y in kept]

    def to_dict(self) -> dict[str, list[int]]:
        return {"equivalent": list(self.equivalent), "not_equivalent": list(self.not_equivalent)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[int]]) -> "LabelMapping":
        return cls(tuple(data["equivalent"]), tuple(data["not_equivalent"]))


@dataclass
class SkipReport:
    """What ``skip_invalid=True`` left out, so a skip is never silent."""

    total: int = 0
    reasons: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def add(self, err: InputError) -> None:
        self.total += 1
        key = f"field '{err.field}': {err.message}" if err.field else err.message
        self.reasons[key] += 1
        if len(self.examples) < 5:
            self.examples.append(str(err))

    def summary(self, path: str | Path) -> str:
        if not self.total:
            return f"{path}: no invalid records"
        parts = ", ".join(f"{n}x {reason}" for reason, n in self.reasons.most_common())
        return f"{path}: skipped {self.total} invalid record(s): {parts}"


def _parse_result(value: Any, path: str, line: int) -> int:
    # bool is an int subclass; true/false is a malformed label, not level 1/0.
    if isinstance(value, bool):
        raise InputError(f"must be an integer 0-4, got {value!r}", path=path, line=line, field="result")
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise InputError(f"must be an integer 0-4, got {value!r}", path=path, line=line, field="result")
    if value not in LEVELS:
        raise InputError(f"must be in 0-4, got {value}", path=path, line=line, field="result")
    return value


def has_visible_text(text: str) -> bool:
    """Whether ``text`` has a character that shows: ``str.strip`` keeps zero-width spaces, joiners
    and other format characters (Unicode category Cf), so a step made only of them passed as
    text and reached the judge as an empty string."""
    return any(not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Cc", "Zs", "Zl", "Zp") for ch in text)


def _parse_text(row: Mapping[str, Any], name: str, path: str, line: int, max_chars: int) -> str:
    value = row[name]
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {type(value).__name__}", path=path, line=line, field=name)
    if not value.strip():
        raise InputError("is empty", path=path, line=line, field=name)
    if not has_visible_text(value):
        raise InputError("holds no visible character (only zero-width or other format characters)", path=path,
                         line=line, field=name)
    problem = unencodable(value)
    if problem:
        raise InputError(problem, path=path, line=line, field=name)
    if len(value) > max_chars:
        raise InputError(
            f"is {len(value)} characters, over the limit of {max_chars} (raise max_chars if intended)",
            path=path,
            line=line,
            field=name,
        )
    return value


def record_from_row(row: Any, *, path: str, line: int, max_chars: int = DEFAULT_MAX_CHARS) -> PairRecord:
    """Validate one parsed row into a :class:`PairRecord`, raising :class:`InputError` on problems."""
    if not isinstance(row, Mapping):
        raise InputError(f"expected a JSON object, got {type(row).__name__}", path=path, line=line)
    for name in REQUIRED_FIELDS:
        if name not in row or row[name] is None:
            raise InputError("is missing", path=path, line=line, field=name)
    s1 = _parse_text(row, "sentence1", path, line, max_chars)
    s2 = _parse_text(row, "sentence2", path, line, max_chars)
    result = _parse_result(row["result"], path, line)
    step = row.get("reasoning_step")
    if step is not None:
        try:
            step = int(step)
        except (TypeError, ValueError):
            raise InputError(f"must be an integer, got {step!r}", path=path, line=line, field="reasoning_step") from None
    extra = {k: v for k, v in row.items() if k not in (*REQUIRED_FIELDS, "reasoning_step")}
    question = extra.get("question")
    if isinstance(question, str) and (problem := unencodable(question)):  # the guard and the service read it
        raise InputError(problem, path=path, line=line, field="question")
    return PairRecord(s1, s2, result, step, extra, f"{path}:{line}")


def iter_json_rows(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, row)`` from a JSON list or a JSON-lines file.

    A file whose first non-blank character is ``[`` is read as one JSON list (the MathEquiv
    release format; read whole, so refused past :func:`equiv.errors.max_json_bytes`); anything
    else as JSON lines, streamed, where blank lines are allowed. A malformed
    line is yielded as an :class:`InputError` in place of the row, so a caller that skips bad
    records can count it and read on; a caller that does not raises it.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", path=p)
    if not p.is_file():
        raise InputError("is not a file", path=p)
    if first_character(p) == "[":
        raw = read_document_bytes(p)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            line = raw.count(b"\n", 0, err.start) + 1
            raise InputError(f"is not UTF-8 text ({err.reason} at byte {err.start})", path=p, line=line) from None
        try:
            rows = loads_strict(text)
        except json.JSONDecodeError as err:
            raise InputError(f"malformed JSON: {err.msg} (column {err.colno})", path=p, line=err.lineno) from None
        except JSONShapeError as err:
            raise InputError(str(err), path=p) from None
        if not isinstance(rows, list):
            raise InputError(f"expected a JSON list of records, got {type(rows).__name__}", path=p)
        for index, row in enumerate(rows):
            yield index + 1, row
        return
    # streamed line by line (a multi-GB file is never held whole); "\n" only: splitlines() also
    # breaks at U+2028, U+0085 and others, which JSON allows raw inside strings -- and
    # write_pair_records writes them raw (ensure_ascii=False).
    for number, start, data, _ in raw_lines(p):
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"is not UTF-8 text ({err.reason} at byte {start + err.start})", path=p,
                             line=number) from None
        if not line.strip():
            continue
        try:
            yield number, loads_strict(line)
        except json.JSONDecodeError as err:
            yield number, InputError(f"malformed JSON: {err.msg} (column {err.colno})", path=p, line=number)
        except JSONShapeError as err:
            yield number, InputError(str(err), path=p, line=number)


def validate_rows(
    rows: Iterable[tuple[int, Any]],
    *,
    path: str,
    skip_invalid: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> tuple[list[PairRecord], SkipReport]:
    """Turn ``(line, row)`` pairs into records; raise on the first bad one unless ``skip_invalid``.

    Used for local files and for rows of a hub dataset alike (there ``line`` is the row index + 1).
    An ``id`` given twice is an error naming both lines (issue 66, hole 11: the pair was trained
    and counted twice, and a problem's fold or a labelling's resume keyed on it went wrong); with
    ``skip_invalid`` the later one is skipped and counted.
    """
    records: list[PairRecord] = []
    report = SkipReport()
    first_line: dict[str, int] = {}
    for line, row in rows:
        try:
            if isinstance(row, InputError):
                raise row
            record = record_from_row(row, path=path, line=line, max_chars=max_chars)
            rid = record.extra.get("id")
            if isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid):
                if str(rid) in first_line:
                    raise InputError(f"id {rid!r} is also on line {first_line[str(rid)]}; each pair once",
                                     path=path, line=line, field="id")
                first_line[str(rid)] = line
            records.append(record)
        except InputError as err:
            if not skip_invalid:
                raise
            report.add(err)
    return records, report


def read_pair_records(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> tuple[list[PairRecord], SkipReport]:
    """Read and validate a local MathEquiv JSON/JSONL file.

    Raises :class:`InputError` at the first bad record (file, line, field). With
    ``skip_invalid=True`` bad records, malformed lines included, are left out and counted in the
    returned :class:`SkipReport`; the caller must show ``report.summary(path)`` to the user.
    """
    return validate_rows(iter_json_rows(path), path=str(path), skip_invalid=skip_invalid, max_chars=max_chars)


def write_pair_records(records: Iterable[PairRecord], path: str | Path) -> None:
    """Write records as JSON lines (the format :func:`read_pair_records` reads back)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")


def _load_hub_rows(source: str, split: str, name: str | None) -> list[dict[str, Any]]:
    """Rows of a dataset through ``datasets.load_dataset`` (hub id or a local dataset folder)."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - datasets is a hard dependency
        raise InputError("reading a hub dataset needs the package 'datasets'", path=source) from None
    try:
        ds = datasets.load_dataset(source, name, split=split)
    except Exception as err:  # the hub raises many types: offline, missing split, bad config
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(
            f"could not load dataset (config {name!r}, split {split!r}): {first[:300]}; "
            "pass a local JSON/JSONL file instead, or check the name, config and split",
            path=source,
        ) from None
    return list(ds)


def load_pair_records(
    source: str | Path,
    *,
    split: str = "train",
    name: str | None = None,
    skip_invalid: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> tuple[list[PairRecord], SkipReport]:
    """Read MathEquiv records from a local JSON/JSONL file, a local dataset folder, or the hub.

    ``source`` is tried in order: an existing file is read with :func:`read_pair_records` (``split``
    is ignored); an existing directory holding ``<split>.jsonl`` / ``<split>.json`` is read the same
    way; any other existing directory, or a name that is not a local path (``Jiawei1222/MathEquiv``),
    goes through ``datasets.load_dataset(source, name, split=split)``. ``name`` may contain
    ``{split}`` -- MathEquiv keeps each split in a config of the same name, so its recipe uses
    ``name="{split}"``. Hub rows are validated exactly like file lines (``line`` = row index + 1),
    so every error names the dataset, split, row and field.
    """
    text = str(source)
    p = Path(text).expanduser()
    if p.is_file():
        return read_pair_records(p, skip_invalid=skip_invalid, max_chars=max_chars)
    if p.is_dir():
        for suffix in (".jsonl", ".json"):
            candidate = p / f"{split}{suffix}"
            if candidate.is_file():
                return read_pair_records(candidate, skip_invalid=skip_invalid, max_chars=max_chars)
    elif text.startswith((".", "/", "~")) or text.endswith((".json", ".jsonl")) or text.count("/") > 1:
        # Looks like a local path, not a hub id ("owner/name"): say so instead of asking the hub.
        raise InputError("file not found", path=text)
    config = name.format(split=split) if name else None
    rows = _load_hub_rows(text, split, config)
    label = f"{text}[{config + '/' if config else ''}{split}]"
    return validate_rows(
        ((index + 1, row) for index, row in enumerate(rows)),
        path=label,
        skip_invalid=skip_invalid,
        max_chars=max_chars,
    )


def question_of(record: PairRecord) -> str:
    """The record's ``question`` ("" when it has none): the claim guard reads it (restated givens,
    the problem's entities); the classifier never does."""
    return str(record.extra.get("question") or "")
