"""The OpenAI-compatible chat adapter, and the mapping of SDK errors to ``UpstreamError``.

Retries: the openai SDK retries connection errors, timeouts, 408, 409, 429 and 5xx itself,
``max_retries`` times, with exponential backoff (0.5 s doubling to 8 s, with jitter). It
honours a server ``Retry-After`` / ``retry-after-ms`` of at most two minutes and does not
retry when the server asks for a longer wait. ``max_retries`` comes from the config: set it to
0 when an outer loop owns retrying. Whatever is left after the SDK's retries is raised as
:class:`~opencode_memoryd.errors.UpstreamError`.

Structured output is negotiated per endpoint and model: the client starts from the
configured ``json_mode`` (or the mode remembered for this endpoint and model, see
:class:`ModeMemory`) and, when the server refuses the ``response_format`` it was sent (an
HTTP 400/422/500/501 whose message names ``response_format``, ``json_schema`` or
``json_object``: llama.cpp's server answers 500 for ``json_schema``), falls back along
:data:`JSON_MODES` (``json_schema`` → ``json_object`` → ``none``) and sends the same request
again. Below ``json_schema`` the schema is given in the system prompt instead; every answer
is validated by the caller the same way, whatever the mode.

Nothing here logs the prompt or the reply: only sizes, token counts, timings and error kinds.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

# openai checks ``sys.modules['httpx']`` on every request; importing httpx here, before
# any worker thread runs, keeps a request from seeing it half-imported by another
# thread ("partially initialized module 'httpx'").
import httpx  # noqa: F401
import openai
import structlog

from opencode_memoryd.errors import ExtractionError, MemorydError, ReplyCutOff, UpstreamError
from opencode_memoryd.models import NegotiatedMode, iso_utc
from opencode_memoryd.openai_compat import PLACEHOLDER_API_KEY, map_openai_error

log = structlog.get_logger(__name__)

#: The accepted values of ``json_mode``, strongest first: negotiation moves down the list.
JSON_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")

#: An error message that says the server refused the structured-output request.
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|structured[ _-]?output",
                             re.IGNORECASE)
#: The statuses such a refusal comes with (llama.cpp's server answers 500).
_FORMAT_STATUSES = frozenset({400, 422, 500, 501})
#: A server that wants ``max_completion_tokens`` instead of ``max_tokens`` says so.
_TOKEN_PARAM_REFUSAL = re.compile(r"max_tokens.*max_completion_tokens|"
                                  r"max_completion_tokens.*max_tokens", re.IGNORECASE | re.DOTALL)


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


class ModeMemory(Protocol):
    """Where the structured-output mode that works is remembered, per endpoint and model.

    Implemented by :class:`~opencode_memoryd.state.db.StateDB` (table ``llm_modes``).
    """

    def llm_mode(self, base_url: str, model: str) -> NegotiatedMode | None:
        """The mode remembered for ``(base_url, model)``, or ``None``."""
        ...

    def remember_llm_mode(self, mode: NegotiatedMode) -> None:
        """Remember ``mode`` for its ``(base_url, model)`` (replacing what was there)."""
        ...


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


def schema_instructions(schema: dict[str, Any]) -> str:
    """The paragraph added to the system prompt below ``json_schema`` mode: the answer's
    JSON schema, since the server does not enforce it."""
    return ("Answer with one JSON object and nothing else (no prose, no code fence). It must "
            "match this JSON schema:\n" + json.dumps(schema, separators=(",", ":")))


def refuses_format(error: UpstreamError) -> bool:
    """Whether ``error`` is the server refusing the ``response_format`` it was sent."""
    return error.status in _FORMAT_STATUSES and bool(_FORMAT_REFUSAL.search(str(error)))


def next_mode(mode: str) -> str | None:
    """The mode after ``mode`` in :data:`JSON_MODES`, or ``None`` after the last."""
    i = JSON_MODES.index(mode)
    return JSON_MODES[i + 1] if i + 1 < len(JSON_MODES) else None


class ChatClient:
    """A synchronous client of an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: the endpoint root, ending in ``/v1`` for most servers.
        api_key: the key, or ``None`` for endpoints that need none.
        model: the model name sent with every request.
        timeout_seconds: the per-attempt timeout (connect, read, write), in seconds.
        max_retries: how often the SDK itself retries a retryable failure (0 = never).
        temperature: the sampling temperature.
        json_mode: where structured-output negotiation starts: ``json_schema`` (strict
            structured output), ``json_object`` (JSON mode) or ``none`` (no
            ``response_format``; the prompt alone asks for JSON).
        http_client: an ``httpx2.Client`` to use instead of the SDK's own.
        modes: where the negotiated mode is remembered across runs (``None``: for this
            client's life only).
        clock: the current aware UTC time (for :attr:`NegotiatedMode.updated_at`).

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
        modes: ModeMemory | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {', '.join(JSON_MODES)}, not {json_mode!r}")
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.configured_mode = json_mode
        self.modes = modes
        self.clock = clock
        self._mode: str | None = None
        self._confirmed = False
        self._token_param = "max_tokens"
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=timeout_seconds,
            max_retries=max_retries,
            http_client=http_client,
        )

    @property
    def json_mode(self) -> str:
        """The structured-output mode requests are sent with now: the remembered one for
        this endpoint and model when it was negotiated from the configured start, else the
        configured one."""
        if self._mode is None:
            remembered = self._remembered()
            self._mode = remembered.json_mode if remembered else self.configured_mode
            self._confirmed = remembered is not None
        return self._mode

    def _remembered(self) -> NegotiatedMode | None:
        if self.modes is None:
            return None
        try:
            got = self.modes.llm_mode(self.base_url, self.model)
        except MemorydError as exc:
            log.warning("llm.mode_unreadable", error=str(exc))
            return None
        if got is None or got.start != self.configured_mode or got.json_mode not in JSON_MODES:
            return None
        return got

    def _remember(self, mode: str, detail: str) -> None:
        self._mode = mode
        self._confirmed = True
        if self.modes is None:
            return
        try:
            self.modes.remember_llm_mode(NegotiatedMode(
                base_url=self.base_url, model=self.model, json_mode=mode,
                start=self.configured_mode, detail=detail, updated_at=iso_utc(self.clock())))
        except MemorydError as exc:
            log.warning("llm.mode_not_remembered", error=str(exc))

    def close(self) -> None:
        """Close the underlying HTTP connections."""
        self._client.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """Send one system + user exchange and return the model's (JSON) text.

        ``schema`` and ``schema_name`` go into ``response_format`` in ``json_schema`` mode,
        and into the system prompt (:func:`schema_instructions`) below it. The content is
        returned unparsed; the caller validates it.

        Args:
            max_tokens: the cap on the answer's tokens (sent as ``max_tokens``, or
                ``max_completion_tokens`` to a server that asks for it); ``None`` sends
                none.

        Raises:
            UpstreamError: the endpoint failed after the SDK's retries (see
                :func:`map_openai_error`), or refused every structured-output mode.
            ReplyCutOff: the answer has no text and stopped at the token cap.
            ExtractionError: the answer has no choice or no text content (e.g. a refusal).
        """
        started = time.monotonic()
        mode = self.json_mode
        while True:
            try:
                completion = self._create(system, user, schema, schema_name, mode, max_tokens)
                break
            except UpstreamError as error:
                log.warning("llm.error", kind=error.kind, status=error.status,
                            retryable=error.retryable, model=self.model, json_mode=mode,
                            elapsed_ms=int((time.monotonic() - started) * 1000))
                fallback = next_mode(mode) if refuses_format(error) else None
                if fallback is None:
                    raise
                log.warning("llm.json_mode_fallback", refused=mode, now=fallback,
                            status=error.status, model=self.model)
                self._remember(fallback, f"{mode} refused: {error}")
                mode = fallback
        if not self._confirmed:
            self._remember(mode, "works")
        reply = self._reply(completion, prompt_chars=len(system) + len(user))
        log.debug("llm.reply", model=reply.model, tokens_in=reply.tokens_in,
                  tokens_out=reply.tokens_out, finish_reason=reply.finish_reason,
                  json_mode=mode, elapsed_ms=int((time.monotonic() - started) * 1000))
        return reply

    def _create(self, system: str, user: str, schema: dict[str, Any], schema_name: str,
                mode: str, max_tokens: int | None) -> Any:
        """One request in ``mode``; a server that wants ``max_completion_tokens`` gets it
        (remembered for this client's life)."""
        if mode != "json_schema":
            system = f"{system}\n\n{schema_instructions(schema)}"
        while True:
            extra: dict[str, Any] = {}
            if max_tokens:
                extra[self._token_param] = max_tokens
            try:
                return self._client.chat.completions.create(
                    model=self.model,
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                    temperature=self.temperature,
                    response_format=response_format(mode, schema, schema_name),
                    **extra,
                )
            except openai.OpenAIError as exc:
                error = map_openai_error(exc)
                if (max_tokens and self._token_param == "max_tokens"
                        and error.kind == "bad_request"
                        and _TOKEN_PARAM_REFUSAL.search(str(error))):
                    self._token_param = "max_completion_tokens"
                    continue
                raise error from exc

    def _reply(self, completion: Any, *, prompt_chars: int) -> ChatReply:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise ExtractionError("the endpoint answered without a choice")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        finish_reason = getattr(choice, "finish_reason", None)
        usage = getattr(completion, "usage", None)
        tokens_in = getattr(usage, "prompt_tokens", None)
        tokens_out = getattr(usage, "completion_tokens", None)
        text = content if isinstance(content, str) else ""
        t_in = int(tokens_in) if tokens_in is not None else prompt_chars // 4
        t_out = int(tokens_out) if tokens_out is not None else len(text) // 4
        if not text.strip():
            if finish_reason == "length":
                raise ReplyCutOff("the endpoint answered with no text before the token cap "
                                  "(finish_reason=length)", tokens_in=t_in, tokens_out=t_out)
            refusal = getattr(message, "refusal", None)
            why = "a refusal" if refusal else f"no text (finish_reason={finish_reason})"
            raise ExtractionError(f"the endpoint answered with {why}", tokens_in=t_in,
                                  tokens_out=t_out)
        return ChatReply(
            content=text,
            tokens_in=t_in,
            tokens_out=t_out,
            model=str(getattr(completion, "model", None) or self.model),
            finish_reason=finish_reason,
        )
