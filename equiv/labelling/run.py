"""A labelling run: every pending pair of a pairs file through the labeller, resumable and bounded.

- **Input**: JSON Lines of pairs (``search_cli.py siblings`` output, or any MathEquiv-style file):
  ``sentence1``, ``sentence2`` (non-empty strings), optional ``id``, ``question``, ``prefix``. A
  pair's key is its ``id``, else a hash of its texts and question; two pairs with one key are an
  error naming both lines. A step over 50,000 characters, or any text holding a lone surrogate
  (no UTF-8 text), is refused up front naming line and field, as the other pairs readers do. Label fields already present (a file labelled before, given to a
  second labeller for agreement) are dropped and labelled afresh.
- **Output**: the input row plus ``result`` (the level), ``label_reasoning``, ``label_model`` (the
  model the server says answered), ``label_raw`` (every raw answer, failed tries included, with
  its finish reason and why it failed), ``label_tries``, ``label_usage`` (tokens of all tries),
  ``label_prompt`` (few-shot file hash and prompt options) and, from reasoning models,
  ``label_thinking``. ``trainer_cli.py fit`` reads the file as it is.
- **Capped**: each raw answer, explanation and thinking is stored up to :data:`STORED_CHARS`
  (65,536) characters: a raw answer cut there says ``"truncated": true``, a cut explanation or
  thinking is named in ``label_truncated``. A runaway model (megabytes of answer per try) would
  otherwise grow the file by megabytes per pair. The level is parsed from the whole answer. A lone
  surrogate in an answer (``\\ud800``, which UTF-8 cannot encode) is stored as U+FFFD.
- **Resumable**: each label is appended and fsynced as its answer arrives; a rerun skips every
  pair whose key is already in the output, so a killed run loses at most the answers in flight
  and labels nothing twice. A torn last line (killed mid-write) is cut off before appending.
- **Bounded**: at most ``concurrency`` requests in flight and at most ``rate`` started per second.
- **Malformed answers** are retried up to ``tries`` times in all (later tries at
  ``retry_temperature``, so a deterministic server does not repeat itself); a pair that never
  gives a usable answer goes to ``<out>.failed.jsonl`` with its raw answers, is *not* written to
  the output (so ``fit`` never sees a row without a label), and is tried again on a rerun. The
  file is merged, never replaced: a rerun (``--limit`` or not) keeps every earlier failure it did
  not label, replaces the ones it tried again with their new raw answers, and drops the ones it
  labelled; the file goes when no failure is left.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from equiv.data.records import DEFAULT_MAX_CHARS
from equiv.errors import InputError, regular_input, unencodable
from equiv.labelling.client import BadReply, Reply, ask, request_options
from equiv.labelling.parse import MalformedAnswer, parse_answer
from equiv.labelling.prompt import Example, build_messages
from equiv.rundir.io import append_jsonl, read_json_lines, write_jsonl_atomic
from equiv.rundir.lock import hold_lock

LABEL_FIELDS = ("result", "label_reasoning", "label_model", "label_raw", "label_tries", "label_usage",
                "label_prompt", "label_thinking", "label_truncated")
MAX_SENTENCE_CHARS = DEFAULT_MAX_CHARS  # 50,000: a longer step is refused up front, as `pairs` refuses it
STORED_CHARS = 65_536  # of each raw answer, explanation and thinking kept in the output (module docstring)


def capped(text: str | None, limit: int = STORED_CHARS) -> tuple[str | None, bool]:
    """``(text, truncated)``: at most ``limit`` characters of ``text``, and whether any were cut."""
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit], True


def raw_entry(text: str | None, finish_reason: str | None, error: str | None) -> dict[str, Any]:
    """One try as ``label_raw`` stores it: the answer capped (:data:`STORED_CHARS`), with ``truncated``."""
    kept, truncated = capped(text)
    return {"text": kept, "finish_reason": finish_reason, "error": error, "truncated": truncated}


@dataclass(frozen=True)
class LabelSettings:
    """How to ask: the model and the request, the prompt's options, and the run's bounds."""

    model: str
    structured: str = "json_schema"
    temperature: float = 0.0
    retry_temperature: float = 0.7
    max_tokens: int = 1024
    tries: int = 3
    concurrency: int = 8
    rate: float | None = None  # requests started per second; None: no limit
    with_question: bool = False
    with_prefix: bool = False
    seed: int = 0
    reasoning_chars: int | None = None
    prompt_id: str = ""  # the few-shot file's hash, stored with each label

    def validate(self) -> None:
        for name in ("tries", "concurrency", "max_tokens"):
            if getattr(self, name) < 1:
                raise InputError(f"must be at least 1, got {getattr(self, name)}", field=name)
        if self.rate is not None and self.rate <= 0:
            raise InputError(f"must be above 0, got {self.rate}", field="rate")
        for name in ("temperature", "retry_temperature"):
            if not 0 <= getattr(self, name) <= 2:
                raise InputError(f"must be in [0, 2], got {getattr(self, name)}", field=name)
        request_options(self.structured)  # an unknown mode is an error before any request


@dataclass
class RunStats:
    """What a run did, for the summary line: labels, failures, skips, requests and tokens."""

    pairs: int = 0
    already: int = 0
    labelled: int = 0
    failed: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "failures"}


def pair_key(row: dict[str, Any]) -> str:
    """The pair's ``id``, else ``sha:`` + a hash of its texts and question (what resuming matches on)."""
    rid = row.get("id")
    if isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid):
        return str(rid)
    text = "\x00".join(str(row.get(k) or "") for k in ("sentence1", "sentence2", "question"))
    return "sha:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_pairs(path: str | Path) -> list[dict[str, Any]]:
    """The pairs to label, validated (module docstring); any bad line is one error naming it."""
    path = regular_input(path, field="pairs")  # a FIFO or a device is refused, not read
    if not path.is_file():
        raise InputError("no such file", path=path, field="pairs")
    rows, torn = read_json_lines(path)
    if torn:
        raise InputError("the last line is cut off (no newline, not valid JSON)", path=path, line=len(rows) + 1)
    if not rows:
        raise InputError("holds no pairs", path=path)
    seen: dict[str, int] = {}
    pairs = []
    for line, row in rows:
        for name in ("sentence1", "sentence2"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise InputError("needs a non-empty string", path=path, line=line, field=name)
            if len(row[name]) > MAX_SENTENCE_CHARS:  # as `pairs` and `fit` cap them: refused, never sent
                raise InputError(f"is {len(row[name]):,} characters, over the limit of {MAX_SENTENCE_CHARS:,} "
                                 "(the one every pairs reader applies)", path=path, line=line, field=name)
        if "question" in row and row["question"] is not None and not isinstance(row["question"], str):
            raise InputError("must be a string", path=path, line=line, field="question")
        prefix = row.get("prefix")
        if prefix is not None and not (isinstance(prefix, list) and all(isinstance(s, str) for s in prefix)):
            raise InputError("must be a list of step texts", path=path, line=line, field="prefix")
        for name, text in _texts_of(row):
            if problem := unencodable(text):  # refused up front, as `pairs` and `agreement` do
                raise InputError(problem, path=path, line=line, field=name)
        key = pair_key(row)
        if key in seen:
            raise InputError(f"pair {key!r} is also on line {seen[key]}; each pair once", path=path, line=line,
                             field="id")
        seen[key] = line
        pairs.append({k: v for k, v in row.items() if k not in LABEL_FIELDS})
    return pairs


def _texts_of(row: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, text)`` of every text of a pair that goes into a prompt or a key."""
    texts = [(name, row[name]) for name in ("sentence1", "sentence2", "question", "id") if isinstance(row.get(name), str)]
    texts += [(f"prefix[{i}]", step) for i, step in enumerate(row.get("prefix") or [])]
    return texts


def storable(value: Any) -> Any:
    """``value`` (a row to write) with every lone surrogate in its texts replaced by U+FFFD.

    A model's answer may hold ``\\ud800`` (valid JSON, no text): written raw, UTF-8 cannot encode it,
    and the traceback in :func:`~equiv.rundir.io.append_jsonl` stopped the run and lost every
    answer in flight (issue 66, hole 7). The level is parsed from the answer as it came; only the
    stored copy is mended, as ``errors="replace"`` would, so every reader of the file can read it."""
    if isinstance(value, str):
        if unencodable(value) is None:
            return value
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def load_done(out: str | Path) -> set[str]:
    """Keys already labelled in ``out``; a torn last line is cut off first, so appends stay whole lines."""
    out = Path(out)
    rows, torn = read_json_lines(out)
    if torn:
        write_jsonl_atomic(out, [row for _, row in rows])
    done: set[str] = set()
    for line, row in rows:
        if "result" not in row:
            raise InputError("has no 'result': not a label file written by this command", path=out, line=line)
        done.add(pair_key(row))
    return done


class RateLimiter:
    """At most ``rate`` starts per second, spaced evenly (``None``: no limit)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.next_at = 0.0

    async def wait(self) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        start = max(now, self.next_at)
        self.next_at = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


def _seed(settings: LabelSettings, key: str, attempt: int) -> int:
    digest = hashlib.sha256(f"{settings.seed}:{key}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def pair_error(err: BaseException) -> str | None:
    """Why one request failed when the failure belongs to its pair, not to the run: the server
    refused this prompt (a 4xx such as a context too long) or timed out on it. ``None`` for what
    stops the run (no server, a bad key or model, rate limits, anything unexpected): a pair that
    no one can answer is a failed try, recorded with its pair, not the end of the run."""
    try:
        import openai
    except ImportError:
        return None
    if isinstance(err, openai.APITimeoutError):
        return "the server timed out on this request"
    if isinstance(err, openai.APIStatusError) and 400 <= err.status_code < 500 \
            and err.status_code not in (401, 403, 404, 429):
        return f"the server refused this request (HTTP {err.status_code}): {str(err)[:300]}"
    return None


async def label_pair(client: Any, pair: dict[str, Any], examples: Sequence[Example], settings: LabelSettings,
                     limiter: RateLimiter, stats: RunStats) -> tuple[dict[str, Any], bool]:
    """``(row, ok)``: the labelled row, or a failure row with every raw answer when no try parsed."""
    key = pair_key(pair)
    messages = build_messages(pair, examples, with_question=settings.with_question, with_prefix=settings.with_prefix)
    options = request_options(settings.structured, reasoning_chars=settings.reasoning_chars)
    raw: list[dict[str, Any]] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    reply: Reply | None = None
    for attempt in range(settings.tries):
        await limiter.wait()
        temperature = settings.temperature if attempt == 0 else settings.retry_temperature
        try:
            reply = await ask(client, settings.model, messages, temperature=temperature,
                              max_tokens=settings.max_tokens, seed=_seed(settings, key, attempt), options=options)
        except BadReply as err:  # a 200 that is no chat completion: this try's failure, retried
            stats.requests += 1
            raw.append(raw_entry(None, None, str(err)))
            continue
        except Exception as err:  # noqa: BLE001 -- sorted by pair_error: this pair's, or the run's
            why = pair_error(err)
            if why is None:
                raise
            stats.requests += 1
            raw.append(raw_entry(None, None, why))
            continue
        stats.requests += 1
        usage["prompt_tokens"] += reply.prompt_tokens
        usage["completion_tokens"] += reply.completion_tokens
        stats.prompt_tokens += reply.prompt_tokens
        stats.completion_tokens += reply.completion_tokens
        try:
            answer = parse_answer(reply.text, bare_level=settings.structured == "choice")
        except MalformedAnswer as err:
            raw.append(raw_entry(reply.text, reply.finish_reason, str(err)))
            continue
        raw.append(raw_entry(reply.text, reply.finish_reason, None))
        reasoning, cut_reasoning = capped(answer.reasoning)
        row = {**pair, "result": answer.result, "label_reasoning": reasoning, "label_model": reply.model,
               "label_raw": raw, "label_tries": attempt + 1, "label_usage": usage,
               "label_prompt": {"fewshot": settings.prompt_id, "structured": settings.structured,
                                "with_question": settings.with_question, "with_prefix": settings.with_prefix}}
        thinking, cut_thinking = capped(reply.thinking)
        if thinking:
            row["label_thinking"] = thinking
        cut = [name for name, was in (("label_reasoning", cut_reasoning), ("label_thinking", cut_thinking)) if was]
        if cut:
            row["label_truncated"] = cut
        return row, True
    return {"key": key, "id": pair.get("id"), "sentence1": pair["sentence1"], "sentence2": pair["sentence2"],
            "label_model": reply.model if reply else settings.model, "label_raw": raw, "label_usage": usage}, False


async def run_labelling(client: Any, pairs: Sequence[dict[str, Any]], out: str | Path, examples: Sequence[Example],
                        settings: LabelSettings, *, limit: int | None = None) -> RunStats:
    """Label every pair of ``pairs`` not yet in ``out`` (at most ``limit`` this run), appending as answers arrive.

    One labelling per ``out`` at a time (:func:`equiv.rundir.lock.hold_lock` on ``<out>.lock``): two
    runs would both read ``out`` as it stands, label the same pairs twice and interleave their lines.
    ``out`` is followed to the file it really is (symbolic links resolved) before anything else, so
    two names of one file share one lock and one failures file, and the torn-line repair replaces
    the file, not a link to it."""
    settings.validate()
    given, out = Path(out), real_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    alias = "" if given.absolute() == out else f" (it is {out})"
    with hold_lock(lock_path(out), given, f"is being written by another labelling{alias} ({{holder}}); wait for "
                   "it to finish, or give another --out"):
        return await _run_locked(client, pairs, out, examples, settings, limit)


def real_out(out: str | Path) -> Path:
    """The file ``out`` really names, symbolic links resolved (issue #53, item 8: ``--out k.jsonl``
    and ``--out link.jsonl``, a link to it, took two locks and both labelled: 36 lines for 20 pairs)."""
    return Path(os.path.realpath(out))


def lock_path(out: str | Path) -> Path:
    """The writer lock of a labelling's ``--out``, beside the real file: ``labels.jsonl`` ->
    ``labels.jsonl.lock`` (for a link, the lock of the file it points to)."""
    out = real_out(out)
    return out.with_name(out.name + ".lock")


async def _run_locked(client: Any, pairs: Sequence[dict[str, Any]], out: Path, examples: Sequence[Example],
                      settings: LabelSettings, limit: int | None) -> RunStats:
    done = load_done(out)
    failed_file = failures_path(out)
    earlier = read_failures(failed_file)  # read first: a damaged file is one line before any request
    stats = RunStats(pairs=len(pairs))
    pending = [p for p in pairs if pair_key(p) not in done]
    stats.already = len(pairs) - len(pending)
    if limit is not None:
        pending = pending[:limit]
    limiter = RateLimiter(settings.rate)
    gate = asyncio.Semaphore(settings.concurrency)

    async def one(pair: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        async with gate:
            return await label_pair(client, pair, examples, settings, limiter, stats)

    tasks = [asyncio.create_task(one(p)) for p in pending]
    try:
        with out.open("a", encoding="utf-8") as handle:
            for finished in asyncio.as_completed(tasks):
                row, ok = await finished
                if ok:
                    append_jsonl(handle, [storable(row)])
                    stats.labelled += 1
                    done.add(pair_key(row))
                else:
                    stats.failures.append(storable(row))
                    stats.failed += 1
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # also when the run stopped early: what failed so far is kept, beside what failed before
        write_failures(failed_file, merge_failures(earlier, stats.failures, done))
    return stats


def read_failures(path: Path) -> list[dict[str, Any]]:
    """The failures an earlier run left in ``<out>.failed.jsonl`` (a torn last line left out)."""
    rows, _ = read_json_lines(path)
    for line, row in rows:
        if not isinstance(row.get("key"), str):
            raise InputError("has no 'key': not a failures file written by this command", path=path, line=line,
                             field="key")
    return [row for _, row in rows]


def merge_failures(earlier: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]],
                   labelled: set[str]) -> list[dict[str, Any]]:
    """The failures file after a run: every earlier failure that is still unlabelled, each replaced
    by this run's try where the pair was tried again, then this run's new ones. Never loses a
    failure a ``--limit`` run did not reach (issue #53, item 10: a rerun used to replace the file)."""
    merged: dict[str, dict[str, Any]] = {row["key"]: row for row in earlier if row["key"] not in labelled}
    for row in new:
        merged[row["key"]] = row
    return list(merged.values())


def write_failures(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Replace ``path`` with ``rows`` atomically; no rows: no file (every pair got its label)."""
    if rows:
        write_jsonl_atomic(path, rows)
    elif path.exists():
        path.unlink()


def failures_path(out: str | Path) -> Path:
    """Where a run's unanswerable pairs go: ``labels.jsonl`` -> ``labels.failed.jsonl`` (beside the
    real file, as the lock is)."""
    out = real_out(out)
    return out.with_name(out.stem + ".failed.jsonl")
