"""The OpenAI-compatible chat adapter, and the mapping of SDK errors to ``UpstreamError``.

Retries: a prompt is paid for when the endpoint answers it, whether or not the answer
reaches us, so a request is sent again only when the endpoint cannot have answered it:
the connection was refused or none could be made, or the endpoint refused the request
(408, 409, 429, 500, 502, 503), at most ``max_retries`` times, with exponential backoff
(0.5 s doubling to 8 s, with jitter), honouring a ``Retry-After`` / ``retry-after-ms`` of
at most two minutes (a longer one is raised at once, for the caller to honour). A request
the endpoint may have answered (:attr:`~opencode_memoryd.errors.UpstreamError.delivered`:
a read timeout, a connection dropped while waiting for the answer, a 504) is never sent
again here: the error is raised, and the caller decides (the daemon retries the session
after its backoff; ``maintain`` leaves the mark for the next run). The openai SDK's own
retries, which resend after a timeout, are off.

Nothing here logs the prompt or the reply: only sizes, token counts, timings and error kinds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# openai checks ``sys.modules['httpx']`` on every request; importing httpx here, before
# any worker thread runs, keeps a request from seeing it half-imported by another
# thread ("partially initialized module 'httpx'").
import httpx  # noqa: F401
import openai
import structlog

from opencode_memoryd.errors import ExtractionError, UpstreamError
from opencode_memoryd.openai_compat import PLACEHOLDER_API_KEY, map_openai_error

log = structlog.get_logger(__name__)

#: The accepted values of ``json_mode``.
JSON_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")
#: The longest ``Retry-After`` (s) :class:`ChatClient` waits for itself before a retry.
MAX_RETRY_AFTER_SECONDS = 120.0
#: The first and the longest backoff (s) between two attempts without ``Retry-After``.
BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS = 0.5, 8.0


def may_resend(error: UpstreamError) -> bool:
    """Whether a request that failed with ``error`` may be sent again at once: the failure
    is transient (``retryable``) and the endpoint cannot have answered it (not
    ``delivered``), and any ``Retry-After`` is at most :data:`MAX_RETRY_AFTER_SECONDS`."""
    if not error.retryable or error.delivered:
        return False
    wait = error.retry_after_seconds
    return wait is None or wait <= MAX_RETRY_AFTER_SECONDS


def retry_delay(attempt: int, error: UpstreamError) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): the server's ``Retry-After``
    when it sent one, else 0.5 s doubling to 8 s, less up to a quarter of jitter."""
    if error.retry_after_seconds is not None:
        return error.retry_after_seconds
    base = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2.0 ** (attempt - 1))
    return base * (1 - 0.25 * random.random())


@dataclass(frozen=True)
class ChatReply:
    """One answer of the chat endpoint.

    Attributes:
        content: the message text (expected to be JSON; not parsed here).
        tokens_in: prompt tokens from ``usage``, or ``chars / 4`` when the server sent none.
        tokens_out: completion tokens from ``usage``, or ``chars / 4`` when it sent none.
        model: the model name the server reported (the requested one if it sent none).
        finish_reason: ``stop``, ``length``, … or ``None`` when the server sent none.
    """

    content: str
    tokens_in: int
    tokens_out: int
    model: str
    finish_reason: str | None



def response_format(json_mode: str, schema: dict[str, Any], schema_name: str) -> Any:
    """The ``response_format`` argument for ``json_mode``, or ``openai.omit`` for ``none``."""
    if json_mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }
    if json_mode == "json_object":
        return {"type": "json_object"}
    return openai.omit


class ChatClient:
    """A synchronous client of an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: the endpoint root, ending in ``/v1`` for most servers.
        api_key: the key, or ``None`` for endpoints that need none.
        model: the model name sent with every request.
        timeout_seconds: the per-attempt timeout (connect, read, write), in seconds.
        max_retries: how often a request the endpoint cannot have answered is sent again
            (0 = never; see the module docstring).
        temperature: the sampling temperature.
        json_mode: ``json_schema`` (strict structured output), ``json_object`` (JSON mode)
            or ``none`` (no ``response_format``; the prompt alone asks for JSON).
        http_client: an ``httpx2.Client`` to use instead of the SDK's own.
        sleep: waits between attempts (seconds); injectable for tests.

    Raises:
        ValueError: on an unknown ``json_mode`` or a negative ``max_retries``.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_seconds: float = 60,
        max_retries: int = 2,
        temperature: float = 0.0,
        json_mode: str = "json_schema",
        http_client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {', '.join(JSON_MODES)}, not {json_mode!r}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.model = model
        self.temperature = temperature
        self.json_mode = json_mode
        self.max_retries = max_retries
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=timeout_seconds,
            max_retries=0,  # retried here, never after the endpoint may have answered
            http_client=http_client,
        )

    def close(self) -> None:
        """Close the underlying HTTP connections."""
        self._client.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> ChatReply:
        """Send one system + user exchange and return the model's (JSON) text.

        ``schema`` and ``schema_name`` are used only in ``json_schema`` mode. The content is
        returned unparsed; the caller validates it.

        Raises:
            UpstreamError: the endpoint failed, after the retries the module docstring
                describes (see :func:`map_openai_error`).
            ExtractionError: the answer has no choice or no text content (e.g. a refusal).
        """
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                completion = self._client.chat.completions.create(
                    model=self.model,
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                    temperature=self.temperature,
                    response_format=response_format(self.json_mode, schema, schema_name),
                )
                break
            except openai.OpenAIError as exc:
                error = map_openai_error(exc)
                attempt += 1
                resend = attempt <= self.max_retries and may_resend(error)
                log.warning("llm.error", kind=error.kind, status=error.status,
                            retryable=error.retryable, delivered=error.delivered,
                            attempt=attempt, resend=resend, model=self.model,
                            elapsed_ms=int((time.monotonic() - started) * 1000))
                if not resend:
                    raise error from exc
                self._sleep(retry_delay(attempt, error))
        reply = self._reply(completion, prompt_chars=len(system) + len(user))
        log.debug("llm.reply", model=reply.model, tokens_in=reply.tokens_in,
                  tokens_out=reply.tokens_out, finish_reason=reply.finish_reason,
                  attempts=attempt + 1, elapsed_ms=int((time.monotonic() - started) * 1000))
        return reply

    def _reply(self, completion: Any, *, prompt_chars: int) -> ChatReply:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise ExtractionError("the endpoint answered without a choice")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        finish_reason = getattr(choice, "finish_reason", None)
        if not isinstance(content, str) or not content.strip():
            refusal = getattr(message, "refusal", None)
            why = "a refusal" if refusal else f"no text (finish_reason={finish_reason})"
            raise ExtractionError(f"the endpoint answered with {why}")
        usage = getattr(completion, "usage", None)
        tokens_in = getattr(usage, "prompt_tokens", None)
        tokens_out = getattr(usage, "completion_tokens", None)
        return ChatReply(
            content=content,
            tokens_in=int(tokens_in) if tokens_in is not None else prompt_chars // 4,
            tokens_out=int(tokens_out) if tokens_out is not None else len(content) // 4,
            model=str(getattr(completion, "model", None) or self.model),
            finish_reason=finish_reason,
        )
