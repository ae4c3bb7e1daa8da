"""The daemon's time-based work, run by its scheduler
(:mod:`opencode_memoryd.serve.runtime.daemon`): the periodic safety sweep, the dream checks
and the retention of recorded model answers.

Each is a job of an APScheduler ``BackgroundScheduler`` (coalesced, one instance at a time);
the sessions of the work queue are not jobs: the worker thread
(:mod:`opencode_memoryd.serve.runtime.jobs`) takes them from the state file.
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import TYPE_CHECKING

import structlog

from opencode_memoryd.llm.recorded import KEEP_DAYS
from opencode_memoryd.models import iso_utc

if TYPE_CHECKING:
    from collections.abc import Callable

    from apscheduler.schedulers.base import BaseScheduler

    from opencode_memoryd.serve.runtime.shared import DaemonState

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


class Timers:
    """The daemon's scheduled jobs (what they do, and the scheduler that runs them). A
    dream waits while LLM work is paused (the worker's gate).

    Args:
        shared: what the daemon's collaborators share.
        llm_wait: seconds before LLM work may run, or ``None`` when it may run now.
        request_sweep: asks the main loop for a full read of every database (the
            periodic safety sweep: changes that file events missed).
    """

    def __init__(self, shared: DaemonState, *, llm_wait: Callable[[], float | None],
                 request_sweep: Callable[[], None]) -> None:
        self.shared, self._llm_wait, self._request_sweep = shared, llm_wait, request_sweep
        #: the newest dream of each scope (``status``)
        self.last_dream: dict[str, str] = {}
        #: made by :meth:`start`, once commands are served
        self.scheduler: BaseScheduler | None = None

    def start(self, sweep_seconds: float) -> None:
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
        dream = self.shared.app.config.dream
        if dream.enabled:
            add(self._dream_job, "date", args=("catch-up",), id=DREAM_CATCH_UP_JOB,
                replace_existing=True, executor=DREAM_EXECUTOR)
            add(self._dream_job, "interval", args=("auto",),
                minutes=dream.check_interval_minutes, id=DREAM_CHECK_JOB,
                replace_existing=True, executor=DREAM_EXECUTOR)
        scheduler.start()
        self.scheduler = scheduler

    def shutdown(self) -> None:
        """Stop the scheduler (a job running goes on to its end on its own thread)."""
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def _dream_job(self, trigger: str) -> None:
        """A dream check (``trigger``: ``catch-up`` at start, then ``auto``); a failure is
        logged and kept as ``last_error``, never ends the schedule."""
        try:
            self._dream_check(trigger)
        except Exception as exc:  # a bug must not end the dream checks
            self.shared.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("dream_check_crashed")

    def _dream_check(self, trigger: str) -> None:
        """Dream every scope whose gate is open (on the dream executor's thread; the
        project lock keeps its writes and an extraction's apart; stops between groups on
        shutdown)."""
        if self.shared.stop_event.is_set() or self._llm_wait() is not None:
            return
        shared = self.shared
        for outcome in shared.service.dream_open_scopes(trigger=trigger,
                                                        should_stop=shared.stop_event.is_set):
            if outcome.error is not None:
                self.shared.last_error = outcome.error
            else:
                self.last_dream[outcome.scope] = iso_utc(self.shared.clock())

    def _retention(self) -> None:
        """Delete recorded model answers older than ``KEEP_DAYS`` days (answers whose work
        never finished); a failure is logged and tried again at the next run."""
        before = iso_utc(self.shared.clock() - timedelta(days=KEEP_DAYS))
        try:
            deleted = self.shared.state.replies.forget_replies(before=before)
        except Exception as exc:  # the next run tries again
            log.warning("retention_failed", error=str(exc))
            return
        if deleted:
            log.info("retention_done", replies_deleted=deleted)
