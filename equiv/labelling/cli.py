"""``search_cli.py label`` and ``search_cli.py agreement`` (guide: docs/judge-data.md).

Bad input (a missing or malformed pairs file, a bad few-shot file, an option out of range, a
server that cannot be reached or refuses the model) is one line and exit 2. Pairs the model never
answered usably are one line and exit 1, after every other pair was labelled and written.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from equiv.cliargs import as_lists, command_parser, parse_or_refuse
from equiv.data.records import LabelMapping
from equiv.errors import InputError, exit_on_input_error, one_line
from equiv.labelling.agreement import compare, read_labels
from equiv.labelling.client import STRUCTURED, make_client
from equiv.labelling.prompt import DEFAULT_FEWSHOT, fewshot_digest, read_fewshot
from equiv.labelling.run import LabelSettings, failures_path, lock_path, read_pairs, run_labelling
from equiv.rundir.io import write_jsonl_atomic
from equiv.rundir.outputs import check_output

EXIT_UNANSWERED = 1


def build_label_parser() -> Any:
    """``label``'s parser (jsonargparse, :func:`equiv.cliargs.command_parser`): the same flags as
    ever, and ``--config`` for a YAML file of them (a labeller's settings, kept beside its labels)."""
    p = command_parser(
        "search_cli.py label",
        "Label step pairs on the MathEquiv five-level scale with an LLM behind any OpenAI-compatible "
        "chat endpoint (vllm serve, SGLang, a hosted API). Resumable: rerun the same command after a kill.")
    p.add_argument("pairs", help="JSONL of pairs (search_cli.py siblings output): sentence1, sentence2, id, question, prefix")
    p.add_argument("--out", required=True, help="labelled JSONL (appended; a rerun skips labelled pairs)")
    p.add_argument("--model", required=True, help="the model name the server serves")
    p.add_argument("--base_url", required=True, help="e.g. http://127.0.0.1:8000/v1 (vllm serve) or https://api.openai.com/v1")
    p.add_argument("--api_key_env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (default OPENAI_API_KEY; a local server needs none)")
    p.add_argument("--fewshot", default=str(DEFAULT_FEWSHOT), help="JSONL of few-shot examples (default: the shipped ones)")
    p.add_argument("--with_question", action="store_true", help="show the problem's question with each pair")
    p.add_argument("--with_prefix", action="store_true", help="show the steps both siblings continue")
    p.add_argument("--structured", choices=STRUCTURED, default="json_schema",
                   help="how the answer's shape is enforced: the server's JSON-schema output (default), vLLM's "
                        "choice of levels (no explanation), or none (free text, parsed)")
    p.add_argument("--reasoning_chars", type=int, default=None,
                   help="with json_schema: cap the explanation at this many characters (the schema's maxLength)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--retry_temperature", type=float, default=0.7, help="temperature of the tries after the first")
    p.add_argument("--max_tokens", type=int, default=1024)
    p.add_argument("--tries", type=int, default=3, help="requests per pair at most, malformed answers retried")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at most")
    p.add_argument("--rate", type=float, default=None, help="requests started per second at most (default: no limit)")
    p.add_argument("--limit", type=int, default=None, help="label at most this many pending pairs in this run")
    p.add_argument("--seed", type=int, default=0, help="seeds each request (servers that honour 'seed')")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one HTTP request may take as a whole (connect, send, the whole answer) before the client gives up")
    return p


def _api_error_line(err: Exception, base_url: str, model: str) -> InputError:
    """An ``openai`` error as one line naming the endpoint and model (never a traceback)."""
    status = getattr(err, "status_code", None)
    what = f"HTTP {status}: " if status else ""
    return InputError(f"{what}{one_line(getattr(err, 'message', None) or err, 300)} (model {model!r})",
                      path=base_url, field="base_url")


def label_main(argv: list[str] | None = None) -> int:
    args = parse_or_refuse(build_label_parser(), sys.argv[1:] if argv is None else argv)
    with exit_on_input_error():
        if args.limit is not None and args.limit < 1:
            raise InputError(f"must be at least 1, got {args.limit}", field="limit")
        if args.reasoning_chars is not None and args.reasoning_chars < 1:
            raise InputError(f"must be at least 1, got {args.reasoning_chars}", field="reasoning_chars")
        if Path(args.out).is_dir():
            raise InputError("is a directory; give a file name", path=args.out, field="out")
        check_output(args.out, option="--out", inputs=[args.pairs, args.fewshot],
                     also=[failures_path(args.out), lock_path(args.out)])
        settings = LabelSettings(
            model=args.model, structured=args.structured, temperature=args.temperature,
            retry_temperature=args.retry_temperature, max_tokens=args.max_tokens, tries=args.tries,
            concurrency=args.concurrency, rate=args.rate, with_question=args.with_question,
            with_prefix=args.with_prefix, seed=args.seed, reasoning_chars=args.reasoning_chars,
            prompt_id=fewshot_digest(args.fewshot) if Path(args.fewshot).is_file() else "")
        settings.validate()
        examples = read_fewshot(args.fewshot)
        pairs = read_pairs(args.pairs)
        client = make_client(args.base_url, os.environ.get(args.api_key_env), timeout=args.timeout)
        import openai

        async def labelled():  # the client closes inside the loop it ran in (no warnings at exit)
            try:
                return await run_labelling(client, pairs, args.out, examples, settings, limit=args.limit)
            finally:
                await client.close()

        try:
            stats = asyncio.run(labelled())
        except openai.APIError as err:
            raise _api_error_line(err, args.base_url, args.model) from None
    print(f"{stats.labelled} pairs labelled, {stats.already} already labelled, {stats.failed} unanswered, "
          f"of {stats.pairs}; {stats.requests} requests, {stats.prompt_tokens} prompt + "
          f"{stats.completion_tokens} completion tokens", file=sys.stderr)
    print(json.dumps({**stats.as_dict(), "out": args.out}))
    if stats.failed:
        print(f"error: {stats.failed} pair(s) got no usable answer in {settings.tries} tries each; their raw answers "
              f"are in {failures_path(args.out)}; rerun to try them again", file=sys.stderr)
        return EXIT_UNANSWERED
    return 0


def build_agreement_parser() -> Any:
    """``agreement``'s parser (jsonargparse, :func:`equiv.cliargs.command_parser`), with ``--config``."""
    p = command_parser(
        "search_cli.py agreement",
        "Compare two labellings of the same pairs (two models, two samplings, a model and a human file): "
        "level and binary agreement, Cohen's kappa, and the disagreements to settle.")
    p.add_argument("a", help="labelled JSONL (e.g. the model's)")
    p.add_argument("b", help="labelled JSONL (e.g. a human's, or a second model's)")
    p.add_argument("--disagreements", default=None, help="write every disagreement here (JSONL, binary ones first)")
    p.add_argument("--equivalent", type=int, nargs="+", default=[3, 4], help="levels that mean equivalent (default 3 4)")
    p.add_argument("--not_equivalent", type=int, nargs="+", default=[0, 1], help="levels that mean not (default 0 1)")
    return p


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def agreement_main(argv: list[str] | None = None) -> int:
    args = parse_or_refuse(build_agreement_parser(), sys.argv[1:] if argv is None else argv)
    with exit_on_input_error():
        as_lists(args, "equivalent", "not_equivalent")
        if args.disagreements:  # before reading: never over either labelling
            check_output(args.disagreements, option="--disagreements", inputs=[args.a, args.b])
        mapping = LabelMapping(tuple(args.equivalent), tuple(args.not_equivalent))
        result = compare(read_labels(args.a), read_labels(args.b), mapping)
        if args.disagreements:
            write_jsonl_atomic(args.disagreements, result.disagreements)
    print(f"{result.common} pairs in both ({result.only_a} only in {args.a}, {result.only_b} only in {args.b}); "
          f"levels: agreement {result.level_agreement:.3f}, kappa {_fmt(result.level_kappa)}; binary "
          f"({result.binary_pairs} pairs, {result.binary_dropped} with a dropped level): agreement "
          f"{_fmt(result.binary_agreement)}, kappa {_fmt(result.binary_kappa)}; {len(result.disagreements)} "
          f"disagreements" + (f" in {args.disagreements}" if args.disagreements else ""), file=sys.stderr)
    print(json.dumps(result.summary()))
    return 0
