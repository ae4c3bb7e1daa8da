"""The OpenAI-compatible chat adapter.

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

Structured output is negotiated per endpoint and model (:mod:`opencode_memoryd.llm.modes`):
the client starts from the configured ``json_mode`` (or the mode remembered for this
endpoint and model) and, when the server refuses the ``response_format`` it was sent (an
HTTP 400/422/500/501 whose message names ``response_format``, ``json_schema`` or
``json_object``: llama.cpp's server answers 500 for ``json_schema``), falls back along
``json_schema`` → ``json_object`` → ``none`` and sends the same request again. Below
``json_schema`` the schema is given in the system prompt instead; every answer is validated
by the caller the same way, whatever the mode.

Nothing here logs the prompt or the reply: only sizes, token counts, timings and error kinds.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# openai checks ``sys.modules['httpx']`` on every request; importing httpx here, before
# any worker thread runs, keeps a request from seeing it half-imported by another
# thread ("partially initialized module 'httpx'").
import httpx  # noqa: F401
import openai
import structlog

from opencode_memoryd.errors import ExtractionError, MemorydError, ReplyCutOff, UpstreamError
from opencode_memoryd.llm.client import openai_client
from opencode_memoryd.llm.errors import map_openai_error
from opencode_memoryd.llm.modes import (
    JSON_MODES,
    ModeMemory,
    next_mode,
    refuses_format,
    response_format,
    schema_instructions,
)
from opencode_memoryd.models import NegotiatedMode, iso_utc

log = structlog.get_logger(__name__)

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
        json_mode: where structured-output negotiation starts: ``json_schema`` (strict
            structured output), ``json_object`` (JSON mode) or ``none`` (no
            ``response_format``; the prompt alone asks for JSON).
        http_client: an ``httpx2.Client`` to use instead of the SDK's own.
        modes: where the negotiated mode is remembered across runs (``None``: for this
            client's life only).
        clock: the current aware UTC time (for :attr:`NegotiatedMode.updated_at`).
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
        modes: ModeMemory | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {', '.join(JSON_MODES)}, not {json_mode!r}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.configured_mode = json_mode
        self.modes = modes
        self.clock = clock
        self._mode: str | None = None
        self._confirmed = False
        self._token_param = "max_tokens"
        self.max_retries = max_retries
        self._sleep = sleep
        self._client = openai_client(
            base_url=base_url, api_key=api_key, timeout_seconds=timeout_seconds,
            max_retries=0,  # retried here, never after the endpoint may have answered
            http_client=http_client)

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
            UpstreamError: the endpoint failed, after the resends the module docstring
                describes (see :func:`map_openai_error`), or refused every
                structured-output mode.
            ReplyCutOff: the answer has no text and stopped at the token cap.
            ExtractionError: the answer has no choice or no text content (e.g. a refusal).
        """
        started = time.monotonic()
        mode = self.json_mode
        resent = 0
        while True:
            try:
                completion = self._create(system, user, schema, schema_name, mode, max_tokens)
                break
            except UpstreamError as error:
                fallback = next_mode(mode) if refuses_format(error) else None
                resend = (fallback is None and resent < self.max_retries
                          and may_resend(error))
                log.warning("llm.error", kind=error.kind, status=error.status,
                            retryable=error.retryable, delivered=error.delivered,
                            resend=resend, model=self.model, json_mode=mode,
                            elapsed_ms=int((time.monotonic() - started) * 1000))
                if resend:
                    resent += 1
                    self._sleep(retry_delay(resent, error))
                    continue
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
                  json_mode=mode, sent=resent + 1,
                  elapsed_ms=int((time.monotonic() - started) * 1000))
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
