"""Session work: one worker thread takes the due sessions from the state file's queue,
soonest first, and extracts them in groups (one store flush and one state commit per
group); retries with backoff, and what the LLM gate (:mod:`opencode_memoryd.capture.gate`)
decides: a circuit breaker, a pause on 401/403/404, a daily token budget, and a wait of its
own while the disk is full."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.capture.gate import DISK_FULL_RETRY
from opencode_memoryd.debounce import backoff_seconds
from opencode_memoryd.errors import MemorydError, SourceError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.source.storages.registry import named
from opencode_memoryd.state.queue import GIVE_UP_ATTEMPTS

if TYPE_CHECKING:
    from opencode_memoryd.capture.batching import WriteGroup
    from opencode_memoryd.capture.gate import LlmGate
    from opencode_memoryd.capture.notes import Summarizer
    from opencode_memoryd.capture.processor import Extractor, SessionProcessor
    from opencode_memoryd.capture.report import SessionReport
    from opencode_memoryd.capture.runner import CaptureRunner, Step
    from opencode_memoryd.conversation.rows import SessionRow
    from opencode_memoryd.serve.runtime.shared import DaemonState
    from opencode_memoryd.source.reader import OpenCodeDB

log = structlog.get_logger(__name__)

#: Due sessions taken from the queue at once (one group of writes at most this big).
WORK_BATCH = 64
#: The longest the worker sleeps without looking at the queue (a change it was not told
#: about, e.g. a clock jump, is noticed by then).
MAX_IDLE_SECONDS = 60.0
#: While more sessions are due than one round takes (a catch-up), the store is flushed at
#: most this often (s); otherwise as :data:`~opencode_memoryd.capture.batching.FLUSH_SECONDS`.
BACKLOG_FLUSH_SECONDS = 2.0
#: How long the worker waits after an unexpected failure before it looks again.
WORKER_BACKOFF_SECONDS = 5.0
#: The worker sleeps this long (s) past the next due time, so sessions that come due
#: close together (OpenCode streaming into many sessions) are taken in one round: one
#: look at the queue and one read-ahead for them all.
DUE_COALESCE_SECONDS = 0.2
#: Sessions listed in ``status`` (``pending_count`` has them all).
STATUS_PENDING_LIMIT = 20
#: Seconds before a session given up (:data:`GIVE_UP_ATTEMPTS` unexpected failures in a
#: row) is tried again, unless it changes first.
GIVEN_UP_RETRY_SECONDS = 6 * 3600.0


class Worker:
    """The daemon's worker thread and what it does with one session: takes the due
    sessions from the queue, runs them through a
    :class:`~opencode_memoryd.capture.runner.CaptureRunner` a round at a time, and decides
    what follows each (done, retried, deferred, held) with the LLM gate.

    ``extractor`` and ``summarizer`` are given by the start once the capture code is
    loaded (before :meth:`start`).

    Args:
        shared: what the daemon's collaborators share.
        gate: the pause, circuit breaker, token budget and disk-full hold.
    """

    extractor: Extractor
    summarizer: Summarizer

    def __init__(self, shared: DaemonState, gate: LlmGate) -> None:
        self.shared, self.gate = shared, gate
        #: the newest extraction of each project (``status``)
        self.last_extraction: dict[str, dict[str, Any]] = {}
        self.thread: threading.Thread | None = None
        self._wake = threading.Event()
        #: when (wall ms) the sleeping worker looks at the queue again (0: it is not
        #: sleeping on a known plan, so any change wakes it)
        self._planned_wake_ms = 0
        self._project_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def status(self) -> dict[str, Any]:
        """The work's part of ``status`` (JSON-safe): ``pending`` (the first
        :data:`STATUS_PENDING_LIMIT` queued sessions), ``pending_count``, ``failing``,
        ``last_extraction``, ``paused`` and ``tokens_today`` (since UTC midnight)."""
        state = self.shared.state
        midnight = self.shared.clock().replace(hour=0, minute=0, second=0, microsecond=0)
        return {
            "pending": [{"session_id": r["session_id"],
                         "due": iso_utc(datetime.fromtimestamp(r["due_ms"] / 1000, tz=UTC)),
                         "attempts": r["attempts"], "last_error": r["last_error"]}
                        for r in state.queue.queue(limit=STATUS_PENDING_LIMIT)],
            "pending_count": state.queue.queue_size(),
            "failing": self._failing(),
            "last_extraction": self.last_extraction,
            "paused": self.gate.status(),
            "tokens_today": state.outbox.tokens_since(iso_utc(midnight)),
        }

    def _failing(self) -> dict[str, Any]:
        """Sessions whose last attempts failed: ``{count, given_up, sessions[]}``."""
        count, rows = self.shared.state.queue.queue_failing()
        sessions = [{"session_id": r["session_id"], "attempts": r["attempts"],
                     "last_error": r["last_error"],
                     "given_up": r["attempts"] >= GIVE_UP_ATTEMPTS} for r in rows]
        return {"count": count, "given_up": sum(s["given_up"] for s in sessions),
                "sessions": sessions}

    # -- the worker thread ------------------------------------------------------------

    def start(self) -> None:
        """Start the worker thread (idempotent)."""
        if self.thread is not None:
            return
        self.thread = threading.Thread(target=self._work_loop, name="session-worker",
                                       daemon=True)
        self.thread.start()

    def wake(self, due_ms: int | None = None) -> None:
        """Tell the worker the queue changed (it looks at it again at once).

        Args:
            due_ms: the earliest due time (wall ms) the change can have given a session;
                the worker is left asleep when it wakes up before that anyway (a change
                only ever moves a queued session's due time later, see
                :meth:`~opencode_memoryd.state.queue.QueueTable.queue_touch_many`).
        """
        if due_ms is None or due_ms < self._planned_wake_ms:
            self._wake.set()

    def _work_loop(self) -> None:
        """Take due sessions from the queue, soonest first, into one group of writes;
        commit the group when it is due (at once when it wrote nothing to the store, else
        up to :data:`~opencode_memoryd.capture.batching.FLUSH_SECONDS` later, so one store
        flush serves the sessions of that time); sleep until the next due time, group
        commit or wake-up."""
        # imported here: the daemon loads the capture code once its commands are served
        from opencode_memoryd.capture.batching import WriteGroup

        group = WriteGroup(self.shared.state, self.shared.store)
        group.__enter__()
        try:
            while not self.shared.stop_event.is_set():
                self._planned_wake_ms = 0  # a change seen from now on wakes the worker
                self._wake.clear()
                started_ms = int(self.shared.clock().timestamp() * 1000)
                wait = self._work_once(group)
                if wait is None:
                    continue  # more due work
                # what it read of the queue was read after ``started_ms``
                self._planned_wake_ms = started_ms + int(wait * 1000)
                self._wake.wait(wait)
        finally:
            try:
                group.__exit__(None, None, None)
            except (MemorydError, OSError) as exc:
                log.warning("worker_commit_failed", error=str(exc))

    def _work_once(self, group: WriteGroup) -> float | None:
        """One round of the worker: up to :data:`WORK_BATCH` due sessions; return how
        long to sleep, or ``None`` to go on at once."""
        try:
            now_ms = int(self.shared.clock().timestamp() * 1000)
            self.gate.release_due()
            skip = len(group.sessions) + self.gate.held_count
            head = self.shared.state.queue.queue_head(WORK_BATCH + skip)
            waiting = [(src, sid, due) for src, sid, due in head
                       if (src, sid) not in group.sessions
                       and not self.gate.is_held((src, sid))]
            due = [(src, sid) for src, sid, at in waiting if at <= now_ms][:WORK_BATCH]
            # with a backlog (a catch-up), store flushes are spaced further apart
            flush = BACKLOG_FLUSH_SECONDS if len(due) == WORK_BATCH else None
            if due:
                # a session left when stopping is still queued: the next start resumes it
                self._runner(group).run(
                    due, lambda step: self._run_isolated(step, group, now_ms),
                    flush_seconds=flush)
                return None
            had = bool(group.sessions)
            group.commit_if_due(idle=True)
            if had and not group.sessions:
                return None  # committed: the sessions it held may be queued again
        except (MemorydError, OSError) as exc:  # a store or state failure: back off
            self.shared.last_error = str(exc)
            log.warning("worker_failed", error=str(exc))
            return WORKER_BACKOFF_SECONDS
        except Exception as exc:  # a bug must not end the daemon's extractions
            self.shared.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("worker_crashed")
            return WORKER_BACKOFF_SECONDS
        wait = MAX_IDLE_SECONDS
        upcoming = [at for _, _, at in waiting if at > now_ms]
        if upcoming:
            wait = min(wait, (min(upcoming) - now_ms) / 1000 + DUE_COALESCE_SECONDS)
        release = self.gate.next_release_ms()
        if release is not None:
            wait = min(wait, (release - now_ms) / 1000)
        until_commit = group.seconds_until_due(idle=True)
        if until_commit is not None:
            wait = min(wait, until_commit)
        return max(0.0, wait)

    def _runner(self, group: WriteGroup) -> CaptureRunner:
        """The capture runner of one round: the due sessions read ahead together (their
        newest rows and state: a few statements per round instead of a few per session),
        each after any command waiting for it, the group committed when due."""
        from opencode_memoryd.capture.runner import CaptureRunner

        def processor_for(db: OpenCodeDB) -> SessionProcessor:
            shared = self.shared
            return shared.app.session_processor(db, shared.state, shared.store, self.extractor,
                                                summarizer=self.summarizer, batch=group.batch,
                                                raise_fatal=False)

        def source_of(source_id: str) -> OpenCodeDB | None:
            src = self.shared.sources.get(source_id)
            return src.db if src is not None else None

        def before(key: tuple[str, str]) -> None:
            if not self.shared.own_writes.wanted(key):
                self.shared.step_aside()  # the command waiting for this one goes with it

        return CaptureRunner(group, processor_for, source_of, window=WORK_BATCH,
                             should_stop=self.shared.stop_event.is_set, before=before,
                             after=self.shared.own_writes.done)

    def project_lock(self, project_key: str) -> threading.Lock:
        """The lock that keeps work on one project (extraction, dream) serial."""
        with self._locks_guard:
            return self._project_locks.setdefault(project_key, threading.Lock())

    def _retry(self, source_id: str, session_id: str, delay: float, reason: str) -> None:
        """Take the session again in ``delay`` seconds (not counted as a failure)."""
        due = int((self.shared.clock() + timedelta(seconds=delay)).timestamp() * 1000)
        self.shared.state.queue.queue_reschedule(source_id, session_id, due, reason)

    def llm_wait(self) -> float | None:
        """Seconds to wait before LLM work may run, or ``None`` when it may run now
        (:meth:`~opencode_memoryd.capture.gate.LlmGate.wait`, its events logged)."""
        wait = self.gate.wait(lambda since: self.shared.state.outbox.tokens_since(iso_utc(since)))
        self._log_gate()
        return wait

    def _log_gate(self) -> None:
        """Log what the gate decided since the last call."""
        for event in self.gate.drain():
            getattr(log, event.level)(event.name, **event.fields)

    def _run_isolated(self, step: Step, group: WriteGroup, started_ms: int) -> None:
        """:meth:`_run_session`, with any failure but the store's or the state file's
        (which every session would share) this session's alone (:meth:`_session_failed`)."""
        source_id, session_id = step.key
        try:
            self._run_session(step, group, started_ms)
        except (MemorydError, OSError):
            raise
        except Exception as exc:  # a row or a bug nothing foresaw
            log.exception("session_crashed", session_id=session_id)
            self._session_failed(source_id, session_id,
                                 f"internal: {type(exc).__name__}: {exc}")

    def _run_session(self, step: Step, group: WriteGroup, started_ms: int | None = None
                     ) -> None:
        """Extract one due session; its state writes go to ``group`` (and it is noted
        there, unless it was rescheduled or held). ``step.ends``: the newest rows of the
        round's sessions of this source, read at ``started_ms`` (the session leaves the
        queue only when it did not change after that)."""
        source_id, session_id = step.key
        ends = step.ends
        batch = group.batch
        src = self.shared.sources.get(source_id)
        if src is None:
            if not self.shared.caught_up:  # re-armed at start, before its database is open
                self._retry(source_id, session_id, 1.0, "waiting for start-up")
            return  # its database is gone; the queue keeps the entry for a later return
        wait = self.llm_wait()
        if wait is not None:
            self._retry(source_id, session_id, wait, self.gate.reason)
            return
        now = self.shared.clock()
        now_ms = int(now.timestamp() * 1000)
        done_ms = now_ms if started_ms is None or ends is None else min(started_ms, now_ms)
        try:
            session = src.db.session(session_id)
            if session is None:  # deleted
                batch.queue_done(source_id, session_id, now_ms)
                group.note(source_id, session_id)
                return
            limits = self.shared.app.limits()
            if src.db.in_flight(session_id, now_ms=now_ms, abandoned_ms=limits.abandoned_ms,
                                row=session, unconfirmed_ms=limits.unconfirmed_ms):
                self._retry(source_id, session_id, max(self.shared.cfg.quiet_period_seconds, 1.0),
                            "turn in flight")
                return
        except SourceError as exc:
            self._retry(source_id, session_id, 30, str(exc))
            return
        lock = self.project_lock(session.project_key)
        if not lock.acquire(blocking=False):
            self._retry(source_id, session_id, 5, "project busy")
            return
        try:
            report = step.processor().process(session, ends=ends)
        finally:
            lock.release()
        if report.error is None:
            self._handle_success(step, group, session, report, now_ms=now_ms, done_ms=done_ms)
            return
        self._handle_failure(source_id, session_id, report)

    def _handle_success(self, step: Step, group: WriteGroup, session: SessionRow,
                        report: SessionReport, *, now_ms: int, done_ms: int) -> None:
        """After a session was processed without error: look again soon (a turn not
        finished, a summary due later) or take it off the queue (``done_ms``: the time its
        rows were read), and keep what its extraction added for ``status``."""
        source_id, session_id = step.key
        batch = group.batch
        self.gate.succeeded()
        if report.waiting and named(report.storage).looks_again:
            # a turn that ends with in-place updates change detection may not see:
            # look again rather than wait for the next change
            limits = self.shared.app.limits()
            self._retry(source_id, session_id,
                        max(self.shared.cfg.quiet_period_seconds, limits.settle_ms / 1000, 1.0),
                        "turn not finished")
        elif report.summary_due_ms is not None:
            # look again once the session has been idle long enough for its summary
            self.shared.state.queue.queue_defer(
                source_id, session_id, max(report.summary_due_ms, now_ms + 1000), now_ms,
                self.shared.cfg.max_wait_seconds, "summary due")
        else:
            batch.queue_done(source_id, session_id, done_ms)
            group.note(source_id, session_id)
        if report.turns_read:
            before = self.last_extraction.get(session.project_key) or {}
            self.last_extraction[session.project_key] = {
                "at": iso_utc(self.shared.clock()), "session_id": session_id,
                "project_root": session.project_root, "added": report.added,
                "added_since_start": before.get("added_since_start", 0) + report.added}

    def _handle_failure(self, source_id: str, session_id: str, report: SessionReport) -> None:
        error = report.error or "failed"
        previous, self.shared.last_error = self.shared.last_error, error
        kind = report.error_kind
        if kind == "disk_full":  # the state file may be full too: write nothing, retry
            if not (previous or "").startswith("disk_full"):  # once, not per session
                log.error("disk_full", error=report.error, retry_seconds=DISK_FULL_RETRY)
            self.gate.hold((source_id, session_id))
            return
        if kind in ("auth", "not_found"):
            delay = self.gate.refused(error)
            self._log_gate()
            self._retry(source_id, session_id, delay, error)
            return
        if kind == "internal":
            self._session_failed(source_id, session_id, error)
            return
        attempts = self.shared.state.queue.queue_failed(source_id, session_id, error)
        delay = self.gate.failed(error, attempts=attempts,
                                 retry_after=report.retry_after_seconds)
        self._log_gate()
        self._retry(source_id, session_id, delay, error)

    def _session_failed(self, source_id: str, session_id: str, error: str) -> None:
        """A failure of this session alone (a row or a bug nothing foresaw): counted, and
        retried with backoff (never the circuit breaker); after :data:`GIVE_UP_ATTEMPTS`
        in a row, given up: logged as an error, shown by ``status``/``doctor``, and tried
        again only after :data:`GIVEN_UP_RETRY_SECONDS` or a change of the session."""
        self.shared.last_error = error
        attempts = self.shared.state.queue.queue_failed(source_id, session_id, error)
        if attempts < GIVE_UP_ATTEMPTS:
            self._retry(source_id, session_id, backoff_seconds(attempts), error)
            return
        log.error("session_given_up", session_id=session_id, attempts=attempts, error=error,
                  retry_seconds=GIVEN_UP_RETRY_SECONDS,
                  detail="its new turns are not captured; every other session's are")
        self._retry(source_id, session_id, GIVEN_UP_RETRY_SECONDS, error)
