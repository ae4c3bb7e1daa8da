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
2. build the transcript, strip invisible Unicode and redact it, also each value redacted
   once wherever the session shows it (:mod:`~opencode_memoryd.capture.secrets`), and ask
   the extractor (LLM or rules);
3. **record** the result in the state file (status ``extracted``) before touching the store;
4. write the memories to the store with deterministic point ids and write-time dedup;
5. mark the item ``stored`` and advance the mark, in one state transaction.

Compaction summaries are stored as the turns holding them are read, and once the session
is read to its end, its project brief and its own summary are looked at
(:mod:`opencode_memoryd.capture.notes`).

A crash after 3 replays the recorded result at the next run (no second LLM call); a crash
after 4 rewrites the same points (no duplicate). An extractor error leaves the mark where
it was. :func:`~opencode_memoryd.capture.writer.write_memories` merges a fact the store holds
and retires what a correction supersedes (journaled through ``record``).

A chunk is extracted by :class:`~opencode_memoryd.capture.chunks.ChunkExtractor`, which
splits it on turn boundaries whenever an answer hits a cap, so no fact is dropped for want
of room. A chunk whose extraction fails the same way ``max_identical_failures`` times in a
row (the same refused answer, or the same refused request; never a failure of the endpoint
itself, such as a timeout or a 5xx) is **given up**: its explicit directives are captured by
the rules extractor, the failure is recorded (``chunk_failures``, status ``given_up``) and
the mark moves on, so the session's later turns are not blocked;
:func:`~opencode_memoryd.capture.retry.retry_given_up` extracts it again on demand. The
tokens of failed calls are recorded too (``failed_calls``), for the daily token budget.

**The mark and clocks.** A message stamped in the future, or a clock set back, would sort
every later ``message`` row behind a ``(time_created, id)`` mark for good; so a mark there
also keeps ``max_rowid``, the largest rowid processed (it grows with every insert whatever
the clock says), and a message beyond either is unread. Only one both stamped before the
mark *and* given a reused rowid (a deleted largest rowid, a ``VACUUM``) could be missed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

import structlog

from opencode_memoryd.capture.chunks import ChunkExtractor, Extractor, Spent
from opencode_memoryd.capture.failures import failure_kind, give_up
from opencode_memoryd.capture.marks import max_rowid as rowid_of
from opencode_memoryd.capture.marks import reconcile_mark
from opencode_memoryd.capture.notes import Seen, SessionNotes, Summarizer
from opencode_memoryd.capture.outbox import item_id_of, recorded_candidate
from opencode_memoryd.capture.report import Limits, SessionReport
from opencode_memoryd.capture.secrets import SessionRedactor
from opencode_memoryd.capture.supersede import Record
from opencode_memoryd.capture.writer import write_memories
from opencode_memoryd.conversation.activity import compaction_summaries
from opencode_memoryd.conversation.rows import SessionRow
from opencode_memoryd.conversation.transcript import Chunk, chunk_turns
from opencode_memoryd.conversation.turns import drop_fork_copies, finished_prefix, group_turns
from opencode_memoryd.errors import (
    DiskFullError,
    ExtractionError,
    MemorydError,
    SourceError,
    UpstreamError,
)
from opencode_memoryd.extract.rules import RulesExtractor
from opencode_memoryd.extract.summarize import RulesSummarizer
from opencode_memoryd.models import ExtractionResult, Mark, iso_utc
from opencode_memoryd.redaction.engine import redacting_also, scrub
from opencode_memoryd.source.reader import MESSAGE_BATCH, OpenCodeDB
from opencode_memoryd.source.storages.registry import named
from opencode_memoryd.source.storages.sessions import idle_of
from opencode_memoryd.state.batch import StateBatch
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.state.items import Item
from opencode_memoryd.store.api import MemoryStore

log = structlog.get_logger(__name__)

__all__ = ["Extractor", "Limits", "SessionProcessor", "SessionReport"]

def _now_iso(now: datetime) -> str:
    return iso_utc(now)


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
        user_id: the identity user-scope memories are written for (``Memory.user_id``).
        summarizer: writes session notes and project briefs
            (:mod:`opencode_memoryd.capture.notes`); rules when ``None``.
        ensure_space: raises :class:`DiskFullError` when the state dir or the store has
            too little free space; called before a session's and each chunk's writes (and
            before the LLM is paid for a chunk that could not be stored).
        record: appends a write-time supersession's entry to the dream journal.
        batch: collect the marks, rules results and their completion here instead of
            committing each (the caller flushes the store, then commits the batch). An
            answer that cost LLM tokens is still recorded durably at once, so a crash
            never asks for it again; failures and given-up chunks are written at once.
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
        summarizer: Summarizer | None = None,
        ensure_space: Callable[[], None] = lambda: None,
        batch: StateBatch | None = None,
        record: Record | None = None,
    ) -> None:
        self.raise_fatal, self.record = raise_fatal, record
        self.user_id = user_id
        self.ensure_space = ensure_space
        self.source = source
        self.state = state
        #: where marks and items are read and written: the batch, or the state file
        self.writes: StateDB | StateBatch = batch if batch is not None else state
        self.store = store
        self.extractor = extractor
        self.limits = limits
        self.clock = clock
        self.rules = RulesExtractor(max_chars=limits.max_memory_chars)
        self.chunks = ChunkExtractor(extractor, floor=self.rules)
        self.notes = SessionNotes(source, self.writes, store, summarizer or RulesSummarizer(),
                                  limits.notes, tool_output_chars=limits.tool_output_chars)
        self._redactor: SessionRedactor | None = None

    def apply_item(self, item: Item, report: SessionReport) -> None:
        """Write a recorded item's memories to the store, then mark it stored and move the
        session's mark past it (one state transaction)."""
        self._apply(item, report)

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
            user_id=self.user_id, state=self.state, record=self.record)
        self.writes.outbox.complete_item(item, _now_iso(now))
        report.added += added
        report.skipped.update(skipped)

    def process(self, session: SessionRow, *,
                ends: Mapping[str, Mark] | None = None) -> SessionReport:
        """Process every finished, unread turn of one session up to now.

        ``ends``: the newest row of each session, as
        :meth:`~opencode_memoryd.source.reader.OpenCodeDB.last_messages` read it for
        many sessions at once just before (a session left out has no row); ``None``: it is
        looked up. "Now" is then the moment of that look-up.

        Returns the session's report. Extractor failures (:class:`UpstreamError`,
        :class:`ExtractionError`), :class:`SourceError` and :class:`DiskFullError` end this
        session's run, leave its mark where it was and are reported in ``error`` (redacted);
        ``auth``/``not_found`` and a full disk are re-raised when ``raise_fatal``, since
        every other session would fail too. Any other exception but a
        :class:`MemorydError` or :class:`OSError` (a store or state failure, which every
        session would share) is this session's alone: logged with its traceback and
        reported as ``internal``. Undecodable rows are counted (``corrupt_rows``).
        """
        started = time.perf_counter()
        src = self.source.identity
        report = SessionReport(session.id, session.project_key, session.project_root)
        try:
            self.ensure_space()
            # 1. finish what a previous run recorded but did not store (crash recovery)
            for item in self.writes.outbox.pending_items(src, session.id):
                self._apply(item, report)
                report.replayed_items += 1
            # "Up to now": a session OpenCode keeps writing to faster than it is read must
            # not hold this run forever; what comes after its newest row of now waits for
            # the next run. Its note compares its mark with that same row.
            if ends is None:
                ends = self.source.last_messages([session.id])
            end = ends.get(session.id)
            with redacting_also(self.redactor(session.id).secrets.redact_known):
                seen = self._process_new(session, report, end)
                self.notes.after_session(session, report, now=self.clock(), seen=seen,
                                         end=end)
        except UpstreamError as exc:
            report.error = scrub(f"{exc.kind}: {exc}").text
            report.error_kind = exc.kind
            report.retry_after_seconds = exc.retry_after_seconds
            report.unreachable = exc.kind == "connection" and not exc.delivered
            if exc.kind in ("auth", "not_found") and self.raise_fatal:
                raise
        except (ExtractionError, SourceError, DiskFullError) as exc:
            kind = ("bad_reply" if isinstance(exc, ExtractionError) else
                    "disk_full" if isinstance(exc, DiskFullError) else "source")
            report.error, report.error_kind = scrub(f"{kind}: {exc}").text, kind
            if kind == "disk_full" and self.raise_fatal:
                raise
        except (MemorydError, OSError):
            raise  # the store or the state file: every session would fail the same way
        except Exception as exc:  # a row or a bug nothing foresaw: this session alone
            log.exception("session_crashed", session_id=session.id)
            report.error = scrub(f"internal: {type(exc).__name__}: {exc}").text
            report.error_kind = "internal"
        finally:
            report.duration_ms = (time.perf_counter() - started) * 1000
            log.info("session_processed", **report.as_dict())
            self._redactor = None  # the text it holds: read again only by the next run
        return report

    def _process_new(self, session: SessionRow, report: SessionReport,
                     end: Mark | None) -> Seen | None:
        """Read and extract the session's finished turns after its mark, up to ``end``
        (its newest row, ``None``: it has none); return what was read when that was the
        whole session (its newest row and every message), so the session's note does not
        read it again."""
        src = self.source.identity
        if end is None:
            return None
        storage = report.storage = end.storage
        reconcile_mark(self.source, self.writes, session, storage, self.clock)
        idle = idle_of(session)
        keeps_rowid = named(storage).keeps_rowid
        while True:
            stored = self.writes.marks.get_mark(src, session.id)
            mark = stored.position if stored is not None and stored.storage == storage else None
            max_rowid = rowid_of(self.source, self.writes, session, storage, mark, self.clock)
            messages = self.source.messages_after(session.id, mark, limit=MESSAGE_BATCH,
                                                  storage=storage, max_rowid=max_rowid)
            if not messages:
                return None
            report.corrupt_rows.update(
                [m.id for m in messages if m.corrupt]
                + [p.id for m in messages for p in m.parts if p.corrupt])
            full_batch = len(messages) >= MESSAGE_BATCH
            more = full_batch and messages[-1].mark < end.position
            # the whole session in one read: its note may use it
            seen = (Seen(end, messages) if mark is None and not full_batch
                    and messages[-1].mark == end.position else None)
            real = drop_fork_copies(messages, session.time_created)
            self.redactor(session.id).learn_copies(messages, real, self.limits.tool_output_chars)
            top = (max([max_rowid or 0, *(m.rowid for m in messages)])
                   if keeps_rowid else None)
            if not real:  # a batch of fork copies only: nothing to read, move past them
                self.writes.marks.set_mark(src, session.id, Mark(storage, messages[-1].mark),
                                           _now_iso(self.clock()), top)
                if not more:
                    return seen
                continue
            turns = group_turns(real)
            now_ms = int(self.clock().timestamp() * 1000)
            done = finished_prefix(turns, now_ms=now_ms, abandoned_ms=self.limits.abandoned_ms,
                                   settle_ms=self.limits.settle_ms, idle=idle,
                                   unconfirmed_ms=self.limits.unconfirmed_ms)
            report.waiting = len(done) < len(turns)
            if full_batch and len(turns) > 1 and len(done) == len(turns):
                done = done[:-1]  # the batch may have cut the last turn short
            if not done:
                return seen  # wait for the turn in flight to finish
            report.turns_read += len(done)
            # Fork copies precede the session's own messages, so the first chunk's mark
            # moves past them too. Every line is scanned for secrets before any is used.
            chunks = chunk_turns(done, max_tokens=self.limits.max_chunk_tokens,
                                 tool_output_chars=self.limits.tool_output_chars)
            read = [m for t in done for m in t.messages]
            self.redactor(session.id).prepare((line for c in chunks for line in c.lines),
                                              (text for _, text in compaction_summaries(read)))
            report.summaries += self.notes.compactions(session, read, storage)
            times = {m.id: m.time_created for m in real}
            for chunk in chunks:
                chunk = replace(chunk, rowid=max(chunk.rowid, max_rowid or 0))
                self._process_chunk(session, chunk, report, times, storage)
            if not more:
                return seen

    def _process_chunk(self, session: SessionRow, chunk: Chunk, report: SessionReport,
                       times: dict[str, int], storage: str) -> None:
        src = self.source.identity
        report.chunks += 1
        now = self.clock()
        rowid = chunk.rowid or None  # 0: not a ``message`` chunk
        if not chunk.has_user_text:
            self.writes.marks.set_mark(src, session.id, Mark(storage, chunk.last), _now_iso(now),
                                       rowid)
            return
        item_id = item_id_of(src, session.id, chunk, storage)
        known = self._get_item(item_id, session.id)
        if known is not None:  # the same turns, read again after a reset: no second call
            report.replayed_items += 1
            self._apply(replace(known, first=chunk.first, last=chunk.last, storage=storage,
                                result={**known.result, "max_rowid": rowid}), report)
            return
        self.ensure_space()
        lines = self.redactor(session.id).redacted(chunk.lines, report)
        spent = Spent()
        try:
            result = self.chunks.extract(lines, session.project_root, spent)
        except (ExtractionError, UpstreamError) as exc:
            self.count_spent(spent, report, failed=exc)
            if not give_up(self, session, chunk, storage, item_id, lines, exc, report, times):
                raise
            return
        self.count_spent(spent, report)
        for reason, _text in result.rejected:
            report.rejected[reason] += 1
        item = self.item_of(item_id, session, chunk.first, chunk.last, storage, result, times,
                            spent, max_rowid=rowid)
        if spent.calls:  # tokens paid: durable before anything else happens
            self.state.outbox.record_item(item, _now_iso(self.clock()))
        else:  # the rules answered: free to ask again, so it may wait for the batch
            self.writes.outbox.record_item(item, _now_iso(self.clock()))
        _fault_point("after_record")
        self._apply(item, report)

    def _get_item(self, item_id: str, session_id: str) -> Item | None:
        if isinstance(self.writes, StateBatch):  # it may know the session holds none
            return self.writes.get_item(item_id, (self.source.identity, session_id))
        return self.writes.outbox.get_item(item_id)

    def prefetch(self, session_ids: Sequence[str]) -> None:
        """Read the state of these sessions (marks, outbox items) at once, when writing
        to a batch (:meth:`~opencode_memoryd.state.batch.StateBatch.prefetch`); the
        caller works them next."""
        if isinstance(self.writes, StateBatch):
            self.writes.prefetch(self.source.identity, session_ids)

    def redactor(self, session_id: str) -> SessionRedactor:
        """The :class:`SessionRedactor` of a session (redacts its transcript lines; the
        last one is kept)."""
        if self._redactor is None or self._redactor.session_id != session_id:
            self._redactor = SessionRedactor(self.state, self.source.identity, session_id,
                                             lambda: _now_iso(self.clock()))
        return self._redactor

    def count_spent(self, spent: Spent, report: SessionReport, *,
                    failed: BaseException | None = None) -> None:
        """Add a chunk's calls and tokens to ``report``; when the chunk ``failed``, record
        its tokens in the state file (``failed_calls``) for the daily token budget."""
        report.llm_calls += spent.calls
        report.tokens_in += spent.tokens_in
        report.tokens_out += spent.tokens_out
        if failed is not None:
            self.state.failures.record_failed_call(failure_kind(failed), spent.tokens_in,
                                                   spent.tokens_out, _now_iso(self.clock()))

    def item_of(self, item_id: str, session: SessionRow, first: tuple[int, str],
                last: tuple[int, str], storage: str, result: ExtractionResult,
                times: dict[str, int], spent: Spent | None = None, *,
                extractor: str | None = None, max_rowid: int | None = None) -> Item:
        """The outbox item of an extraction ``result`` (memory texts redacted again); its
        mark is ``last`` and, in ``message``, ``max_rowid``."""
        return Item(
            id=item_id, source_id=self.source.identity, session_id=session.id, first=first,
            last=last, project_key=session.project_key,
            project_root=session.project_root, status="extracted",
            extractor=extractor or self.extractor.name, model=result.model,
            result={
                "candidates": [recorded_candidate(c) for c in result.candidates],
                "message_times": {m: times[m] for c in result.candidates
                                  for m in c.message_ids if m in times},
                "max_rowid": max_rowid,
            },
            tokens_in=spent.tokens_in if spent else 0,
            tokens_out=spent.tokens_out if spent else 0, storage=storage,
        )


def _fault_point(name: str) -> None:
    """Die here, as by ``kill -9``, when ``OPENCODE_MEMORYD_FAULT`` names this point.

    Used by the crash tests; no cleanup runs, exactly as with a real SIGKILL.
    """
    if os.environ.get("OPENCODE_MEMORYD_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
