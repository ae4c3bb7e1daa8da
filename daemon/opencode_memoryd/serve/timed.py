"""The daemon's time-based work, run by its scheduler (:mod:`opencode_memoryd.serve.daemon`):
the periodic safety sweep, the dream checks and the retention of recorded model answers.

Each is a job of an APScheduler ``BackgroundScheduler`` (coalesced, one instance at a time);
the sessions of the work queue are not jobs: the worker thread
(:mod:`opencode_memoryd.serve.jobs`) takes them from the state file.
"""

from __future__ import annotations

import threading
from datetime import UTC, timedelta
from typing import TYPE_CHECKING

import structlog

from opencode_memoryd.llm.recorded import KEEP_DAYS
from opencode_memoryd.models import iso_utc
from opencode_memoryd.serve.jobs import SessionJobs

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

    from opencode_memoryd.compose import App
    from opencode_memoryd.usecases.service import Service

log = structlog.get_logger(__name__)

#: Job ids of the scheduler.
SWEEP_JOB = "sweep"
DREAM_CATCH_UP_JOB = "dream-catch-up"
DREAM_CHECK_JOB = "dream-check"
RETENTION_JOB = "retention"
#: How often (hours) recorded model answers older than ``KEEP_DAYS`` days are deleted.
RETENTION_HOURS = 6.0
#: The scheduler's executor (one thread) for the dream checks; the other jobs (sweep,
#: retention) run on the default one (one thread, named ``timed``).
DREAM_EXECUTOR = "dreams"
#: A job whose time passed while the process could not run it (suspend, a long dream) still
#: runs if at most this late (s); coalescing makes several missed runs one.
MISFIRE_GRACE_SECONDS = 3600


class TimedWork(SessionJobs):
    """The scheduled jobs of :class:`~opencode_memoryd.serve.daemon.Daemon` (what they do;
    the daemon registers them). A dream waits while LLM work is paused (the session jobs'
    gate)."""

    service: Service
    last_dream: dict[str, str]
    app: App
    _poke: threading.Event
    _full_sweep_requested: bool

    def _schedule(self, sweep_seconds: float) -> BaseScheduler:
        """Start a ``BackgroundScheduler`` with the jobs: the safety sweep every
        ``sweep_seconds``, the retention of recorded answers every :data:`RETENTION_HOURS`
        and, when dreams are enabled, a catch-up dream check at once, then one every
        ``dream.check_interval_minutes`` (on :data:`DREAM_EXECUTOR`). APScheduler is
        imported here, once commands are served (it costs a tenth of a second)."""
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        scheduler = BackgroundScheduler(
            executors={
                "default": ThreadPoolExecutor(1, pool_kwargs={"thread_name_prefix": "timed"}),
                DREAM_EXECUTOR: ThreadPoolExecutor(
                    1, pool_kwargs={"thread_name_prefix": DREAM_EXECUTOR}),
            },
            job_defaults={"coalesce": True, "max_instances": 1,
                          "misfire_grace_time": MISFIRE_GRACE_SECONDS},
            timezone=UTC,
        )
        add = scheduler.add_job
        add(self._request_sweep, "interval", seconds=sweep_seconds, id=SWEEP_JOB,
            replace_existing=True)
        add(self._retention, "interval", hours=RETENTION_HOURS, id=RETENTION_JOB,
            replace_existing=True)
        dream = self.app.config.dream
        if dream.enabled:
            add(self._dream_job, "date", args=("catch-up",), id=DREAM_CATCH_UP_JOB,
                replace_existing=True, executor=DREAM_EXECUTOR)
            add(self._dream_job, "interval", args=("auto",),
                minutes=dream.check_interval_minutes, id=DREAM_CHECK_JOB,
                replace_existing=True, executor=DREAM_EXECUTOR)
        scheduler.start()
        return scheduler

    def _request_sweep(self) -> None:
        """The periodic safety sweep: the main loop's next check reads every database in
        full (changes that file events missed)."""
        self._full_sweep_requested = True
        self._poke.set()

    def _dream_job(self, trigger: str) -> None:
        """A dream check (``trigger``: ``catch-up`` at start, then ``auto``); a failure is
        logged and kept as ``last_error``, never ends the schedule."""
        try:
            self._dream_check(trigger)
        except Exception as exc:  # a bug must not end the dream checks
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("dream_check_crashed")

    def _dream_check(self, trigger: str) -> None:
        """Dream every scope whose gate is open (on the dream executor's thread; the
        project lock keeps its writes and an extraction's apart; stops between groups on
        shutdown)."""
        if self.stop_event.is_set() or self._llm_gate() is not None:
            return
        for outcome in self.service.dream_open_scopes(trigger=trigger,
                                                      should_stop=self.stop_event.is_set):
            if outcome.error is not None:
                self.last_error = outcome.error
            else:
                self.last_dream[outcome.scope] = iso_utc(self.clock())

    def _retention(self) -> None:
        """Delete recorded model answers older than ``KEEP_DAYS`` days (answers whose work
        never finished); a failure is logged and tried again at the next run."""
        before = iso_utc(self.clock() - timedelta(days=KEEP_DAYS))
        try:
            deleted = self.state.replies.forget_replies(before=before)
        except Exception as exc:  # the next run tries again
            log.warning("retention_failed", error=str(exc))
            return
        if deleted:
            log.info("retention_done", replies_deleted=deleted)
