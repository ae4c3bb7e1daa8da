"""Which failures of a chunk count towards giving it up, and when two are the same.

A chunk is given up after ``max_identical_failures`` identical failures in a row
(:class:`~opencode_memoryd.capture.processor.SessionProcessor`). Only failures that say
something about the chunk count: an answer that could not be used (not JSON, the wrong
shape, cut off at the token cap for a single turn) or a request the endpoint refused
(``bad_request``). A failure of the endpoint itself (rate limit, 5xx, timeout, connection,
auth, unknown model) never does: the same chunk may succeed once the endpoint is back.
"""

from __future__ import annotations

import hashlib
import re

from opencode_memoryd.errors import ReplyCutOff, UpstreamError

__all__ = ["failure_fingerprint", "failure_kind", "failure_reason"]

#: Failure kinds of the endpoint that never count towards giving a chunk up: they say
#: nothing about the chunk.
_TRANSIENT = frozenset({"rate_limit", "server", "timeout", "connection", "auth", "not_found"})


def failure_kind(exc: BaseException) -> str:
    """A failure's kind: the endpoint's (``UpstreamError.kind``), ``cut_off`` or
    ``bad_reply``."""
    if isinstance(exc, UpstreamError):
        return exc.kind
    return "cut_off" if isinstance(exc, ReplyCutOff) else "bad_reply"


def failure_reason(exc: BaseException) -> str:
    """A failure as one line: its kind and message."""
    return f"{failure_kind(exc)}: {exc}"


_DIGITS = re.compile(r"\d+")


def failure_fingerprint(exc: BaseException) -> str | None:
    """What makes two failures of a chunk the same: the kind and the message with its
    numbers masked (a refused answer, byte for byte the same or not, that fails the same
    check; the same refused request). ``None`` for failures of the endpoint itself (see
    ``_TRANSIENT``), which never count towards giving a chunk up."""
    kind = failure_kind(exc)
    if kind in _TRANSIENT:
        return None
    key = f"{kind}|{_DIGITS.sub('#', str(exc))}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]
