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
from typing import TYPE_CHECKING

import structlog

from opencode_memoryd.errors import ReplyCutOff, UpstreamError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.state.failures import ChunkFailure, failure_id

if TYPE_CHECKING:
    from opencode_memoryd.capture.processor import SessionProcessor
    from opencode_memoryd.capture.report import SessionReport
    from opencode_memoryd.conversation.rows import SessionRow
    from opencode_memoryd.conversation.transcript import Chunk
    from opencode_memoryd.models import TranscriptLine

log = structlog.get_logger(__name__)

__all__ = ["failure_fingerprint", "failure_kind", "failure_reason", "give_up"]

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


def give_up(proc: SessionProcessor, session: SessionRow, chunk: Chunk, storage: str,
            item_id: str, lines: list[TranscriptLine], exc: Exception,
            report: SessionReport, times: dict[str, int]) -> bool:
    """Count a failure of ``proc``'s chunk; after ``max_identical_failures`` identical
    ones, give the chunk up (rules capture, record, store, move the mark) and return
    ``True``. ``False``: the caller re-raises (the mark stays)."""
    fingerprint = failure_fingerprint(exc)
    threshold = proc.limits.max_identical_failures
    if fingerprint is None or threshold <= 0:
        return False
    src = proc.source.identity
    now = iso_utc(proc.clock())
    stored = proc.writes.marks.get_mark(src, session.id)
    failure = ChunkFailure(
        id=failure_id(src, session.id, storage, chunk.first[1]), source_id=src,
        session_id=session.id, storage=storage,
        after=stored if stored is not None and stored.storage == storage else None,
        first=chunk.first, last=chunk.last, project_key=session.project_key,
        project_root=session.project_root, fingerprint=fingerprint,
        reason=failure_reason(exc))
    failures = proc.state.failures.chunk_failed(failure, now)
    if failures < threshold:
        return False
    rules = proc.rules.extract(lines, project_root=session.project_root)
    item = proc.item_of(item_id, session, chunk.first, chunk.last, storage, rules, times,
                        extractor=proc.rules.name, max_rowid=chunk.rowid or None)
    proc.state.failures.give_up_chunk(failure.id, item, now)
    log.warning("chunk_given_up", session_id=session.id, failures=failures,
                reason=failure.reason, directives=len(rules.candidates),
                detail="captured by the rules; `maintain --retry-failed` extracts it "
                       "again")
    report.given_up += 1
    proc.apply_item(item, report)
    return True
