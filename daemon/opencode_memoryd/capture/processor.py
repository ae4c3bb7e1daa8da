"""Process one session: read after the mark, redact, extract, store, advance the mark.

Per chunk of finished turns, in the manner of a transactional outbox (the result is
recorded in our own state file before any side effect, and every later step is replayable
and idempotent):

1. read the messages after the session's high-water mark and keep the finished turns (from
   the storage the session is read from: ``session_message`` when it has rows there, else
   ``message``/``part``; a mark whose row moved is carried over by message id, and a mark
   whose row vanished from ``session_message`` (an OpenCode migration wiped the table)
   means re-reading the session from its start, which stores nothing twice: an item
   already recorded for the same turns is reused, and the store merges a fact it holds);
2. build the transcript, redact it, and ask the extractor (LLM or rules);
3. **record** the result in the state file (status ``extracted``) before touching the store;
4. write the memories to the store with deterministic point ids and write-time dedup;
5. mark the item ``stored`` and advance the mark, in one state transaction.

A crash after 3 replays the recorded result at the next run (no second LLM call); a crash
after 4 rewrites the same points (no duplicate). An extractor error leaves the mark where
it was. Memories are written with :func:`~opencode_memoryd.capture.writer.write_memories`,
which merges provenance into an existing point instead of adding a second one for the same
(or a near-identical) fact.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from opencode_memoryd.capture.writer import write_memories
from opencode_memoryd.errors import ExtractionError, UpstreamError
from opencode_memoryd.models import (
    STORAGE_MESSAGE,
    ExtractionResult,
    Mark,
    TranscriptLine,
    iso_utc,
)
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.source.reader import MESSAGE_BATCH, OpenCodeDB
from opencode_memoryd.source.rows import SessionRow
from opencode_memoryd.source.transcript import Chunk, chunk_turns
from opencode_memoryd.source.turns import Idle, drop_fork_copies, finished_prefix, group_turns
from opencode_memoryd.state.batch import StateBatch
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.state.items import Item
from opencode_memoryd.store.api import MemoryStore

log = structlog.get_logger(__name__)

#: Bumped when the transcript or prompt format changes, so old cached items are not reused.
ITEM_FORMAT = "1"


class Extractor(Protocol):
    """Anything that turns transcript lines into memory candidates."""

    name: str

    def extract(
        self, lines: Sequence[TranscriptLine], *, project_root: str | None = None
    ) -> ExtractionResult:
        """Return the accepted candidates; raise UpstreamError or ExtractionError."""
        ...


@dataclass(frozen=True, slots=True)
class Limits:
    """Reader and chunking settings, from ``[opencode]`` and ``[extraction]``."""

    abandoned_ms: int = 1_800_000
    settle_ms: int = 2_000
    max_chunk_tokens: int = 6000
    tool_output_chars: int = 160
    near_duplicate_similarity: float = 0.85


@dataclass(slots=True)
class SessionReport:
    """What processing one session did (counts only: never transcript text)."""

    session_id: str
    project_key: str
    project_root: str
    title_chars: int = 0
    turns_read: int = 0
    chunks: int = 0
    llm_calls: int = 0
    added: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    tokens_in: int = 0
    tokens_out: int = 0
    replayed_items: int = 0
    #: candidates written to the store (new or merged into a memory it holds)
    store_writes: int = 0
    error: str | None = None
    error_kind: str | None = None
    retry_after_seconds: float | None = None
    duration_ms: float = 0.0
    #: the table the session's turns were read from
    storage: str = STORAGE_MESSAGE
    #: a turn after the mark is not finished yet (the daemon looks again for v2 sessions,
    #: whose last writes are in-place updates it may not see)
    waiting: bool = False

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (the log event and ``maintain --json`` row)."""
        return {
            "session_id": self.session_id,
            "project": self.project_key,
            "project_root": self.project_root,
            "turns_read": self.turns_read,
            "chunks": self.chunks,
            "llm_calls": self.llm_calls,
            "added": self.added,
            "skipped": dict(self.skipped),
            "rejected": dict(self.rejected),
            "redactions": dict(self.redactions),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "replayed_items": self.replayed_items,
            "error": self.error,
            "storage": self.storage,
            "duration_ms": round(self.duration_ms, 1),
        }


def _now_iso(now: datetime) -> str:
    return iso_utc(now)


def _item_id(source_id: str, session_id: str, chunk: Chunk, storage: str) -> str:
    """The outbox id of a chunk: its positions in ``message``; in ``session_message`` its
    first and last row ids only (``seq`` values change when OpenCode re-projects rows)."""
    if storage == STORAGE_MESSAGE:
        key = f"{ITEM_FORMAT}|{source_id}|{session_id}|{chunk.first}|{chunk.last}"
    else:
        key = (f"{ITEM_FORMAT}|{source_id}|{session_id}|{storage}|{chunk.first[1]}|"
               f"{chunk.last[1]}")
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class SessionProcessor:
    """Runs the pipeline for sessions of one source database.

    Args:
        source: the open OpenCode database.
        state: our state file.
        store: the memory store.
        extractor: the LLM or rules extractor.
        limits: reader and chunking settings.
        clock: returns the current aware UTC time (injectable for tests).
        raise_fatal: re-raise ``auth``/``not_found`` upstream errors (every other session
            would fail the same way); the daemon sets it to ``False`` and pauses instead.
        user_id: the identity user-scope memories are written for (``Memory.user_id``).
        batch: collect the state writes here instead of committing each (the caller
            flushes the store, then commits the batch). An answer that cost LLM tokens is
            still recorded durably at once, so a crash never asks for it again.
    """

    def __init__(
        self,
        source: OpenCodeDB,
        state: StateDB,
        store: MemoryStore,
        extractor: Extractor,
        limits: Limits,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        raise_fatal: bool = True,
        user_id: str | None = None,
        batch: StateBatch | None = None,
    ) -> None:
        self.raise_fatal = raise_fatal
        self.user_id = user_id
        self.source = source
        self.state = state
        #: where marks and items are read and written: the batch, or the state file
        self.writes: StateDB | StateBatch = batch if batch is not None else state
        self.store = store
        self.extractor = extractor
        self.limits = limits
        self.clock = clock

    def _apply(self, item: Item, report: SessionReport) -> None:
        now = self.clock()
        added, skipped = write_memories(
            self.store,
            item.result.get("candidates", []),
            session_id=item.session_id,
            project_key=item.project_key,
            project_root=item.project_root,
            message_times=item.result.get("message_times", {}),
            now=now,
            near_duplicate_similarity=self.limits.near_duplicate_similarity,
            user_id=self.user_id,
        )
        self.writes.complete_item(item, _now_iso(now))
        report.added += added
        report.skipped.update(skipped)
        report.store_writes += len(item.result.get("candidates", []))

    def process(self, session: SessionRow) -> SessionReport:
        """Process every finished, unread turn of one session up to now.

        Returns the session's report. Extractor failures (:class:`UpstreamError`,
        :class:`ExtractionError`) are caught: they end this session's run, leave its mark
        where it was and are reported in ``error``; :class:`UpstreamError` with kind
        ``auth`` or ``not_found`` is re-raised, since every other session would fail too.
        """
        started = time.perf_counter()
        src = self.source.identity
        report = SessionReport(session.id, session.project_key, session.project_root)
        try:
            # 1. finish what a previous run recorded but did not store (crash recovery)
            for item in self.writes.pending_items(src, session.id):
                self._apply(item, report)
                report.replayed_items += 1
            self._process_new(session, report)
        except UpstreamError as exc:
            report.error = f"{exc.kind}: {exc}"
            report.error_kind = exc.kind
            report.retry_after_seconds = exc.retry_after_seconds
            if exc.kind in ("auth", "not_found") and self.raise_fatal:
                raise
        except ExtractionError as exc:
            report.error = f"bad_reply: {exc}"
            report.error_kind = "bad_reply"
        finally:
            report.duration_ms = (time.perf_counter() - started) * 1000
            log.info("session_processed", **report.as_dict())
        return report

    def _reconcile_mark(self, session: SessionRow, storage: str) -> None:
        """Make the stored mark a position in ``storage``, or drop it.

        A 1.x mark stays as it is (a reverted message may vanish; reading goes on after its
        position). A mark in ``session_message``, or in another storage than the one the
        session is read from now, is looked up by message id: found elsewhere, it moves
        there; not found (the rows were wiped, or the session changed storage without
        carrying the row over), the session is read again from its start.
        """
        src = self.source.identity
        stored = self.writes.get_mark(src, session.id)
        if stored is None or stored.storage == storage == STORAGE_MESSAGE:
            return
        found = self.source.locate(session.id, stored.position[1], storage)
        if stored.storage == storage and found == stored.position:
            return
        now = _now_iso(self.clock())
        if found is not None:
            log.info("mark_moved", session_id=session.id, storage=storage,
                     previous_storage=stored.storage)
            self.writes.replace_mark(src, session.id, Mark(storage, found), now)
            return
        log.warning("session_rows_reset", session_id=session.id, storage=storage,
                    previous_storage=stored.storage,
                    detail="the last row read is gone: reading the session again from its "
                           "start (nothing already stored is stored twice)")
        self.writes.replace_mark(src, session.id, None, now)

    def _process_new(self, session: SessionRow, report: SessionReport) -> None:
        src = self.source.identity
        # "Up to now": a session OpenCode keeps writing to faster than it is read must not
        # hold this run forever; what comes after the newest message of now waits for the
        # next run.
        end = self.source.last_messages([session.id]).get(session.id)
        if end is None:
            return
        storage = report.storage = end.storage
        self._reconcile_mark(session, storage)
        idle = (Idle(session.time_idle, session.time_suspended)
                if session.table == "session_v2" else None)
        while True:
            stored = self.writes.get_mark(src, session.id)
            mark = stored.position if stored is not None and stored.storage == storage else None
            messages = self.source.messages_after(session.id, mark, limit=MESSAGE_BATCH,
                                                  storage=storage)
            if not messages:
                return
            full_batch = len(messages) >= MESSAGE_BATCH
            more = full_batch and messages[-1].mark < end.position
            real = drop_fork_copies(messages, session.time_created)
            if not real:  # a batch of fork copies only: nothing to read, move past them
                self.writes.set_mark(src, session.id, Mark(storage, messages[-1].mark),
                                    _now_iso(self.clock()))
                if not more:
                    return
                continue
            turns = group_turns(real)
            now_ms = int(self.clock().timestamp() * 1000)
            done = finished_prefix(turns, now_ms=now_ms, abandoned_ms=self.limits.abandoned_ms,
                                   settle_ms=self.limits.settle_ms, idle=idle)
            report.waiting = len(done) < len(turns)
            if full_batch and len(turns) > 1 and len(done) == len(turns):
                done = done[:-1]  # the batch may have cut the last turn short
            if not done:
                return  # wait for the turn in flight to finish
            report.turns_read += len(done)
            times = {m.id: m.time_created for m in real}
            # Fork copies precede the session's own messages, so the first chunk's mark
            # moves past them too.
            for chunk in chunk_turns(done, max_tokens=self.limits.max_chunk_tokens,
                                     tool_output_chars=self.limits.tool_output_chars):
                self._process_chunk(session, chunk, report, times, storage)
            if not more:
                return

    def _extract(self, lines: list[TranscriptLine], project_root: str | None,
                 report: SessionReport) -> ExtractionResult:
        """Call the extractor; on a context-length error, split the lines and retry.

        A single line that is still too long is parked: it yields no memory, and the
        reason is counted in the report (``rejected["context_length"]``), so one huge turn
        never blocks the session's mark.
        """
        if self.extractor.name != "rules":
            report.llm_calls += 1
        try:
            return self.extractor.extract(lines, project_root=project_root)
        except UpstreamError as exc:
            if exc.kind != "context_length":
                raise
            if len(lines) <= 1 or not any(x.role == "user" for x in lines):
                log.warning("chunk_parked", reason="context_length", lines=len(lines))
                return ExtractionResult(candidates=(), model="none",
                                        rejected=(("context_length", ""),))
            half = len(lines) // 2
            log.info("chunk_split", reason="context_length", lines=len(lines))
            return _merge(self._extract(lines[:half], project_root, report),
                          self._extract(lines[half:], project_root, report))

    def _process_chunk(self, session: SessionRow, chunk: Chunk, report: SessionReport,
                       times: dict[str, int], storage: str) -> None:
        src = self.source.identity
        report.chunks += 1
        now = self.clock()
        if not chunk.has_user_text:
            self.writes.set_mark(src, session.id, Mark(storage, chunk.last), _now_iso(now))
            return
        item_id = _item_id(src, session.id, chunk, storage)
        known = self.writes.get_item(item_id)
        if known is not None:  # the same turns, read again after a reset: no second call
            report.replayed_items += 1
            self._apply(replace(known, first=chunk.first, last=chunk.last, storage=storage),
                        report)
            return
        lines: list[TranscriptLine] = []
        for line in chunk.lines:
            r = redact(line.text)
            report.redactions.update(r.counts)
            lines.append(TranscriptLine(line.message_id, line.role, r.text))
        result = self._extract(lines, session.project_root, report)
        report.tokens_in += result.tokens_in
        report.tokens_out += result.tokens_out
        for reason, _text in result.rejected:
            report.rejected[reason] += 1
        item = Item(
            id=item_id, source_id=src, session_id=session.id, first=chunk.first,
            last=chunk.last, project_key=session.project_key,
            project_root=session.project_root, status="extracted",
            extractor=self.extractor.name, model=result.model,
            result={
                "candidates": [
                    {"content": redact(c.content).text, "type": c.type, "scope": c.scope,
                     "message_ids": list(c.message_ids), "source": c.source}
                    for c in result.candidates
                ],
                "message_times": {m: times[m] for c in result.candidates
                                  for m in c.message_ids if m in times},
            },
            tokens_in=result.tokens_in, tokens_out=result.tokens_out, storage=storage,
        )
        if self.extractor.name == "rules":  # free to ask again: may wait for the batch
            self.writes.record_item(item, _now_iso(self.clock()))
        else:  # cost tokens: durable before anything else happens
            self.state.record_item(item, _now_iso(self.clock()))
        _fault_point("after_record")
        self._apply(item, report)


def _merge(a: ExtractionResult, b: ExtractionResult) -> ExtractionResult:
    return ExtractionResult(candidates=a.candidates + b.candidates,
                            tokens_in=a.tokens_in + b.tokens_in,
                            tokens_out=a.tokens_out + b.tokens_out,
                            model=b.model or a.model, rejected=a.rejected + b.rejected)


def _fault_point(name: str) -> None:
    """Die here, as by ``kill -9``, when ``OPENCODE_MEMORYD_FAULT`` names this point.

    Used by the crash tests; no cleanup runs, exactly as with a real SIGKILL.
    """
    if os.environ.get("OPENCODE_MEMORYD_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
