"""Session jobs: one debounced APScheduler job per queued session, run on a single worker
thread; retries with backoff, a circuit breaker, a pause on 401/403/404, and a daily token
budget."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.capture.processor import SessionProcessor
from opencode_memoryd.capture.report import SessionReport
from opencode_memoryd.debounce import backoff_seconds
from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import STORAGE_SESSION_MESSAGE, iso_utc

if TYPE_CHECKING:
    from collections.abc import Callable

    from apscheduler.schedulers.background import BackgroundScheduler

    from opencode_memoryd.capture.notes import Summarizer
    from opencode_memoryd.capture.processor import Extractor
    from opencode_memoryd.compose import App
    from opencode_memoryd.config.daemon import DaemonConfig
    from opencode_memoryd.serve.sources import TrackedSource
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.api import MemoryStore

log = structlog.get_logger(__name__)

#: Seconds between two tries of a session that found the disk full.
DISK_FULL_RETRY = 60.0


def job_id(source_id: str, session_id: str) -> str:
    """The APScheduler job id of a session."""
    return f"session:{source_id}:{session_id}"


@dataclass
class Pause:
    """Why LLM work is paused, and until when (aware UTC)."""

    reason: str
    until: datetime



class SessionJobs:
    """The extraction half of :class:`~opencode_memoryd.serve.daemon.Daemon`."""

    app: App
    cfg: DaemonConfig
    state: StateDB
    store: MemoryStore
    extractor: Extractor
    summarizer: Summarizer
    scheduler: BackgroundScheduler
    stop_event: threading.Event
    clock: Callable[[], datetime]
    caught_up: bool
    pause: Pause | None
    last_error: str | None
    last_extraction: dict[str, dict[str, Any]]
    _sources: dict[str, TrackedSource]
    _project_locks: dict[str, threading.Lock]
    _locks_guard: threading.Lock
    _consecutive_failures: int


    def _arm(self, source_id: str, session_id: str, due_ms: int) -> None:
        run_date = datetime.fromtimestamp(due_ms / 1000, tz=UTC)
        self.scheduler.add_job(self._run_session, "date", run_date=run_date,
                               args=(source_id, session_id),
                               id=job_id(source_id, session_id), replace_existing=True)

    def project_lock(self, project_key: str) -> threading.Lock:
        """The lock that keeps work on one project (extraction, dream) serial."""
        with self._locks_guard:
            return self._project_locks.setdefault(project_key, threading.Lock())

    def _retry(self, source_id: str, session_id: str, delay: float, reason: str) -> None:
        """Run the session's job again in ``delay`` seconds (not counted as a failure)."""
        due = int((self.clock() + timedelta(seconds=delay)).timestamp() * 1000)
        self.state.queue_reschedule(source_id, session_id, due, reason)
        self._arm(source_id, session_id, due)

    def _llm_gate(self) -> float | None:
        """Seconds to wait before LLM work may run, or ``None`` when it may run now."""
        if self.app.extraction_mode() != "llm":
            return None
        now = self.clock()
        if self.pause is not None:
            if now < self.pause.until:
                return (self.pause.until - now).total_seconds()
            log.info("llm_pause_over", reason=self.pause.reason)
            self.pause = None
        budget = self.cfg.daily_token_budget
        if budget:
            midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
            if self.state.tokens_since(iso_utc(midnight)) >= budget:
                until = midnight + timedelta(days=1)
                self.pause = Pause(f"daily token budget of {budget} reached", until)
                log.warning("token_budget_reached", budget=budget, until=iso_utc(until))
                return (until - now).total_seconds()
        return None

    def _run_session(self, source_id: str, session_id: str) -> None:
        if self.stop_event.is_set():
            return
        src = self._sources.get(source_id)
        if src is None:
            if not self.caught_up:  # re-armed at start, before its database is open
                self._retry(source_id, session_id, 1.0, "waiting for start-up")
            return  # its database is gone; the queue keeps the entry for a later return
        wait = self._llm_gate()
        if wait is not None:
            self._retry(source_id, session_id, wait, self.pause.reason if self.pause else "")
            return
        now = self.clock()
        now_ms = int(now.timestamp() * 1000)
        try:
            session = src.db.session(session_id)
            if session is None:  # deleted
                self.state.queue_done(source_id, session_id, now_ms)
                return
            if src.db.in_flight(session_id, now_ms=now_ms,
                                abandoned_ms=self.app.limits().abandoned_ms):
                self._retry(source_id, session_id, max(self.cfg.quiet_period_seconds, 1.0),
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
            proc = SessionProcessor(src.db, self.state, self.store, self.extractor,
                                    self.app.limits(), clock=self.clock, raise_fatal=False,
                                    user_id=self.app.user_id, summarizer=self.summarizer,
                                    ensure_space=self.app.ensure_space)
            report = proc.process(session)
        finally:
            lock.release()
        if report.error is None:
            self._consecutive_failures = 0
            if report.waiting and report.storage == STORAGE_SESSION_MESSAGE:
                # a v2 turn ends with in-place updates that change detection may not see:
                # look again rather than wait for the next change
                limits = self.app.limits()
                self._retry(source_id, session_id,
                            max(self.cfg.quiet_period_seconds, limits.settle_ms / 1000, 1.0),
                            "turn not finished")
            elif report.summary_due_ms is not None:
                # look again once the session has been idle long enough for its summary
                due = self.state.queue_defer(
                    source_id, session_id, max(report.summary_due_ms, now_ms + 1000), now_ms,
                    self.cfg.max_wait_seconds, "summary due")
                self._arm(source_id, session_id, due)
            else:
                self.state.queue_done(source_id, session_id, now_ms)
            if report.turns_read:
                self.last_extraction[session.project_key] = {
                    "at": iso_utc(self.clock()), "session_id": session_id,
                    "project_root": session.project_root, "added": report.added}
            return
        self._handle_failure(source_id, session_id, report)

    def _handle_failure(self, source_id: str, session_id: str, report: SessionReport) -> None:
        error = report.error or "failed"
        previous, self.last_error = self.last_error, error
        kind = report.error_kind
        now = self.clock()
        if kind == "disk_full":  # the state file may be full too: write nothing, retry
            if not (previous or "").startswith("disk_full"):  # once, not per session
                log.error("disk_full", error=report.error, retry_seconds=DISK_FULL_RETRY)
            self._arm(source_id, session_id, int((now + timedelta(
                seconds=DISK_FULL_RETRY)).timestamp() * 1000))
            return
        if kind in ("auth", "not_found"):
            self.pause = Pause(f"LLM endpoint refused the request ({report.error}); fix the "
                               "key or model in the config", now + timedelta(
                                   seconds=self.cfg.auth_pause_seconds))
            log.error("llm_paused", reason=self.pause.reason, until=iso_utc(self.pause.until))
            self._retry(source_id, session_id, self.cfg.auth_pause_seconds, error)
            return
        attempts = self.state.queue_failed(source_id, session_id, error)
        self._consecutive_failures += 1
        if self._consecutive_failures >= self.cfg.circuit_failure_threshold:
            self.pause = Pause(f"circuit open after {self._consecutive_failures} consecutive "
                               f"failures (last: {report.error})",
                               now + timedelta(seconds=self.cfg.circuit_cooldown_seconds))
            log.warning("circuit_open", reason=self.pause.reason,
                        until=iso_utc(self.pause.until))
        delay = backoff_seconds(attempts, retry_after=report.retry_after_seconds)
        if self.pause is not None:
            delay = max(delay, (self.pause.until - now).total_seconds())
        self._retry(source_id, session_id, delay, error)
