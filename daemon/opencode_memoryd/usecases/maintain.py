"""``maintain``: process every eligible session of a folder's project (or all) up to now."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.conversation.rows import SessionRow
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import MemorydError, UpstreamError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.ports import AppPort

if TYPE_CHECKING:
    # imported where used: the daemon serves commands before it loads the capture code
    from opencode_memoryd.capture.notes import Summarizer
    from opencode_memoryd.capture.processor import Extractor, SessionProcessor
    from opencode_memoryd.capture.report import SessionReport
    from opencode_memoryd.capture.runner import Step
    from opencode_memoryd.source.reader import OpenCodeDB

log = structlog.get_logger(__name__)

#: How long (s) ``maintain`` gathers the writes of sessions before committing them (a crash
#: loses at most this much progress: those turns are read again).
MAINTAIN_GROUP_SECONDS = 2.0

#: Sessions whose reads are made at once (one statement each for their newest rows, their
#: marks and their items).
PREFETCH_SESSIONS = 256

#: A run over at most this many sessions lists every session's report; a larger one (a
#: first backfill of a big database) lists only the sessions where something happened, so
#: its memory and its ``--json`` output do not grow with the database.
LIST_EVERY_SESSION_UP_TO = 1000

#: Wraps the session list of one database (a progress bar on a terminal).
Progress = Callable[[list[SessionRow]], Iterable[SessionRow]]
#: The daemon's per-project lock factory (held while a session of that project runs).
LockFor = Callable[[str], AbstractContextManager[Any]]


def journal_record(app: AppPort) -> Callable[[dict[str, Any]], None]:
    """Appends an entry (a write-time supersession's) to the dream journal; a journal
    that cannot be written is logged (``journal_append_failed``) and the change stands
    (the state file's run records it)."""
    journal = DreamJournal(app.journal_path)

    def record(entry: dict[str, Any]) -> None:
        try:
            journal.append(entry)
        except MemorydError as exc:
            log.error("journal_append_failed", run_id=entry.get("run_id"), error=str(exc))
    return record


def no_lock(_project_key: str) -> AbstractContextManager[None]:
    """A :data:`LockFor` that locks nothing (one-shot commands own the store alone)."""
    return nullcontext()


def maintain(app: AppPort, state: StateDB, store: MemoryStore, extractor: Extractor, *,
             directory: str | None, db: str | None = None,
             progress: Progress | None = None, lock_for: LockFor = no_lock,
             retry_failed: bool = False, summarizer: Summarizer | None = None
             ) -> dict[str, Any]:
    """Process every eligible session (of ``directory``'s project, or all) up to now.

    The sessions' marks, rules results and store writes are committed in groups
    (:class:`~opencode_memoryd.capture.batching.WriteGroup`: the store flushed, then the
    state file); the run's end is recorded durably after the last group.

    Args:
        directory: a normalised folder, or ``None`` for every session.
        db: ``--db PATH``, else the configured or discovered databases.
        progress: wraps each database's session list.
        lock_for: held per session's project, so this never overlaps the daemon's jobs.
        retry_failed: first forget the negotiated structured-output modes, then extract
            again every given-up chunk of the selected sessions
            (:func:`~opencode_memoryd.capture.retry.retry_given_up`), e.g. after changing
            the model.
        summarizer: writes session summaries and project briefs (rules when ``None``).

    Returns:
        ``{"run_id", "mode", "databases": [{"path", "schema", "sessions"}],
        "sessions": [SessionReport dicts], "retried": [SessionReport dicts of the
        given-up chunks extracted again], "totals": {...}, "failed": int,
        "sessions_omitted": int}``. ``failed`` counts the sessions and retries that ended
        in an error. ``sessions`` lists every session of a run over at most
        :data:`LIST_EVERY_SESSION_UP_TO` sessions; above, only those with an error, a
        memory added or refused, a chunk given up, a corrupt row, a summary or a brief
        (``sessions_omitted`` counts the others; ``totals`` counts them all).

    Raises:
        SourceError: no database, or one that cannot be opened (schema errors included).
        UpstreamError: the LLM endpoint refused our credentials or model (kind ``auth``
            or ``not_found``), or could not be reached after the client's retries (kind
            ``connection``, nothing sent): every session would fail the same way, so the
            run stops at the first (the sessions before it are committed; it keeps its
            mark).
        DiskFullError: the state dir or the store has too little free space; the session
            at hand stored nothing and its mark did not move.
    """
    from opencode_memoryd.capture.batching import WriteGroup
    from opencode_memoryd.capture.runner import CaptureRunner

    run_id = uuid.uuid4().hex[:12]
    mode = app.extraction_mode()
    log.info("maintain_started", run_id=run_id, mode=mode, directory=directory or "(all)")
    paths = app.database_paths(db)
    tally = _Tally()
    retried: list[SessionReport] = []
    dbs: list[dict[str, Any]] = []
    state.runs.start_run(run_id, "maintain", iso_utc(app.clock()))
    if retry_failed:
        forgotten = state.llm.forget_llm_modes()
        log.info("llm_modes_forgotten", count=forgotten)
    try:
        for path in paths:
            with app.open_source(path) as source:
                sessions = source.sessions(
                    directory=directory,
                    include_archived=app.config.opencode.include_archived,
                )
                dbs.append({"path": str(path), "schema": source.schema.describe(),
                            "sessions": len(sessions)})
                tally.list_all = tally.list_all and len(sessions) <= LIST_EVERY_SESSION_UP_TO
                with WriteGroup(state, store, max_seconds=MAINTAIN_GROUP_SECONDS,
                                flush_seconds=MAINTAIN_GROUP_SECONDS) as group:
                    ident = source.identity

                    def processor_for(db: OpenCodeDB, group: WriteGroup = group
                                      ) -> SessionProcessor:
                        return app.session_processor(db, state, store, extractor,
                                                     summarizer=summarizer, batch=group.batch)

                    def source_of(source_id: str, ident: str = ident,
                                  source: OpenCodeDB = source) -> OpenCodeDB | None:
                        return source if source_id == ident else None

                    runner = CaptureRunner(group, processor_for, source_of,
                                           window=PREFETCH_SESSIONS)
                    if retry_failed:
                        retried.extend(_retry(runner.processor(ident), state, sessions,
                                              lock_for))
                    order = (i for i, _ in enumerate(progress(sessions) if progress
                                                     else sessions))
                    runner.run([(ident, s.id) for s in sessions],
                               _step(app, {s.id: s for s in sessions}, tally, lock_for),
                               order=order)
    finally:
        summary = _summary(run_id, mode, dbs, tally, retried)
        state.runs.end_run(run_id, summary["totals"], iso_utc(app.clock()))
    log.info("maintain_finished", run_id=run_id, **summary["totals"])
    return summary


def _unreachable(app: AppPort, error: str | None) -> UpstreamError:
    """The error that ends a run whose LLM endpoint cannot be reached."""
    base = app.config.llm.base_url or "the LLM endpoint"
    return UpstreamError(
        f"{base} is unreachable ({error}): is the server (e.g. Ollama) running, and is "
        "[llm] base_url right? Nothing after this session was read; run maintain again "
        "once it answers", kind="connection", retryable=True)


def _step(app: AppPort, rows: dict[str, SessionRow], tally: _Tally,
          lock_for: LockFor) -> Callable[[Step], None]:
    """What ``maintain`` does with each session the runner hands it: process it under its
    project's lock and count its report; a run whose LLM endpoint cannot be reached
    stops (:func:`_unreachable`)."""

    def step(step: Step) -> None:
        s = rows[step.key[1]]
        with lock_for(s.project_key):
            report = step.processor().process(s, ends=step.ends)
        tally.add(report)
        if report.unreachable:
            raise _unreachable(app, report.error)
    return step


def _retry(proc: SessionProcessor, state: StateDB, sessions: list[SessionRow],
           lock_for: LockFor) -> list[SessionReport]:
    """Extract the given-up chunks of ``sessions`` (of ``proc``'s database) again."""
    from opencode_memoryd.capture.retry import retry_given_up

    by_id = {s.id: s for s in sessions}
    out = []
    for failure in state.failures.chunk_failures(status="given_up", source_id=proc.source.identity):
        session = by_id.get(failure.session_id)
        if session is None:
            continue
        with lock_for(session.project_key):
            out.append(retry_given_up(proc, session, failure))
    return out


_TOTALS = ("turns_read", "llm_calls", "added", "tokens_in", "tokens_out", "given_up",
           "corrupt_rows", "summaries", "briefs")
_COUNTED = ("skipped", "rejected", "redactions")


class _Tally:
    """The totals of a run's session reports, and the reports it lists."""

    def __init__(self) -> None:
        self.list_all = True
        self.rows: list[dict[str, Any]] = []
        self.omitted = 0
        self.totals: dict[str, int] = dict.fromkeys(
            ("sessions", *_TOTALS, *_COUNTED, "failed"), 0)

    def add(self, report: SessionReport) -> None:
        """Count ``report``, and keep it when every session is listed or it is notable."""
        row = report.as_dict()
        t = self.totals
        t["sessions"] += 1
        for key in _TOTALS:
            t[key] += row[key]
        for key in _COUNTED:
            t[key] += sum(row[key].values())
        t["failed"] += bool(row["error"])
        notable = (row["error"] or row["added"] or row["rejected"] or row["given_up"]
                   or row["corrupt_rows"] or row["summaries"] or row["briefs"])
        if self.list_all or notable:
            self.rows.append(row)
        else:
            self.omitted += 1


def _summary(run_id: str, mode: str, dbs: list[dict[str, Any]], tally: _Tally,
             retried: list[SessionReport] | None = None) -> dict[str, Any]:
    retry_rows = [r.as_dict() for r in retried or []]
    totals = {**tally.totals, "retried": sum(1 for r in retry_rows if not r["error"])}
    totals["failed"] += sum(1 for r in retry_rows if r["error"])
    for r in retry_rows:
        for key in ("llm_calls", "added", "tokens_in", "tokens_out"):
            totals[key] += r[key]
    return {"run_id": run_id, "mode": mode, "databases": dbs, "sessions": tally.rows,
            "sessions_omitted": tally.omitted, "retried": retry_rows, "totals": totals,
            "failed": totals["failed"]}


def capture_now(app: AppPort, state: StateDB, store: MemoryStore, extractor: Extractor, *,
                directory: str, lock_for: LockFor = no_lock,
                summarizer: Summarizer | None = None) -> dict[str, Any]:
    """Extract the newest top-level session of ``directory``'s project now.

    The newest is the one with the newest activity: the later of its ``time_updated`` and
    the newest ``time_updated`` of its ``session_message`` rows (v2 turns do not bump
    ``session.time_updated``), across every database.

    The quiet period is skipped, the finished-turn rule is not: a turn still in flight is
    left for later, so this never reads a turn mid-way.

    Returns:
        ``{"session_id", "title", "report": SessionReport dict, "message"}``, where
        ``message`` says what happened in words (:func:`capture_message`: "captured 2
        memories", "the turn is still running …", "nothing new since 10:42"); or
        ``{"session_id": None, "reason", "message"}`` when no session of the directory
        is known.

    Raises:
        SourceError: no database, or one that cannot be opened.
    """
    newest: tuple[SessionRow, Path, int] | None = None
    for path in app.database_paths():
        with app.open_source(path) as source:
            rows = source.sessions(directory=directory)
            if not rows:
                continue
            # v2 turns do not bump time_updated: only rows created after the newest
            # time_updated here can make another session the newest
            later = source.activity(max(s.time_updated for s in rows)).updated
            for s in rows:
                active = max(s.time_updated, later.get(s.id, 0))
                if newest is None or active > newest[2]:
                    newest = (s, path, active)
    if newest is None:
        reason = f"no OpenCode session found for {directory}"
        return {"session_id": None, "reason": reason, "message": reason}
    session, path, active = newest
    with app.open_source(path) as source:
        proc = app.session_processor(source, state, store, extractor, summarizer=summarizer)
        with lock_for(session.project_key):
            report = proc.process(session)
    log.info("capture_now", session_id=session.id, added=report.added)
    return {"session_id": session.id, "title": session.title, "report": report.as_dict(),
            "message": capture_message(report.added + report.summaries, report.waiting,
                                       report.error, active)}


def capture_message(added: int, waiting: bool, error: str | None, newest_ms: int) -> str:
    """What ``capture-now`` did, in words for the agent and the user.

    Args:
        added: memories written (facts and session summaries).
        waiting: a turn after the ones read is still running (its words are read once it
            has ended).
        error: the session's error, if it failed.
        newest_ms: the session's newest activity (ms since the epoch), shown in local time
            when nothing was new.
    """
    if error:
        return f"capture failed: {error}"
    parts = []
    if added:
        parts.append(f"captured {added} memor{'y' if added == 1 else 'ies'}")
    if waiting:
        parts.append("the turn is still running: what it says is captured after it ends")
    if not parts:
        when = datetime.fromtimestamp(newest_ms / 1000, tz=UTC).astimezone()
        return f"nothing new since {when:%H:%M}: everything said is already captured"
    return "; ".join(parts)
