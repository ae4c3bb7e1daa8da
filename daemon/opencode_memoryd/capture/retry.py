"""Extract a given-up chunk again, on demand (``maintain --retry-failed``).

A chunk is given up after repeated identical failures (see
:mod:`opencode_memoryd.capture.processor`): the rules captured its explicit directives and
the session's mark moved past it. After the cause is fixed (another model, a larger
output cap), :func:`retry_given_up` reads the chunk's turns again from the OpenCode
database, extracts them with the configured extractor (splitting as usual) and stores the
result through the outbox like any other chunk: the result is recorded, and the failure
record dropped, in one state transaction before the store is written, so a crash replays
the result instead of calling the model again. The memories the rules stored for the chunk
stay; the write path merges what the model finds again into them. A retry that fails
again is counted on the failure record, which stays ``given_up``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

import structlog

from opencode_memoryd.capture.chunks import ChunkExtractor, Spent
from opencode_memoryd.capture.failures import failure_fingerprint, failure_reason
from opencode_memoryd.capture.processor import SessionProcessor
from opencode_memoryd.capture.report import SessionReport
from opencode_memoryd.conversation.rows import MessageRow, SessionRow
from opencode_memoryd.conversation.transcript import chunk_turns
from opencode_memoryd.conversation.turns import drop_fork_copies, group_turns
from opencode_memoryd.errors import ExtractionError, UpstreamError
from opencode_memoryd.models import TranscriptLine, iso_utc
from opencode_memoryd.redaction.engine import redacting_also
from opencode_memoryd.source.reader import MESSAGE_BATCH
from opencode_memoryd.source.storages.registry import named
from opencode_memoryd.state.failures import ChunkFailure

log = structlog.get_logger(__name__)

__all__ = ["retry_given_up"]


def _retry_item_id(failure: ChunkFailure) -> str:
    """The outbox id of a retry: a chunk given up again later is retried under a new id."""
    key = f"retry|{failure.id}|{failure.given_up_at or ''}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _chunk_messages(proc: SessionProcessor, failure: ChunkFailure) -> list[MessageRow]:
    """The chunk's messages, read again: those after ``failure.after`` up to its last
    message (by id; in a storage whose positions never change also by position, should
    that row be gone)."""
    after = failure.after.position if failure.after else None
    stable = named(failure.storage).stable_positions
    if after is not None and not stable:
        # positions change when OpenCode projects rows again: look the row up
        after = proc.source.locate(failure.session_id, after[1], failure.storage)
    out: list[MessageRow] = []
    started = failure.after is None or after is not None
    while True:
        batch = proc.source.messages_after(failure.session_id, after, limit=MESSAGE_BATCH,
                                           storage=failure.storage)
        for m in batch:
            if not started:  # the row before the chunk is gone: find the chunk's start
                started = m.id == failure.first[1]
                if not started:
                    continue
            beyond = stable and m.mark > failure.last
            if beyond:
                return out
            out.append(m)
            if m.id == failure.last[1]:
                return out
        if len(batch) < MESSAGE_BATCH:
            return out
        after = batch[-1].mark


def _chunk_lines(proc: SessionProcessor, session: SessionRow, failure: ChunkFailure
                 ) -> tuple[list[TranscriptLine], dict[str, int]]:
    """The chunk's transcript lines (not redacted) and its messages' creation times."""
    messages = drop_fork_copies(_chunk_messages(proc, failure), session.time_created)
    lines: list[TranscriptLine] = []
    for chunk in chunk_turns(group_turns(messages), max_tokens=proc.limits.max_chunk_tokens,
                             tool_output_chars=proc.limits.tool_output_chars):
        lines.extend(chunk.lines)
    return lines, {m.id: m.time_created for m in messages}


def retry_given_up(proc: SessionProcessor, session: SessionRow,
                   failure: ChunkFailure) -> SessionReport:
    """Extract one given-up chunk of ``session`` again with ``proc``'s extractor.

    Returns:
        The retry's :class:`~opencode_memoryd.capture.report.SessionReport`; ``error``
        says why it failed (the failure record then stays ``given_up`` with the new
        reason). A chunk whose turns are gone from the database is settled with nothing
        to store.

    Raises:
        UpstreamError: kind ``auth`` or ``not_found`` when ``proc.raise_fatal``.
    """
    started = time.perf_counter()
    report = SessionReport(session.id, session.project_key, session.project_root,
                           storage=failure.storage)
    now = iso_utc(proc.clock())
    spent = Spent()
    mark = proc.state.marks.get_mark(failure.source_id, session.id)
    if mark is None or mark.storage != failure.storage:
        report.error = ("moved: the session is read from another OpenCode table now; its "
                        "given-up chunk cannot be read again")
        report.error_kind = "moved"
        return report
    try:
        raw, times = _chunk_lines(proc, session, failure)
        redactor = proc.redactor(session.id)
        lines = redactor.redacted(raw, report)
        report.chunks = 1
        report.turns_read = len({x.message_id for x in lines if x.role == "user"})
        try:
            with redacting_also(redactor.secrets.redact_known):  # the answer, its log too
                result = ChunkExtractor(proc.extractor).extract(lines, session.project_root,
                                                                spent)
        except (ExtractionError, UpstreamError) as exc:
            proc.count_spent(spent, report, failed=exc)
            fingerprint = failure_fingerprint(exc)
            if fingerprint is not None:
                proc.state.failures.chunk_failed(replace(failure, fingerprint=fingerprint,
                                                         reason=failure_reason(exc)), now)
            raise
        proc.count_spent(spent, report)
        for reason, _text in result.rejected:
            report.rejected[reason] += 1
        item = proc.item_of(_retry_item_id(failure), session, failure.first, failure.last,
                            failure.storage, result, times, spent)
        proc.state.outbox.record_item(item, now, settles=failure.id)
        proc.apply_item(item, report)
        log.info("chunk_retried", session_id=session.id, added=report.added,
                 candidates=len(result.candidates))
    except UpstreamError as exc:
        report.error = f"{exc.kind}: {exc}"
        report.error_kind = exc.kind
        if exc.kind in ("auth", "not_found") and proc.raise_fatal:
            raise
    except ExtractionError as exc:
        report.error = f"bad_reply: {exc}"
        report.error_kind = "bad_reply"
    finally:
        report.duration_ms = (time.perf_counter() - started) * 1000
    return report

