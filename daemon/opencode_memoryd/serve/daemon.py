"""``opencode-memoryd run``: tail OpenCode's databases and extract sessions as they go idle.

Lifecycle: single-instance lock → state file → store → catch-up → watch. The process stays
in the foreground (the supervisor supervises) and tells systemd ``READY=1`` once started
and ``WATCHDOG=1`` from its main loop.

Change detection (docs/reliability.md §0, §5): watchfiles events on each database folder
are a latency hint; every wake-up confirms with ``PRAGMA data_version`` before any query,
and a periodic sweep re-reads the session list anyway. A database that appears later, is
deleted, or is replaced by another file (new inode) is reopened without a restart.

Scheduling: each changed session is queued in the state file with its debounce due time
(:mod:`opencode_memoryd.debounce`) and gets one APScheduler job (id ``session:<db>:<id>``,
replaced on every change). Jobs run on one worker thread, so one session is never extracted
twice at once; a per-project lock keeps extractions (and, later, dreams) of one project
apart, including those asked for through the control endpoint.

Outages: retryable LLM failures back off per session (honouring ``Retry-After``) behind a
circuit breaker; 401/403/404 pause all LLM work with a status saying why; a daily token
budget defers work instead of spending past it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from filelock import FileLock, Timeout

from opencode_memoryd import __version__
from opencode_memoryd.capture.processor import SessionProcessor
from opencode_memoryd.compose import DAEMON_INFO_FILE, App
from opencode_memoryd.debounce import backoff_seconds
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import AlreadyRunning, MemorydError, SourceError, StoreInUseError
from opencode_memoryd.models import iso_utc, scope_project

# imported here, before any worker thread starts: a module one thread is importing is seen
# half-initialised by another
from opencode_memoryd.serve.control import ControlServer, socket_path
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.watcher import DbWatcher

log = structlog.get_logger(__name__)

LOCK_FILE_NAME = "daemon.lock"
#: How often the main loop wakes at the latest (also the systemd watchdog ping interval).
MAX_LOOP_SECONDS = 10.0
#: How long shutdown waits for the extraction in progress before abandoning it.
SHUTDOWN_GRACE_SECONDS = 7.0
#: Between full sweeps, re-read sessions updated this long (ms) before the newest
#: ``time_updated`` seen: a commit can land after a later-stamped one (OpenCode waits up
#: to 5 s for the write lock).
CHANGE_LOOKBACK_MS = 120_000
#: Sessions queued per state-file transaction during a check.
QUEUE_BATCH = 500
#: How long start-up waits (s) for a one-shot command to release the embedded store.
STORE_WAIT_SECONDS = 60.0
#: The main loop waits at least this long (s) between two checks of the databases ...
MIN_CHECK_INTERVAL_SECONDS = 0.02
#: ... and at least this many times the duration of the previous check.
CHECK_COST_FACTOR = 4.0




def sd_notify(message: str) -> bool:
    """Send a systemd notification (``READY=1``, ``WATCHDOG=1``, ``STATUS=…``).

    Implements the documented datagram protocol of ``sd_notify(3)`` on ``$NOTIFY_SOCKET``
    (a path, or an abstract socket when it starts with ``@``). Returns ``False`` when not
    run by systemd.
    """
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    target = "\0" + addr[1:] if addr.startswith("@") else addr
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(target)
            s.sendall(message.encode())
    except OSError:
        return False
    return True


@dataclass
class _Source:
    path: Path
    db: OpenCodeDB
    inode: tuple[int, int]
    data_version: int
    seen: dict[str, int] = field(default_factory=dict)  # session id -> time_updated
    high_water: int | None = None  # newest session.time_updated seen (ms)


@dataclass
class Pause:
    """Why LLM work is paused, and until when (aware UTC)."""

    reason: str
    until: datetime


class Daemon:
    """The long-running process behind ``opencode-memoryd run``.

    Args:
        app: the configured application (paths, adapters).
        clock: the current aware UTC time; injectable for tests.
    """

    def __init__(self, app: App, *, clock: Callable[[], datetime] | None = None) -> None:
        self.app = app
        self.cfg = app.config.daemon
        self.clock = clock or (lambda: datetime.now(UTC))
        self.stop_event = threading.Event()
        self._poke = threading.Event()
        self._sources: dict[str, _Source] = {}
        self._project_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._polling = False
        self._consecutive_failures = 0
        self.pause: Pause | None = None
        self.started_at: datetime | None = None
        self.last_error: str | None = None
        self.last_extraction: dict[str, dict[str, Any]] = {}
        #: the first full pass over the databases (start-up catch-up) is done
        self.caught_up = False
        self._lock: FileLock | None = None
        self._watcher: DbWatcher | None = None
        self._control: Any = None
        self.journal: Any = None
        self.dreamer: Any = None
        self.last_dream: dict[str, str] = {}
        self.state: Any = None
        self.store: Any = None
        self.extractor: Any = None
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )

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
        self._lock = lock

    def start(self) -> None:
        """Lock, open state and store, catch up, start watching and scheduling."""
        self.acquire_lock()
        self.started_at = self.clock()
        self.state = self.app.open_state()
        self.store = self._open_store()
        self.extractor = self.app.build_extractor()
        log.info("daemon_started", version=__version__, pid=os.getpid(),
                 mode=self.app.extraction_mode(), quiet_period_seconds=self.cfg.quiet_period_seconds,
                 max_wait_seconds=self.cfg.max_wait_seconds)
        self.scheduler.start()
        # re-arm what was queued before a restart; the main loop's first pass (a full
        # one) catches up on everything else, while status and commands are served
        for row in self.state.queue():
            self._arm(row["source_id"], row["session_id"], int(row["due_ms"]))
        self._full_sweep_requested = True
        self._poke.set()
        self._start_watcher()
        self.scheduler.add_job(self._safety_sweep, "interval",
                               seconds=self.cfg.sweep_interval_seconds, id="sweep",
                               replace_existing=True)
        self._start_dreams()
        self._start_control()

    def _open_store(self) -> Any:
        """Open the store; while a one-shot command (``list``, ``maintain`` …) started
        before the daemon still holds the embedded store, wait for it, up to
        ``STORE_WAIT_SECONDS``.

        Raises:
            StoreInUseError: still held after that (another daemon, or a long command).
        """
        deadline = time.monotonic() + STORE_WAIT_SECONDS
        warned = False
        while True:
            try:
                return self.app.open_store()
            except StoreInUseError as exc:
                if time.monotonic() >= deadline or self.stop_event.is_set():
                    raise
                if not warned:
                    log.warning("store_busy_waiting", error=str(exc),
                                wait_seconds=STORE_WAIT_SECONDS)
                    warned = True
                self.stop_event.wait(0.25)

    # -- dreams -----------------------------------------------------------------------

    def _start_dreams(self) -> None:
        """Finish dreams a crash interrupted, then schedule the gate check (and catch-up)."""
        self.journal = DreamJournal(self.app.journal_path)
        self.dreamer = self.app.build_dreamer(self.state, self.store)
        for run_id in self.dreamer.recover():
            log.warning("dream_recovered", run_id=run_id)
            result = self.dreamer.result_of(run_id)
            if result is not None:
                self.journal.append(dict(result.to_journal()))
        if not self.app.config.dream.enabled:
            return
        self.scheduler.add_job(self._dream_check, "date", args=("catch-up",),
                               id="dream-catch-up", replace_existing=True)
        self.scheduler.add_job(self._dream_check, "interval", args=("auto",),
                               minutes=self.app.config.dream.check_interval_minutes,
                               id="dream-check", replace_existing=True)

    def _dream_check(self, trigger: str) -> None:
        """Dream every scope whose gate is open (runs on the single job thread, so never
        beside an extraction job; the project lock keeps control-endpoint work apart)."""
        if self.stop_event.is_set() or self._llm_gate() is not None:
            return
        for project_key, project_root in self.app.dream_scopes(self.store).items():
            is_open, why = self.app.dream_gate(self.journal, self.store, project_key)
            if not is_open:
                log.debug("dream_gate_closed", project=project_key or "user", reason=why)
                continue
            try:
                with self.project_lock(project_key or "user"):
                    self.app.run_dream(self.dreamer, self.journal, project_key, project_root,
                                       trigger=trigger)
            except Exception as exc:  # one scope's failure must not end the others' dreams
                self.last_error = f"dream of {project_key or 'user'}: {exc}"
                log.exception("dream_crashed", project=project_key or "user")
                continue
            self.last_dream[project_key or "user"] = iso_utc(self.clock())

    def dream_now(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A forced dream (or undo) asked for through the control endpoint."""
        if payload.get("undo"):
            run_id = str(payload["undo"])
            row = self.state.dream_run(run_id)
            project = scope_project(str(row["scope_key"])) if row else None
            # the undo rewrites memories of the run's scope: keep its extraction out
            with self.project_lock(project or "user"):
                entry = dict(self.dreamer.undo(run_id).to_journal())
            self.journal.append(entry)  # the run's "undone" entry, beside its "ok" one
            return entry
        key = payload.get("project_key")
        with self.project_lock(key or "user"):
            return self.app.run_dream(self.dreamer, self.journal, key,
                                      payload.get("project_root"), trigger="forced",
                                      dry_run=bool(payload.get("dry_run")))

    def _start_control(self) -> None:
        """Serve maintain/list/search/status to other processes (the daemon owns the store)."""
        app = self.app
        handlers = {
            "maintain": lambda p: app.maintain(
                directory=p.get("directory"), db_override=p.get("db"),
                resources=(self.state, self.store, self.extractor),
                lock_for=self.project_lock),
            "list": lambda p: app.list_memories(
                self.store, user=bool(p.get("user")), directory=p.get("directory"),
                db=p.get("db"), include_retired=bool(p.get("include_retired"))),
            "search": lambda p: app.search(
                self.store, str(p["query"]), directory=p.get("directory"), db=p.get("db"),
                limit=int(p.get("limit") or 10),
                include_retired=bool(p.get("include_retired"))),
            "status": lambda _p: {**app.status_info(self.state, self.store),
                                  "daemon": self.status()},
            "dream": self.dream_now,
            "show": lambda p: app.show_memory(self.store, self.journal, str(p["id"])),
        }
        path = socket_path(app.state_dir, app.env)
        self._control = ControlServer(path, handlers)
        self._control.start()
        info = {"pid": os.getpid(), "socket": str(path),
                "started_at": iso_utc(self.started_at or self.clock())}
        tmp = app.state_dir / (DAEMON_INFO_FILE + ".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, app.state_dir / DAEMON_INFO_FILE)

    def _start_watcher(self) -> None:
        if self._watcher is not None:
            return
        paths = [s.path for s in self._sources.values()] or self._candidate_paths()
        if not paths:
            return
        self._watcher = DbWatcher(paths, on_change=self._poke.set, on_failure=self._watch_failed)
        if not self._watcher.start():
            self._watch_failed(FileNotFoundError("no database folder to watch yet"))

    def _watch_failed(self, exc: BaseException) -> None:
        if not self._polling:
            log.warning("polling_fallback", reason=str(exc),
                        poll_interval_seconds=self.cfg.poll_interval_seconds)
        self._polling = True
        self._poke.set()

    # -- sources ----------------------------------------------------------------------

    def _candidate_paths(self) -> list[Path]:
        try:
            return self.app.database_paths()
        except SourceError:
            return []

    def _open(self, path: Path) -> _Source | None:
        try:
            st = path.stat()
            db = self.app.open_source(path)
        except (OSError, SourceError) as exc:
            self.last_error = str(exc)
            log.warning("source_unavailable", db=str(path), error=str(exc))
            return None
        src = _Source(path, db, (st.st_dev, st.st_ino), -1)
        log.info("source_opened", db=str(path), schema=db.schema.describe())
        return src

    def check_sources(self, *, full: bool = False) -> int:
        """Confirm changes with ``PRAGMA data_version`` and queue changed sessions.

        Handles databases that appeared, vanished or were replaced (new inode). With
        ``full`` the session list is re-read even when ``data_version`` is unchanged.

        Returns:
            The number of sessions queued.
        """
        queued = 0
        paths = {source_identity(p): p for p in self._candidate_paths()}
        for ident in list(self._sources):
            src = self._sources[ident]
            try:
                st = src.path.stat()
                replaced = (st.st_dev, st.st_ino) != src.inode
            except OSError:
                replaced = True
            if replaced or ident not in paths:
                log.info("source_closed", db=str(src.path),
                         reason="replaced" if ident in paths else "gone")
                src.db.close()
                del self._sources[ident]
        for ident, path in paths.items():
            if ident not in self._sources:
                opened = self._open(path)
                if opened is None:
                    continue
                self._sources[ident] = opened
                if self._watcher is None or path.parent not in self._watcher.dirs:
                    self._restart_watcher()
            src = self._sources[ident]
            try:
                version = src.db.data_version()
                if version == src.data_version and not full:
                    continue
                src.data_version = version
                queued += self._queue_changed(ident, src, full=full)
            except SourceError as exc:
                self.last_error = str(exc)
                log.warning("source_read_failed", db=str(src.path), error=str(exc))
        return queued

    def _restart_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._start_watcher()

    def _queue_changed(self, ident: str, src: _Source, *, full: bool = False) -> int:
        """Queue the sessions of one database that changed since they were last seen.

        Between sweeps only the sessions updated since the newest ``time_updated`` seen
        (less ``CHANGE_LOOKBACK_MS`` for commits that land late) are read, so a change
        costs the same in a database of 100 sessions or 100,000. A ``full`` pass (start-up
        and the safety sweep) reads them all, which also finds sessions written with old
        timestamps (``opencode import``). A session seen for the first time is queued only
        when it has a message after its mark (any message, when it has no mark).
        """
        now_ms = int(self.clock().timestamp() * 1000)
        after = None
        if not full and src.high_water is not None:
            after = src.high_water - CHANGE_LOOKBACK_MS
        rows = src.db.sessions(include_archived=self.app.config.opencode.include_archived,
                               updated_after_ms=after)
        changed = [s for s in rows if src.seen.get(s.id) != s.time_updated]
        first = [s.id for s in changed if s.id not in src.seen]
        marks = self.state.marks(ident, first) if first else {}
        newest = src.db.last_messages(first) if first else {}
        n = 0
        for start in range(0, len(changed), QUEUE_BATCH):
            if self.stop_event.is_set():
                break  # SIGTERM during a long catch-up: the sweep at next start resumes it
            due_ids = []
            for s in changed[start:start + QUEUE_BATCH]:
                first_sight = s.id not in src.seen
                if first_sight:
                    last, mark = newest.get(s.id), marks.get(s.id)
                    if last is None or (mark is not None and last <= mark):
                        continue  # no message yet, or read up to its newest one already
                due_ids.append(s.id)
            dues = self.state.queue_touch_many(ident, due_ids, now_ms,
                                               self.cfg.quiet_period_seconds,
                                               self.cfg.max_wait_seconds)
            for s in changed[start:start + QUEUE_BATCH]:  # seen once queued (or skipped)
                src.seen[s.id] = s.time_updated
                src.high_water = max(src.high_water or 0, s.time_updated)
            for sid, due in dues.items():
                if self.stop_event.is_set():
                    break  # queued in the state file: the next start re-arms it
                self._arm(ident, sid, due)
            n += len(dues)
        return n

    def _safety_sweep(self) -> None:
        """Ask the main loop for a full pass; re-arm queued sessions that lost their job."""
        for row in self.state.queue():
            job_id = self.job_id(row["source_id"], row["session_id"])
            if self.scheduler.get_job(job_id) is None:  # a re-arm of a running one is a no-op
                self._arm(row["source_id"], row["session_id"], int(row["due_ms"]))
        self._full_sweep_requested = True
        self._poke.set()

    # -- jobs -------------------------------------------------------------------------

    @staticmethod
    def job_id(source_id: str, session_id: str) -> str:
        """The APScheduler job id of a session."""
        return f"session:{source_id}:{session_id}"

    def _arm(self, source_id: str, session_id: str, due_ms: int) -> None:
        run_date = datetime.fromtimestamp(due_ms / 1000, tz=UTC)
        self.scheduler.add_job(self._run_session, "date", run_date=run_date,
                               args=(source_id, session_id),
                               id=self.job_id(source_id, session_id), replace_existing=True)

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
                                    self.app.limits(), clock=self.clock, raise_fatal=False)
            report = proc.process(session)
        finally:
            lock.release()
        if report.error is None:
            self._consecutive_failures = 0
            self.state.queue_done(source_id, session_id, now_ms)
            if report.turns_read:
                self.last_extraction[session.project_key] = {
                    "at": iso_utc(self.clock()), "session_id": session_id,
                    "project_root": session.project_root, "added": report.added}
            return
        self._handle_failure(source_id, session_id, report)

    def _handle_failure(self, source_id: str, session_id: str, report: Any) -> None:
        self.last_error = report.error
        kind = report.error_kind
        now = self.clock()
        if kind in ("auth", "not_found"):
            self.pause = Pause(f"LLM endpoint refused the request ({report.error}); fix the "
                               "key or model in the config", now + timedelta(
                                   seconds=self.cfg.auth_pause_seconds))
            log.error("llm_paused", reason=self.pause.reason, until=iso_utc(self.pause.until))
            self._retry(source_id, session_id, self.cfg.auth_pause_seconds, report.error)
            return
        attempts = self.state.queue_failed(source_id, session_id, report.error)
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
        self._retry(source_id, session_id, delay, report.error)

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
            self._poke.wait(timeout=timeout)
            wait = next_check - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                break
            self._poke.clear()
            if self.stop_event.is_set():
                break
            full, self._full_sweep_requested = self._full_sweep_requested, False
            started = time.monotonic()
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
            # a full sweep (every few minutes) does not hold back the next change
            cost = 0.0 if full else CHECK_COST_FACTOR * (ended - started)
            next_check = ended + max(MIN_CHECK_INTERVAL_SECONDS, cost)
            sd_notify("WATCHDOG=1")

    def shutdown(self) -> None:
        """Stop watching and scheduling; wait briefly for the extraction in progress.

        An extraction still running after the grace period is abandoned: its outbox item
        (or its unmoved mark) makes the next start resume it.
        """
        self.stop_event.set()
        self._poke.set()
        sd_notify("STOPPING=1")
        if self._watcher is not None:
            self._watcher.stop()
        if self._control is not None:
            self._control.close(wait_seconds=2)
            (self.app.state_dir / DAEMON_INFO_FILE).unlink(missing_ok=True)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        for t in threading.enumerate():
            if t.name.startswith("ThreadPoolExecutor") and t is not threading.current_thread():
                t.join(timeout=max(0.0, deadline - time.monotonic()))
        busy = any(t.name.startswith("ThreadPoolExecutor") and t.is_alive()
                   for t in threading.enumerate())
        if not busy:
            for src in self._sources.values():
                src.db.close()
            if self.store is not None:
                self.store.close()
            if self.state is not None:
                self.state.close()
        if self._lock is not None:
            (self.app.state_dir / "daemon.pid").unlink(missing_ok=True)
            self._lock.release()
        log.info("daemon_stopped", abandoned_work=busy)

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
                        for r in self.state.queue()],
            "last_extraction": self.last_extraction,
            "paused": ({"reason": self.pause.reason, "until": iso_utc(self.pause.until)}
                       if self.pause else None),
            "tokens_today": self.state.tokens_since(iso_utc(midnight)),
            "last_dream": self.last_dream,
            "last_error": self.last_error,
        }


def run(app: App) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; return the exit code.

    Raises:
        AlreadyRunning: another daemon holds the lock.
        StateError, StoreError, ConfigError: start-up failed.
    """
    daemon = Daemon(app)

    def _stop(signum: int, _frame: object) -> None:
        log.info("signal_received", signal=signal.Signals(signum).name)
        daemon.stop_event.set()
        daemon._poke.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        daemon.start()
        daemon.run_forever()
    finally:
        daemon.shutdown()
    return 0
