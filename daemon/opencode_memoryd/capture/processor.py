"""Process one session: read after the mark, redact, extract, store, advance the mark.

Per chunk of finished turns, in the manner of a transactional outbox (the result is
recorded in our own state file before any side effect, and every later step is replayable
and idempotent):

1. read the messages after the session's high-water mark and keep the finished turns;
2. build the transcript, redact it, and ask the extractor (LLM or rules);
3. **record** the result in the state file (status ``extracted``) before touching the store;
4. write the memories to the store with deterministic point ids and write-time dedup;
5. mark the item ``stored`` and advance the mark, in one state transaction.

A crash after 3 replays the recorded result at the next run (no second LLM call); a crash
after 4 rewrites the same points (no duplicate). An extractor error leaves the mark where
it was. Memories are written with :func:`~opencode_memoryd.capture.writer.write_memories`,
which merges provenance into an existing point instead of adding a second one for the same
(or a near-identical) fact.

**The high-water mark and clocks.** OpenCode stamps ``time_created`` with the writer's
clock, which can be wrong: a message stamped in the future, or a clock set back after
messages were stamped ahead of it. Reading only what sorts after the last processed
``(time_created, id)`` would then skip every message written later with a smaller time,
for good. So the mark has two parts that each only grow: the largest ``(time_created,
id)`` processed, and ``seq``, the largest SQLite ``rowid`` processed (a rowid grows with
every insert whatever the clock says). A message is unread when it is beyond either one:
a message stamped with any time, past or future, is read once, in ``(time_created, id)``
order with the others. (A mark from before ``seq`` existed stands for the rowids of the
messages up to it, :meth:`~opencode_memoryd.source.reader.OpenCodeDB.seq_through`.) Only a
message both stamped before the mark *and* given a reused rowid (SQLite reuses the largest
rowid after it was deleted, and ``VACUUM`` renumbers) could be missed.
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
from opencode_memoryd.errors import DiskFullError, ExtractionError, SourceError, UpstreamError
from opencode_memoryd.models import ExtractionResult, TranscriptLine, iso_utc
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.source.reader import MESSAGE_BATCH, OpenCodeDB
from opencode_memoryd.source.rows import SessionRow
from opencode_memoryd.source.transcript import Chunk, chunk_turns
from opencode_memoryd.source.turns import drop_fork_copies, finished_prefix, group_turns
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
    #: ids of the message and part rows that could not be decoded (skipped)
    corrupt_rows: set[str] = field(default_factory=set)
    error: str | None = None
    error_kind: str | None = None
    retry_after_seconds: float | None = None
    duration_ms: float = 0.0

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
            "corrupt_rows": len(self.corrupt_rows),
            "error": self.error,
            "duration_ms": round(self.duration_ms, 1),
        }


def _now_iso(now: datetime) -> str:
    return iso_utc(now)


def _item_id(source_id: str, session_id: str, chunk: Chunk) -> str:
    key = f"{ITEM_FORMAT}|{source_id}|{session_id}|{chunk.first}|{chunk.last}"
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
        raise_fatal: re-raise ``auth``/``not_found`` upstream errors and
            :class:`DiskFullError` (every other session would fail the same way); the
            daemon sets it to ``False`` and pauses or retries instead.
        ensure_space: raises :class:`DiskFullError` when the state dir or the store has
            too little free space; called before a session's and each chunk's writes (and
            before the LLM is paid for a chunk that could not be stored).
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
        ensure_space: Callable[[], None] = lambda: None,
    ) -> None:
        self.raise_fatal = raise_fatal
        self.ensure_space = ensure_space
        self.source = source
        self.state = state
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
        )
        self.state.complete_item(item, _now_iso(now))
        report.added += added
        report.skipped.update(skipped)

    def process(self, session: SessionRow) -> SessionReport:
        """Process every finished, unread turn of one session up to now.

        Returns the session's report. Extractor failures (:class:`UpstreamError`,
        :class:`ExtractionError`) and failures to read the session
        (:class:`SourceError`) are caught: they end this session's run, leave its mark
        where it was and are reported in ``error`` (redacted: an error can quote a row);
        :class:`UpstreamError` with kind ``auth`` or ``not_found`` is re-raised, since
        every other session would fail too. Rows that cannot be decoded are skipped and
        counted (``corrupt_rows``).
        """
        started = time.perf_counter()
        src = self.source.identity
        report = SessionReport(session.id, session.project_key, session.project_root)
        try:
            self.ensure_space()
            # 1. finish what a previous run recorded but did not store (crash recovery)
            for item in self.state.pending_items(src, session.id):
                self._apply(item, report)
                report.replayed_items += 1
            self._process_new(session, report)
        except UpstreamError as exc:
            report.error = redact(f"{exc.kind}: {exc}").text
            report.error_kind = exc.kind
            report.retry_after_seconds = exc.retry_after_seconds
            if exc.kind in ("auth", "not_found") and self.raise_fatal:
                raise
        except ExtractionError as exc:
            report.error = redact(f"bad_reply: {exc}").text
            report.error_kind = "bad_reply"
        except SourceError as exc:
            report.error = redact(f"source: {exc}").text
            report.error_kind = "source"
        except DiskFullError as exc:  # nothing of the chunk was stored; the mark stays
            report.error = redact(f"disk_full: {exc}").text
            report.error_kind = "disk_full"
            if self.raise_fatal:
                raise
        finally:
            report.duration_ms = (time.perf_counter() - started) * 1000
            log.info("session_processed", **report.as_dict())
        return report

    def _process_new(self, session: SessionRow, report: SessionReport) -> None:
        src = self.source.identity
        # "Up to now": a session OpenCode keeps writing to faster than it is read must not
        # hold this run forever; what comes after the newest message of now waits for the
        # next run.
        end = self.source.last_messages([session.id]).get(session.id)
        if end is None:
            return
        while True:
            mark, seq = self.state.get_position(src, session.id)
            if mark is not None and seq is None:  # a mark from before seq: record its seq
                seq = self.source.seq_through(session.id, mark)
                self.state.set_mark(src, session.id, mark, _now_iso(self.clock()), seq)
            messages = self.source.messages_after(session.id, mark, seq=seq,
                                                  limit=MESSAGE_BATCH)
            if not messages:
                return
            report.corrupt_rows.update(m.id for m in messages if m.corrupt)
            report.corrupt_rows.update(p.id for m in messages for p in m.parts if p.corrupt)
            full_batch = len(messages) >= MESSAGE_BATCH
            more = full_batch and messages[-1].mark < end
            real = drop_fork_copies(messages, session.time_created)
            top = max([seq or 0, *(m.seq for m in messages)])
            if not real:  # a batch of fork copies only: nothing to read, move past them
                self.state.set_mark(src, session.id, messages[-1].mark, _now_iso(self.clock()),
                                    top)
                if not more:
                    return
                continue
            turns = group_turns(real)
            now_ms = int(self.clock().timestamp() * 1000)
            done = finished_prefix(turns, now_ms=now_ms, abandoned_ms=self.limits.abandoned_ms,
                                   settle_ms=self.limits.settle_ms)
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
                self._process_chunk(session, replace(chunk, seq=max(chunk.seq, seq or 0)),
                                    report, times)
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
                       times: dict[str, int]) -> None:
        src = self.source.identity
        report.chunks += 1
        now = self.clock()
        if not chunk.has_user_text:
            self.state.set_mark(src, session.id, chunk.last, _now_iso(now), chunk.seq)
            return
        self.ensure_space()
        lines: list[TranscriptLine] = []
        for line in chunk.lines:
            r = redact(line.text)
            report.redactions.update(r.counts)
            lines.append(TranscriptLine(line.message_id, line.role, r.text))
        item_id = _item_id(src, session.id, chunk)
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
                "seq": chunk.seq,
            },
            tokens_in=result.tokens_in, tokens_out=result.tokens_out,
        )
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
