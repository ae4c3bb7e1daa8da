"""The OpenAI-compatible HTTP API's errors, mapped one way for the chat and embeddings
adapters.

:func:`map_openai_error` turns every openai SDK exception into an
:class:`~opencode_memoryd.errors.UpstreamError` with a ``kind`` and a ``retryable`` flag;
:func:`retry_after_seconds` reads a server's ``Retry-After`` (RFC 9110 section 10.2.3:
seconds, or an HTTP date) and the non-standard ``retry-after-ms``.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from typing import Any

import httpx2
import openai

from opencode_memoryd.errors import UpstreamError

_CONTEXT_LENGTH = re.compile(
    r"context[ _]length|maximum context|context window|context size|prompt is too long"
    r"|too many (input )?tokens|maximum input length|input is too long",
    re.IGNORECASE,
)
_ERROR_MESSAGE_CHARS = 200

#: The base class of every error the openai SDK raises, for callers outside this room to
#: catch and give to :func:`map_openai_error`.
SdkError = openai.OpenAIError

def retry_after_seconds(headers: Any) -> float | None:
    """Read ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date) from ``headers``.

    Returns seconds (never negative), or ``None`` when absent or unreadable.
    """
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's short error message (``error.message`` only: never the whole body)."""
    body = exc.body
    message = ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("code") or "")
        elif isinstance(err, str):
            message = err
    message = " ".join(message.split())
    if len(message) > _ERROR_MESSAGE_CHARS:
        message = message[: _ERROR_MESSAGE_CHARS - 1] + "…"
    return message


def _usage(exc: openai.APIStatusError) -> tuple[int, int]:
    """``(prompt_tokens, completion_tokens)`` of a ``usage`` object in an error response (a
    server that generated before it failed may report them), else ``(0, 0)``."""
    try:
        raw = exc.response.json()
    except (ValueError, AttributeError, TypeError):
        raw = None
    usage = raw.get("usage") if isinstance(raw, dict) else None
    if not isinstance(usage, dict) and isinstance(exc.body, dict):
        usage = exc.body.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    out = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        out.append(value if isinstance(value, int) and value > 0 else 0)
    return out[0], out[1]


def _is_context_length(exc: openai.APIStatusError, message: str) -> bool:
    code = getattr(exc, "code", None)
    if code and "context_length" in str(code):
        return True
    return exc.status_code == 413 or bool(_CONTEXT_LENGTH.search(message))


#: Timeouts that leave the request unsent: no connection (or none free), or the body not
#: written in time (a server never answers half a request).
_NOT_SENT = (httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.WriteTimeout)
#: Connection failures that happen after the request went out, while waiting for the answer.
_DROPPED_AFTER_SENDING = (httpx2.ReadError, httpx2.RemoteProtocolError)


def map_openai_error(exc: BaseException) -> UpstreamError:
    """Translate an openai SDK (or transport) exception into an :class:`UpstreamError`.

    Kinds, by cause: ``timeout`` (client timeout, 408), ``connection`` (connect, DNS, TLS,
    reset), ``rate_limit`` (429), ``server`` (5xx, 409, malformed response), ``auth`` (401,
    403), ``not_found`` (404), ``context_length`` (400/413/422 about the input size),
    ``bad_request`` (other 4xx). ``retryable`` is true for rate_limit, server, timeout and
    connection. ``retry_after_seconds`` is set when the response carried ``Retry-After``.
    ``delivered`` is true when the endpoint may have answered the request: a read timeout
    (a timeout of unknown phase too), a connection dropped after sending (``ReadError``,
    ``RemoteProtocolError``), a 504 and a 200 whose body was malformed.
    The message holds the status and at most 200 characters of the server's error message,
    never the request. A ``usage`` object in the error body sets ``tokens_in`` and
    ``tokens_out``.
    """
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        cause = exc.__cause__ or exc
        return UpstreamError("request timed out", kind="timeout", retryable=True,
                             delivered=not isinstance(cause, _NOT_SENT))
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError | OSError):
        cause = exc.__cause__ or exc
        return UpstreamError(
            f"connection failed: {type(cause).__name__}", kind="connection", retryable=True,
            delivered=isinstance(cause, _DROPPED_AFTER_SENDING),
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _server_message(exc)
        retry_after = retry_after_seconds(exc.response.headers)
        if status == 429:
            kind = "rate_limit"
        elif status == 408:
            kind = "timeout"
        elif status >= 500 or status == 409:
            kind = "server"
        elif status in (401, 403):
            kind = "auth"
        elif status == 404:
            kind = "not_found"
        elif status in (400, 413, 422) and _is_context_length(exc, message):
            kind = "context_length"
        else:
            kind = "bad_request"
        retryable = kind in ("rate_limit", "server", "timeout")
        text = f"HTTP {status} ({kind})" + (f": {message}" if message else "")
        tokens_in, tokens_out = _usage(exc)
        return UpstreamError(
            text, kind=kind, retryable=retryable, status=status, retry_after_seconds=retry_after,
            tokens_in=tokens_in, tokens_out=tokens_out,
            delivered=status == 504,
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return UpstreamError(
            f"malformed response (HTTP {exc.status_code})",
            kind="server",
            retryable=True,
            status=exc.status_code,
            delivered=True,
        )
    return UpstreamError(f"request failed: {type(exc).__name__}", kind="bad_request",
                         retryable=False)
