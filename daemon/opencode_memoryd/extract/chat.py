"""The OpenAI-compatible chat adapter, and the mapping of SDK errors to ``UpstreamError``.

Retries: the openai SDK retries connection errors, timeouts, 408, 409, 429 and 5xx itself,
``max_retries`` times, with exponential backoff (0.5 s doubling to 8 s, with jitter). It
honours a server ``Retry-After`` / ``retry-after-ms`` of at most two minutes and does not
retry when the server asks for a longer wait. ``max_retries`` comes from the config: set it to
0 when an outer loop owns retrying. Whatever is left after the SDK's retries is raised as
:class:`~opencode_memoryd.errors.UpstreamError`.

Nothing here logs the prompt or the reply: only sizes, token counts, timings and error kinds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# openai checks ``sys.modules['httpx']`` on every request; importing httpx here, before
# any worker thread runs, keeps a request from seeing it half-imported by another
# thread ("partially initialized module 'httpx'").
import httpx  # noqa: F401
import openai
import structlog

from opencode_memoryd.errors import ExtractionError
from opencode_memoryd.openai_compat import PLACEHOLDER_API_KEY, map_openai_error

log = structlog.get_logger(__name__)

#: The accepted values of ``json_mode``.
JSON_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")

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
        max_retries: how often the SDK itself retries a retryable failure (0 = never).
        temperature: the sampling temperature.
        json_mode: ``json_schema`` (strict structured output), ``json_object`` (JSON mode)
            or ``none`` (no ``response_format``; the prompt alone asks for JSON).
        http_client: an ``httpx2.Client`` to use instead of the SDK's own.

    Raises:
        ValueError: on an unknown ``json_mode``.
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
    ) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {', '.join(JSON_MODES)}, not {json_mode!r}")
        self.model = model
        self.temperature = temperature
        self.json_mode = json_mode
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=timeout_seconds,
            max_retries=max_retries,
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
            UpstreamError: the endpoint failed after the SDK's retries (see
                :func:`map_openai_error`).
            ExtractionError: the answer has no choice or no text content (e.g. a refusal).
        """
        started = time.monotonic()
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
        except openai.OpenAIError as exc:
            error = map_openai_error(exc)
            log.warning("llm.error", kind=error.kind, status=error.status,
                        retryable=error.retryable, model=self.model,
                        elapsed_ms=int((time.monotonic() - started) * 1000))
            raise error from exc
        reply = self._reply(completion, prompt_chars=len(system) + len(user))
        log.debug("llm.reply", model=reply.model, tokens_in=reply.tokens_in,
                  tokens_out=reply.tokens_out, finish_reason=reply.finish_reason,
                  elapsed_ms=int((time.monotonic() - started) * 1000))
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
