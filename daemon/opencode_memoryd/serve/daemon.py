"""``opencode-memoryd run``: tail OpenCode's databases and extract sessions as they go idle.

Lifecycle: single-instance lock → state file → store → commands served → capture code →
catch-up → watch, in the foreground (the supervisor supervises); systemd hears
``READY=1``, then ``WATCHDOG=1`` from the loop. Commands come first
(:mod:`opencode_memoryd.serve.commands`): what follows the socket steps aside for them.

Change detection (:mod:`opencode_memoryd.serve.sources`): file events on each database
folder are a hint, confirmed with ``PRAGMA data_version``; a periodic sweep re-reads the
session list anyway. A database that appears, vanishes or is replaced is followed.

Scheduling: each changed session is queued in the state file with its debounce due time
(:mod:`opencode_memoryd.debounce`). One worker thread (:mod:`opencode_memoryd.serve.jobs`)
takes the due sessions from the queue, soonest first, and sleeps until just after the next
due time or until the main loop queues something due sooner; so one session is never
extracted twice at once, and the queue costs no memory per session beyond its row.
Time-based work runs on an APScheduler ``BackgroundScheduler``
(:mod:`opencode_memoryd.serve.timed`; jobs coalesced, one instance at a time): the periodic
safety sweep, the dream checks (at start, then every ``dream.check_interval_minutes``) on an
executor thread of their own, so a dream waiting for its model never holds back an
extraction, and the retention of recorded model answers. A per-project lock keeps
extractions and dreams of one project apart (also those asked on the control socket).

Threads: the main loop (change detection, watchdog), the worker (extractions), the scheduler
and its executors (dreams; sweep, retention), the file watcher, the control server and the
web page (``[web] enabled``); each sleeps until it has something to do.

Stopping: SIGTERM or SIGINT stops within 10 s at any point. A dream checks the stop signal
between scopes and between groups; work still running after :data:`SHUTDOWN_GRACE_SECONDS`
(an LLM call in flight) is abandoned, as by a crash it survives: the next start resumes it.

Outages: retryable LLM failures back off per session (``Retry-After``) behind a circuit
breaker; 401/403/404 pause LLM work with a status saying why; a token budget defers work.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from filelock import FileLock, Timeout

from opencode_memoryd import __version__

# imported here, before any worker thread starts: a module one thread is importing is seen
# half-initialised by another
from opencode_memoryd.capture.gate import GateSettings, LlmGate
from opencode_memoryd.compose import DAEMON_INFO_FILE, App
from opencode_memoryd.config.loader import config_digest
from opencode_memoryd.disk import PRIVATE_UMASK, make_private
from opencode_memoryd.errors import AlreadyRunning, MemorydError, StoreInUseError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.serve.alerts import Alerts
from opencode_memoryd.serve.commands import CommandServing
from opencode_memoryd.serve.control_server import ControlServer
from opencode_memoryd.serve.mcp_host import MCPHost
from opencode_memoryd.serve.notify import sd_notify
from opencode_memoryd.serve.own_writes import OwnWrites
from opencode_memoryd.serve.signals import StopSignals
from opencode_memoryd.serve.sources import SourceTracking, TrackedSource
from opencode_memoryd.serve.timed import DREAM_EXECUTOR, TimedWork
from opencode_memoryd.serve.web_host import WebPage, start_web_page
from opencode_memoryd.source.watcher import DbWatcher
from opencode_memoryd.state.queue import GIVE_UP_ATTEMPTS
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.reembed import migrate_store
from opencode_memoryd.usecases.service import Service

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

log = structlog.get_logger(__name__)

LOCK_FILE_NAME = "daemon.lock"
#: How often the main loop wakes at the latest (also the systemd watchdog ping interval).
MAX_LOOP_SECONDS = 10.0
#: How long shutdown waits (s, from the signal) for the work in progress before abandoning it.
SHUTDOWN_GRACE_SECONDS = 7.0
#: How long start-up waits (s) for a one-shot command to release the embedded store.
STORE_WAIT_SECONDS = 60.0
#: Thread switch interval (s): a command waits for the interpreter after each of its reads
#: behind a catch-up's Python work (with the default 5 ms, a ``status`` took 100 ms+).
SWITCH_INTERVAL_SECONDS = 0.001
#: The main loop waits at least this long (s) between two checks of the databases ...
MIN_CHECK_INTERVAL_SECONDS = 0.1
#: ... and at least this many times the duration of the previous check.
CHECK_COST_FACTOR = 4.0
#: Sessions listed in ``status`` (``pending_count`` has them all).
STATUS_PENDING_LIMIT = 20


class Daemon(CommandServing, SourceTracking, TimedWork):
    """The long-running process behind ``opencode-memoryd run``.

    ``state``, ``store``, ``extractor``, ``summarizer`` and ``service`` exist once :meth:`start` has
    opened them.

    Args:
        app: the configured application (paths, adapters).
        clock: the current aware UTC time; injectable for tests.
    """

    def __init__(self, app: App, *, clock: Callable[[], datetime] | None = None) -> None:
        self.app = app
        self.cfg = app.config.daemon
        self.clock = clock or (lambda: datetime.now(UTC))
        self.stop_event = threading.Event()
        self._capture_loaded = threading.Event()  # see CAPTURE_ROUTES
        self._poke = threading.Event()
        self._sources: dict[str, TrackedSource] = {}
        self._project_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._polling = False
        cfg = self.cfg
        self.gate = LlmGate(GateSettings(
            daily_token_budget=cfg.daily_token_budget,
            auth_pause_seconds=cfg.auth_pause_seconds,
            circuit_failure_threshold=cfg.circuit_failure_threshold,
            circuit_cooldown_seconds=cfg.circuit_cooldown_seconds),
            enabled=app.extraction_mode() == "llm", clock=self.clock)
        self.started_at: datetime | None = None
        self.last_error: str | None = None
        self.alerts = Alerts(self.clock)
        self.last_extraction: dict[str, dict[str, Any]] = {}
        self._config_digest = config_digest(app.config_path)  # see status()["config_changed"]
        #: the first full pass over the databases (start-up catch-up) is done
        self.caught_up = False
        self._lock: FileLock | None = None
        self._watcher: DbWatcher | None = None
        self._control: ControlServer | None = None
        self._web: WebPage | None = None
        self._mcp: MCPHost | None = None  # the hosted MCP server
        self.service: Service
        self.last_dream: dict[str, str] = {}
        #: what the start-up re-embedding for the local model did ({} when none was needed)
        self.migration: dict[str, Any] | None = None
        self._work_wake = threading.Event()
        self.own_writes = OwnWrites()
        self.scheduler: BaseScheduler | None = None  # made once commands are served

    # -- start-up ---------------------------------------------------------------------

    def acquire_lock(self) -> None:
        """Take the single-instance lock (a kernel ``flock`` on ``daemon.lock``).

        Raises:
            AlreadyRunning: another daemon holds it; the message names its pid.
        """
        state_dir = self.app.state_dir
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = state_dir / LOCK_FILE_NAME
        lock = FileLock(str(path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            pid = (state_dir / "daemon.pid").read_text().strip() if (
                state_dir / "daemon.pid").exists() else "?"
            raise AlreadyRunning(
                f"another opencode-memoryd daemon is already running (pid {pid}, lock "
                f"{path}); stop it first, or use `opencode-memoryd status`") from None
        (state_dir / "daemon.pid").write_text(f"{os.getpid()}\n")
        make_private(state_dir, ("daemon.*",))
        self._lock = lock

    def start(self) -> None:
        """Lock, open state and store, serve commands, start the worker and watching.

        Commands are served as soon as the state file and the store are open and a dream a
        crash interrupted mid-apply is finished (nothing half applied is ever served); then
        the capture code is loaded (extractor, summarizer), the main loop's first pass (a
        full one) queues what changed while the daemon was away, and the worker resumes
        what was queued before a restart. Each step lets a command being served go first
        (:meth:`step_aside`).
        """
        self.acquire_lock()
        self.started_at = self.clock()
        self.state = self.app.open_state()
        self.store = self._open_store()
        # the extractor and summarizer are built by the service on first use: a command
        # served before the next lines run builds them itself
        self.service = Service(self.app, self.state, self.store, lock_for=self.project_lock,
                               daemon_status=self.status)
        # a dream a crash left half applied is finished before anything is served
        self.service.recover_dreams()
        self._start_control()
        log.info("daemon_started", version=__version__, pid=os.getpid(),
                 mode=self.app.extraction_mode(),
                 quiet_period_seconds=self.cfg.quiet_period_seconds,
                 max_wait_seconds=self.cfg.max_wait_seconds)
        self._full_sweep_requested = True
        self._poke.set()
        self.step_aside()
        # loaded on this thread alone (the CAPTURE_ROUTES wait for it): two threads
        # importing one graph of modules can see a module half-initialised
        import opencode_memoryd.capture.batching
        import opencode_memoryd.capture.processor
        import opencode_memoryd.capture.runner  # noqa: F401

        self.extractor = self.service.extractor
        self.summarizer = self.service.summarizer
        self._capture_loaded.set()
        self._web = start_web_page(self.service, self.app)
        self.step_aside()
        self._start_watcher()
        self._start_worker()
        self.step_aside()
        self._start_scheduler()

    def _open_store(self) -> MemoryStore:
        """Open the store; while a one-shot command (``list``, ``maintain`` …) started
        before the daemon still holds the embedded store, wait for it, up to
        ``STORE_WAIT_SECONDS``. A store built BM25-only is first re-embedded for the
        local model (:func:`~opencode_memoryd.usecases.reembed.migrate_store`; commands
        are served once it is done).

        Raises:
            StoreInUseError: still held after that (another daemon, or a long command).
        """
        deadline = time.monotonic() + STORE_WAIT_SECONDS
        warned = False
        while True:
            try:
                if self.migration is None:
                    self.migration = migrate_store(self.app, progress=_migration_progress) or {}
                return self.app.open_store()
            except StoreInUseError as exc:
                if time.monotonic() >= deadline or self.stop_event.is_set():
                    raise
                if not warned:
                    log.warning("store_busy_waiting", error=str(exc),
                                wait_seconds=STORE_WAIT_SECONDS)
                    warned = True
                self.stop_event.wait(0.25)

    # -- time-based work --------------------------------------------------------------

    def _start_scheduler(self) -> None:
        """Start the timed work (:meth:`~opencode_memoryd.serve.timed.TimedWork._schedule`)."""
        self.scheduler = self._schedule(self.cfg.sweep_interval_seconds)

    # -- main loop --------------------------------------------------------------------

    _full_sweep_requested = False

    def run_forever(self) -> None:
        """The main loop: wait for a change hint (or a timeout), confirm, queue, ping.

        Checks are spaced by at least ``CHECK_COST_FACTOR`` times the last one's duration
        (and ``MIN_CHECK_INTERVAL_SECONDS``; a full sweep is not counted): while OpenCode
        streams, the hints that arrive meanwhile are served by one check, so checking never
        takes more than about 1 / (1 + ``CHECK_COST_FACTOR``) of a core, whatever the size
        of the database.
        """
        sd_notify("READY=1\nSTATUS=watching OpenCode databases")
        next_check = 0.0
        while not self.stop_event.is_set():
            # never sleep past half of systemd's 60 s watchdog interval
            timeout = (min(self.cfg.poll_interval_seconds, MAX_LOOP_SECONDS)
                       if self._polling else MAX_LOOP_SECONDS)
            scan = self.next_update_scan()
            if scan is not None:
                timeout = min(timeout, scan - time.monotonic())
            if timeout > 0:
                self._poke.wait(timeout=timeout)
            wait = next_check - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                break
            self._poke.clear()
            if self.stop_event.is_set():
                break
            self.step_aside()
            full, self._full_sweep_requested = self._full_sweep_requested, False
            started, scanned = time.monotonic(), self.scan_seconds
            try:
                queued = self.check_sources(full=full)
                if not self.caught_up and not self.stop_event.is_set():
                    self.caught_up = True
                    log.info("catch_up_queued", sessions=queued,
                             seconds=round(time.monotonic() - started, 3))
            except (MemorydError, OSError) as exc:
                self.last_error = str(exc)
                log.warning("check_failed", error=str(exc))
            ended = time.monotonic()
            # a full sweep (every few minutes) and a scan for in-place updates (every few
            # seconds) do not hold back the next change
            spent = ended - started - (self.scan_seconds - scanned)
            cost = 0.0 if full else CHECK_COST_FACTOR * spent
            next_check = ended + max(MIN_CHECK_INTERVAL_SECONDS, cost)
            sd_notify("WATCHDOG=1")

    def shutdown(self) -> bool:
        """Stop watching and scheduling; wait briefly for the extraction or dream in
        progress.

        Work still running after the grace period (counted from the call) is abandoned:
        an extraction's outbox item (or its unmoved mark) makes the next start resume it,
        a dream still planning changed nothing.

        Returns:
            Whether work was abandoned (a worker thread is still running).
        """
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        self.stop_event.set()
        self._capture_loaded.set()  # a route still waiting for it fails fast now
        self._poke.set()
        sd_notify("STOPPING=1")
        if self._watcher is not None:
            self._watcher.stop()
        if self._mcp is not None:
            self._mcp.close()
        if self._control is not None:
            self._control.close(wait_seconds=2)
            (self.app.state_dir / DAEMON_INFO_FILE).unlink(missing_ok=True)
        if self._web is not None:
            self._web.stop()
        self._work_wake.set()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        threads = [t for t in threading.enumerate()
                   if t is self._worker or t.name.startswith((DREAM_EXECUTOR, "timed"))]
        threads = [t for t in threads if t is not threading.current_thread()]
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        busy = any(t.is_alive() for t in threads)
        if not busy:
            for src in self._sources.values():
                src.db.close()
            if getattr(self, "service", None) is not None:
                self.service.close()
            for opened in (getattr(self, "store", None), getattr(self, "state", None)):
                if opened is not None:  # start() may have failed before opening it
                    opened.close()
        if self._lock is not None:
            (self.app.state_dir / "daemon.pid").unlink(missing_ok=True)
            self._lock.release()
        log.info("daemon_stopped", abandoned_work=busy)
        return busy

    def status(self) -> dict[str, Any]:
        """What ``status`` shows while the daemon runs (JSON-safe)."""
        now = self.clock()
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return {
            "running": True,
            "pid": os.getpid(),
            "catching_up": not self.caught_up,
            "since": iso_utc(self.started_at) if self.started_at else None,
            "databases": [{"path": str(s.path), "schema": s.db.schema.describe()}
                          for s in self._sources.values()],
            "change_detection": "polling" if self._polling else "file events",
            "pending": [{"session_id": r["session_id"],
                         "due": iso_utc(datetime.fromtimestamp(r["due_ms"] / 1000, tz=UTC)),
                         "attempts": r["attempts"], "last_error": r["last_error"]}
                        for r in self.state.queue(limit=STATUS_PENDING_LIMIT)],
            "pending_count": self.state.queue_size(),
            "failing": self._failing(),
            "last_extraction": self.last_extraction,
            "paused": self.gate.status(),
            "tokens_today": self.state.tokens_since(iso_utc(midnight)),
            "last_dream": self.last_dream,
            "last_error": self.last_error,
            "alerts": self.alerts.active(),
            "web": self._web.url if self._web is not None else None,
            "store_migration": self.migration or None,
            "config_changed": config_digest(self.app.config_path) != self._config_digest,
        }

    def _failing(self) -> dict[str, Any]:
        """Sessions whose last attempts failed: ``{count, given_up, sessions[]}``."""
        count, rows = self.state.queue_failing()
        sessions = [{"session_id": r["session_id"], "attempts": r["attempts"],
                     "last_error": r["last_error"],
                     "given_up": r["attempts"] >= GIVE_UP_ATTEMPTS} for r in rows]
        return {"count": count, "given_up": sum(s["given_up"] for s in sessions),
                "sessions": sessions}


def _migration_progress(done: int, total: int) -> None:
    """Tell systemd the start-up re-embedding is progressing (each batch extends its start
    timeout by a minute: a large store takes longer than ``TimeoutStartSec``)."""
    sd_notify(f"EXTEND_TIMEOUT_USEC=60000000\nSTATUS=re-embedding memories: {done}/{total}")


def run(app: App) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; return the exit code.

    Raises:
        AlreadyRunning: another daemon holds the lock.
        StateError, StoreError, ConfigError: start-up failed.
    """
    os.umask(PRIVATE_UMASK)  # what the daemon writes is its user's alone
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    daemon = Daemon(app)

    def _stop(name: str) -> None:
        log.info("signal_received", signal=name)
        daemon.stop_event.set()
        daemon._poke.set()

    with StopSignals(_stop):
        try:
            daemon.start()
            daemon.run_forever()
        finally:
            abandoned = daemon.shutdown()
    if abandoned:
        # a worker is still in a call (an LLM answer): the interpreter would wait for it
        # at exit; its work is crash-safe and resumes at the next start
        logging.shutdown()
        os._exit(0)
    return 0
