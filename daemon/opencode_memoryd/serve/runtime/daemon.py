"""``opencode-memoryd run``: tail OpenCode's databases and extract sessions as they go idle.

Lifecycle: single-instance lock → state file → store → commands served → capture code →
catch-up → watch, in the foreground (the supervisor supervises); systemd hears
``READY=1``, then ``WATCHDOG=1`` from the loop. Commands come first
(:mod:`opencode_memoryd.serve.runtime.commands`): what follows the socket steps aside for them.

Collaborators: the daemon is a command host
(:mod:`~opencode_memoryd.serve.runtime.commands`), a source tracker
(:mod:`~opencode_memoryd.serve.runtime.sources`), a worker
(:mod:`~opencode_memoryd.serve.runtime.jobs`) with its LLM gate
(:mod:`~opencode_memoryd.capture.gate`) and the timed work
(:mod:`~opencode_memoryd.serve.runtime.timed`), each built with what it needs and sharing
one :class:`~opencode_memoryd.serve.runtime.shared.DaemonState`; this module starts
them in order, runs the main loop and stops them.

Change detection (:mod:`opencode_memoryd.serve.runtime.sources`): file events on each database
folder are a hint, confirmed with ``PRAGMA data_version``; a periodic sweep re-reads the
session list anyway. A database that appears, vanishes or is replaced is followed.

Scheduling: each changed session is queued in the state file with its debounce due time
(:mod:`opencode_memoryd.debounce`). One worker thread (:mod:`opencode_memoryd.serve.runtime.jobs`)
takes the due sessions from the queue, soonest first, and sleeps until just after the next
due time or until the main loop queues something due sooner; so one session is never
extracted twice at once, and the queue costs no memory per session beyond its row.
Time-based work runs on an APScheduler ``BackgroundScheduler``
(:mod:`opencode_memoryd.serve.runtime.timed`; jobs coalesced, one instance at a time): the periodic
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
import signal
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
from opencode_memoryd.compose import App
from opencode_memoryd.disk import PRIVATE_UMASK, make_private
from opencode_memoryd.errors import AlreadyRunning, MemorydError, StoreInUseError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.serve.runtime.alerts import Alerts
from opencode_memoryd.serve.runtime.commands import CommandHost
from opencode_memoryd.serve.runtime.jobs import Worker
from opencode_memoryd.serve.runtime.notify import sd_notify
from opencode_memoryd.serve.runtime.reload import (
    CHECK_INTERVAL_SECONDS,
    ConfigWatch,
    block_hangup,
    store_change,
)
from opencode_memoryd.serve.runtime.shared import DaemonState
from opencode_memoryd.serve.runtime.signals import StopSignals
from opencode_memoryd.serve.runtime.sources import SourceTracker
from opencode_memoryd.serve.runtime.timed import DREAM_EXECUTOR, Timers
from opencode_memoryd.serve.runtime.web_host import WebPage, start_web_page
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.reembed import migrate_store
from opencode_memoryd.usecases.service import Service

if TYPE_CHECKING:
    from opencode_memoryd.state.db import StateDB

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


class Daemon:
    """The long-running process behind ``opencode-memoryd run``: its collaborators (the
    command host, the source tracker, the worker, the timed work) sharing one
    :class:`~opencode_memoryd.serve.runtime.shared.DaemonState`, and the main loop.

    ``state``, ``store`` and ``service`` exist once :meth:`start` has opened them.

    Args:
        app: the configured application (paths, adapters).
        clock: the current aware UTC time; injectable for tests.
    """

    def __init__(self, app: App, *, clock: Callable[[], datetime] | None = None) -> None:
        self.app = app
        self.cfg = cfg = app.config.daemon
        self.clock = clock or (lambda: datetime.now(UTC))
        self.shared = shared = DaemonState(app, self.clock)
        self.stop_event = shared.stop_event  # set by SIGTERM/SIGINT: every loop ends
        self.alerts = Alerts(self.clock)
        gate = LlmGate(GateSettings(
            daily_token_budget=cfg.daily_token_budget,
            auth_pause_seconds=cfg.auth_pause_seconds,
            circuit_failure_threshold=cfg.circuit_failure_threshold,
            circuit_cooldown_seconds=cfg.circuit_cooldown_seconds),
            enabled=app.extraction_mode() == "llm", clock=self.clock)
        self.worker = Worker(shared, gate)
        self.commands = CommandHost(shared, wake_worker=self.worker.wake)
        self.tracker = SourceTracker(shared, self.alerts, wake_worker=self.worker.wake)
        self.timers = Timers(shared, llm_wait=self.worker.llm_wait,
                             request_sweep=self.request_sweep)
        self.started_at: datetime | None = None
        #: the config file edited under the daemon (see status()["config_changed"])
        self.config_watch = ConfigWatch(app.config_path, app.env,
                                        refuse=store_change(app.config))
        #: the daemon stops to start again in place (its config file changed, or SIGHUP)
        self.restart_requested = False
        self._hangup = False
        self._lock: FileLock | None = None
        self._web: WebPage | None = None
        #: what the start-up re-embedding for the local model did ({} when none was needed)
        self.migration: dict[str, Any] | None = None
        #: the main loop's next check reads every database in full
        self._full_sweep_requested = False

    @property
    def state(self) -> StateDB:
        """The state file (once opened)."""
        return self.shared.state

    @state.setter
    def state(self, value: StateDB) -> None:
        self.shared.state = value

    @property
    def store(self) -> MemoryStore:
        """The memory store (once opened)."""
        return self.shared.store

    @store.setter
    def store(self, value: MemoryStore) -> None:
        self.shared.store = value

    @property
    def service(self) -> Service:
        """The use cases (once the state file and the store are open)."""
        return self.shared.service

    @service.setter
    def service(self, value: Service) -> None:
        self.shared.service = value

    def request_sweep(self) -> None:
        """Ask the main loop for a full read of every database (the periodic safety sweep:
        changes that file events missed)."""
        self._full_sweep_requested = True
        self.shared.poke.set()

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
        self.service = Service(self.app, self.state, self.store, lock_for=self.worker.project_lock,
                               daemon_status=self.status)
        # a dream a crash left half applied is finished before anything is served
        self.service.recover_dreams()
        self.commands.start(self.started_at)
        log.info("daemon_started", version=__version__, pid=os.getpid(),
                 mode=self.app.extraction_mode(),
                 quiet_period_seconds=self.cfg.quiet_period_seconds,
                 max_wait_seconds=self.cfg.max_wait_seconds)
        self.request_sweep()
        self.shared.step_aside()
        # loaded on this thread alone (the CAPTURE_ROUTES wait for it): two threads
        # importing one graph of modules can see a module half-initialised
        import opencode_memoryd.capture.batching
        import opencode_memoryd.capture.processor
        import opencode_memoryd.capture.runner  # noqa: F401

        self.worker.extractor = self.service.extractor
        self.worker.summarizer = self.service.summarizer
        self.shared.capture_loaded.set()
        self._web = start_web_page(self.service, self.app)
        self.shared.step_aside()
        self.tracker.start_watcher()
        self.worker.start()
        self.shared.step_aside()
        self.timers.start(self.cfg.sweep_interval_seconds)

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

    # -- main loop --------------------------------------------------------------------

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
                       if self.tracker.polling else MAX_LOOP_SECONDS)
            scan = self.tracker.next_update_scan()
            if scan is not None:
                timeout = min(timeout, scan - time.monotonic())
            if timeout > 0 and self._wait_for_poke(timeout):
                break
            wait = next_check - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                break
            self.shared.poke.clear()
            if self.stop_event.is_set():
                break
            self.shared.step_aside()
            full, self._full_sweep_requested = self._full_sweep_requested, False
            started, scanned = time.monotonic(), self.tracker.scan_seconds
            try:
                queued = self.tracker.check_sources(full=full)
                if not self.shared.caught_up and not self.stop_event.is_set():
                    self.shared.caught_up = True
                    log.info("catch_up_queued", sessions=queued,
                             seconds=round(time.monotonic() - started, 3))
            except (MemorydError, OSError) as exc:
                self.shared.last_error = str(exc)
                log.warning("check_failed", error=str(exc))
            ended = time.monotonic()
            # a full sweep (every few minutes) and a scan for in-place updates (every few
            # seconds) do not hold back the next change
            spent = ended - started - (self.tracker.scan_seconds - scanned)
            cost = 0.0 if full else CHECK_COST_FACTOR * spent
            next_check = ended + max(MIN_CHECK_INTERVAL_SECONDS, cost)
            sd_notify("WATCHDOG=1")

    def _wait_for_poke(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a poke, looking at the config file every
        :data:`~opencode_memoryd.serve.runtime.reload.CHECK_INTERVAL_SECONDS`; whether the
        main loop ends to restart in place."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            poked = self.shared.poke.wait(timeout=max(0.0, min(left, CHECK_INTERVAL_SECONDS)))
            if self._config_edited():
                return True
            if poked or left <= CHECK_INTERVAL_SECONDS:
                return False

    def hangup(self) -> None:
        """SIGHUP: take up the config file now (restart in place when it validates)."""
        self._hangup = True
        self.shared.poke.set()

    def _config_edited(self) -> bool:
        """Whether the main loop ends to restart in place: SIGHUP or an edited config file
        that validates (:class:`~opencode_memoryd.serve.runtime.reload.ConfigWatch`)."""
        hangup, self._hangup = self._hangup, False
        if not hangup and not self.config_watch.due():
            return False
        if self.config_watch.check() or (hangup and self.config_watch.error is None):
            self.restart_requested = True
            self.stop_event.set()
            return True
        return False

    def _notify_stopping(self) -> None:
        """Tell systemd the daemon stops, or restarts in place (it then waits for the new
        image's READY=1)."""
        if self.restart_requested:
            # the new image has its start's time again (the watchdog runs on while systemd
            # waits for its READY=1)
            sd_notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}"
                      f"\nEXTEND_TIMEOUT_USEC={RESTART_TIMEOUT_SECONDS * 1_000_000}"
                      "\nSTATUS=restarting to take up the edited config file")
        else:
            sd_notify("STOPPING=1")

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
        self.shared.capture_loaded.set()  # a route still waiting for it fails fast now
        self.shared.poke.set()
        self._notify_stopping()
        if self.tracker.watcher is not None:
            self.tracker.watcher.stop()
        self.commands.close()
        if self._web is not None:
            self._web.stop()
        self.worker.wake()
        self.timers.shutdown()
        threads = [t for t in threading.enumerate()
                   if t is self.worker.thread or t.name.startswith((DREAM_EXECUTOR, "timed"))]
        threads = [t for t in threads if t is not threading.current_thread()]
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        busy = any(t.is_alive() for t in threads)
        if not busy:
            for src in self.shared.sources.values():
                src.db.close()
            shared = self.shared
            if getattr(shared, "service", None) is not None:
                self.service.close()
            for opened in (getattr(shared, "store", None), getattr(shared, "state", None)):
                if opened is not None:  # start() may have failed before opening it
                    opened.close()
        if self._lock is not None:
            (self.app.state_dir / "daemon.pid").unlink(missing_ok=True)
            self._lock.release()
        log.info("daemon_stopped", abandoned_work=busy)
        return busy

    def status(self) -> dict[str, Any]:
        """What ``status`` shows while the daemon runs (JSON-safe)."""
        return {
            "running": True,
            "pid": os.getpid(),
            "catching_up": not self.shared.caught_up,
            "since": iso_utc(self.started_at) if self.started_at else None,
            **self.tracker.status(),
            **self.worker.status(),
            "last_dream": self.timers.last_dream,
            "last_error": self.shared.last_error,
            "alerts": self.alerts.active(),
            "web": self._web.url if self._web is not None else None,
            "store_migration": self.migration or None,
            "config_changed": self.config_watch.changed,
            "config_error": self.config_watch.error,
        }


def _migration_progress(done: int, total: int) -> None:
    """Tell systemd the start-up re-embedding is progressing (each batch extends its start
    timeout by a minute: a large store takes longer than ``TimeoutStartSec``)."""
    sd_notify(f"EXTEND_TIMEOUT_USEC=60000000\nSTATUS=re-embedding memories: {done}/{total}")


#: Seconds systemd gives a restart in place before it deems the daemon hung (its
#: ``TimeoutStartSec``).
RESTART_TIMEOUT_SECONDS = 120
#: What :func:`run` returns when the daemon stopped to start again in place.
RESTART = -1


def run(app: App) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; return the exit code, or
    :data:`RESTART` when it stopped to take up its edited config file (or on SIGHUP): the
    caller then starts it again in place
    (:func:`~opencode_memoryd.serve.runtime.reload.restart_in_place`).

    Raises:
        AlreadyRunning: another daemon holds the lock.
        StateError, StoreError, ConfigError: start-up failed.
    """
    os.umask(PRIVATE_UMASK)  # what the daemon writes is its user's alone
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    daemon = Daemon(app)

    def _stop(name: str) -> None:
        log.info("signal_received", signal=name)
        if name == "SIGHUP":
            daemon.hangup()
            return
        daemon.stop_event.set()
        daemon.shared.poke.set()

    with StopSignals(_stop, (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)):
        try:
            daemon.start()
            daemon.run_forever()
        finally:
            abandoned = daemon.shutdown()
            if daemon.restart_requested:  # before the default action is back
                block_hangup()
    if daemon.restart_requested:
        return RESTART  # the threads still in a call end with the process image
    if abandoned:
        # a worker is still in a call (an LLM answer): the interpreter would wait for it
        # at exit; its work is crash-safe and resumes at the next start
        logging.shutdown()
        os._exit(0)
    return 0
