"""One chat request to an OpenAI-compatible endpoint, through the official ``openai`` client.

Any server that speaks the chat-completions API works: ``vllm serve``, SGLang, a hosted API. The
key comes from the environment (``--api_key_env``, default ``OPENAI_API_KEY``; a local server
needs none). ``structured`` picks how the answer's shape is enforced:

- ``json_schema`` (default): ``response_format`` with the answer dictionary's JSON schema, the
  OpenAI API's structured output, which vLLM and SGLang also implement (constrained decoding);
- ``choice``: vLLM's ``structured_outputs: {"choice": ["0", ..., "4"]}`` -- the level alone, no
  explanation (vLLM only; the cheapest way to get a level from a weak model);
- ``none``: free text, parsed by :mod:`equiv.labelling.parse` (for servers without either).

``openai`` is imported when a client is made, so the rest of the package (and its tests) does
not need it; install it with ``pip install -e ".[label]"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from equiv.errors import InputError, one_line
from equiv.httpbounds import AnswerTooLarge, bounded_async_transport

STRUCTURED = ("json_schema", "choice", "none")
MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The most bytes (decoded) of one answer: a chat completion of 100k tokens, its thinking included,
is a few MB; a bigger body (a runaway server, a gzip bomb) is refused as it streams in."""

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning_step": {"type": "string"},
        "result": {"type": "integer", "enum": [0, 1, 2, 3, 4]},
    },
    "required": ["reasoning_step", "result"],
    "additionalProperties": False,
}


class BadReply(ValueError):
    """A 200 answer that is not a chat completion: a body that is not JSON or not UTF-8, a web
    page (``text/html``, say a proxy's), no ``choices``. ``str()`` is a short reason; the run
    records it as the pair's failed try (retried, then ``<out>.failed.jsonl``), never a traceback."""


@dataclass(frozen=True)
class Reply:
    """What one request returned: the answer text, the model the server says answered, the tokens,
    and a reasoning model's separate thinking (``reasoning_content``) when the server sends one."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    thinking: str | None = None


def make_client(base_url: str, api_key: str | None, *, timeout: float = 300.0, max_retries: int = 2,
                max_answer_bytes: int = MAX_ANSWER_BYTES) -> Any:
    """An ``openai.AsyncOpenAI`` for ``base_url``; the client itself retries transient errors
    (connection, 429, 5xx, a timeout) ``max_retries`` times with back-off. ``timeout`` bounds each
    HTTP request as a whole -- connect, send and the whole answer -- not each read (a server
    trickling a byte a second never tripped a per-read timeout); an answer past
    ``max_answer_bytes`` decoded bytes is refused as it arrives (:mod:`equiv.httpbounds`)."""
    try:
        import openai
    except ImportError:
        raise InputError("needs the 'openai' package: pip install -e \".[label]\"", field="base_url") from None
    http_client = openai.DefaultAsyncHttpxClient(
        timeout=timeout, transport=bounded_async_transport(_httpx_of(openai), timeout=timeout,
                                                           max_bytes=max_answer_bytes))
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=max_retries,
                              http_client=http_client)


def _httpx_of(openai: Any) -> Any:
    """The httpx module the installed ``openai`` is built on (``httpx``; ``httpx2`` from 3.x)."""
    import importlib

    for cls in openai.DefaultAsyncHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if cls.__name__ == "AsyncClient" and root.startswith("httpx"):
            return importlib.import_module(root)
    raise InputError(f"openai {openai.__version__} is not built on httpx; install openai>=1.40,<4", field="base_url")


def request_options(structured: str, *, reasoning_chars: int | None = None) -> dict[str, Any]:
    """The extra arguments of ``chat.completions.create`` for ``structured`` (module docstring)."""
    if structured == "json_schema":
        schema = ANSWER_SCHEMA
        if reasoning_chars is not None:
            schema = {**ANSWER_SCHEMA, "properties": {
                **ANSWER_SCHEMA["properties"], "reasoning_step": {"type": "string", "maxLength": reasoning_chars}}}
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "equivalence_label", "schema": schema, "strict": True}}}
    if structured == "choice":
        return {"extra_body": {"structured_outputs": {"choice": [str(level) for level in range(5)]}}}
    if structured == "none":
        return {}
    raise InputError(f"must be one of {', '.join(STRUCTURED)}, got {structured!r}", field="structured")


async def ask(client: Any, model: str, messages: Sequence[dict[str, str]], *, temperature: float, max_tokens: int,
              seed: int | None, options: dict[str, Any]) -> Reply:
    """Send one chat request and return its :class:`Reply`. API errors propagate to the caller; a
    200 whose body is not a chat completion is :class:`BadReply`."""
    try:
        response = await client.chat.completions.create(
            model=model, messages=list(messages), temperature=temperature, max_tokens=max_tokens, seed=seed,
            **options)
    except AnswerTooLarge as err:
        raise BadReply(one_line(err, 200)) from None
    except UnicodeDecodeError as err:  # a ValueError too: before the JSON check
        raise BadReply(f"the server's answer is not UTF-8 ({err.reason} at byte {err.start})") from None
    except ValueError as err:  # json.JSONDecodeError from the client's parse of a 200
        raise BadReply(f"the server's answer is not JSON ({one_line(err, 120)})") from None
    except Exception as err:  # an older client wraps (and retries) any error of its transport
        if isinstance(err.__cause__, AnswerTooLarge):
            raise BadReply(one_line(err.__cause__, 200)) from None
        raise
    return _reply(response, model)


def _reply(response: Any, model: str) -> Reply:
    """The :class:`Reply` in a parsed response, or :class:`BadReply` saying what it lacks. The
    client builds responses without validating them, so a body of another shape arrives as a
    string (a non-JSON content type), a list, or an object whose fields are anything."""
    if isinstance(response, (str, bytes)):
        raise BadReply(f"the server's answer is not a chat completion but text: {one_line(response, 120)!r}")
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        what = "an empty 'choices'" if isinstance(choices, list) else "no 'choices' list"
        raise BadReply(f"the server's answer has {what} (no answer in it)")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    if message is None or not (content is None or isinstance(content, str)):
        raise BadReply("the server's answer has no message text in its first choice")
    thinking = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    usage = getattr(response, "usage", None)
    answered = getattr(response, "model", None)
    return Reply(
        text=content or "",
        model=answered if isinstance(answered, str) and answered else model,
        prompt_tokens=_count(getattr(usage, "prompt_tokens", 0)),
        completion_tokens=_count(getattr(usage, "completion_tokens", 0)),
        finish_reason=str(getattr(choice, "finish_reason", None)),
        thinking=thinking if isinstance(thinking, str) else None,
    )


def _count(value: Any) -> int:
    """A token count as the server gave it; anything but a non-negative integer counts 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
