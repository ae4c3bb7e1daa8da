"""The daemon's view of the OpenCode databases: open each read-only, confirm a change with
``PRAGMA data_version``, and queue the sessions it touched with their debounce due time.

A check reads only the sessions updated after the newest ``time_updated`` seen (minus
:data:`CHANGE_LOOKBACK_MS`); the periodic safety sweep re-reads every session, which also
finds sessions imported with old timestamps. A database that appears later, is deleted, or
is replaced by another file (new inode) is reopened without a restart.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from opencode_memoryd.errors import SourceError
from opencode_memoryd.serve.jobs import job_id
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.watcher import DbWatcher

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from apscheduler.schedulers.background import BackgroundScheduler

    from opencode_memoryd.compose import App
    from opencode_memoryd.config.daemon import DaemonConfig
    from opencode_memoryd.state.db import StateDB

log = structlog.get_logger(__name__)

#: Between full sweeps, re-read sessions updated this long (ms) before the newest
#: ``time_updated`` seen: a commit can land after a later-stamped one (OpenCode waits up
#: to 5 s for the write lock).
CHANGE_LOOKBACK_MS = 120_000
#: Sessions queued per state-file transaction during a check.
QUEUE_BATCH = 500


@dataclass
class TrackedSource:
    """One OpenCode database the daemon follows, and what it has seen of it."""

    path: Path
    db: OpenCodeDB
    inode: tuple[int, int]
    data_version: int
    seen: dict[str, int] = field(default_factory=dict)  # session id -> time_updated
    high_water: int | None = None  # newest session.time_updated seen (ms)



class SourceTracking:
    """The database-following half of :class:`~opencode_memoryd.serve.daemon.Daemon`."""

    app: App
    cfg: DaemonConfig
    state: StateDB
    scheduler: BackgroundScheduler
    stop_event: threading.Event
    clock: Callable[[], datetime]
    last_error: str | None
    _sources: dict[str, TrackedSource]
    _polling: bool
    _poke: threading.Event
    _watcher: DbWatcher | None
    #: what was last said about each database (or ``""`` about finding none), so a
    #: database that stays missing is reported once, not at every check
    _said: dict[str, str]
    #: provided by :class:`~opencode_memoryd.serve.jobs.SessionJobs`
    _arm: Callable[[str, str, int], None]

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

    def _say_once(self, key: str, message: str, event: str, **fields: str) -> None:
        """Log ``event`` unless ``message`` is what was last said about ``key``."""
        if self._said.get(key) != message:
            self._said[key] = message
            log.warning(event, **fields)

    def _candidate_paths(self) -> list[Path]:
        try:
            paths = self.app.database_paths()
        except SourceError as exc:
            self.last_error = str(exc)
            self._say_once("", str(exc), "waiting_for_database", reason=str(exc))
            return []
        self._said.pop("", None)
        return paths

    def _open(self, path: Path) -> TrackedSource | None:
        try:
            st = path.stat()
            db = self.app.open_source(path)
        except (OSError, SourceError) as exc:
            self.last_error = str(exc)
            self._say_once(str(path), str(exc), "source_unavailable", db=str(path),
                           error=str(exc))
            return None
        self._said.pop(str(path), None)
        src = TrackedSource(path, db, (st.st_dev, st.st_ino), -1)
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

    def _queue_changed(self, ident: str, src: TrackedSource, *, full: bool = False) -> int:
        """Queue the sessions of one database that changed since they were last seen.

        Between sweeps only the sessions updated since the newest ``time_updated`` seen
        (less ``CHANGE_LOOKBACK_MS`` for commits that land late) are read, so a change
        costs the same in a database of 100 sessions or 100,000. A ``full`` pass (start-up
        and the safety sweep) reads them all, which also finds sessions written with old
        timestamps (``opencode import``). A session seen for the first time is queued only
        when it has a message after its mark (any message, when it has no mark): a newer
        ``(time_created, id)`` or a larger rowid than the mark's ``seq``.
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
        seqs = self.state.seqs(ident, first) if first else {}
        top_seqs = src.db.max_seqs(list(seqs)) if seqs else {}
        n = 0
        for start in range(0, len(changed), QUEUE_BATCH):
            if self.stop_event.is_set():
                break  # SIGTERM during a long catch-up: the sweep at next start resumes it
            due_ids = []
            for s in changed[start:start + QUEUE_BATCH]:
                first_sight = s.id not in src.seen
                if first_sight:
                    last, mark = newest.get(s.id), marks.get(s.id)
                    if last is None or (mark is not None and last <= mark and top_seqs.get(
                            s.id, 0) <= seqs.get(s.id, 0)):
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
            # a re-arm of a running job is a no-op
            if self.scheduler.get_job(job_id(row["source_id"], row["session_id"])) is None:
                self._arm(row["source_id"], row["session_id"], int(row["due_ms"]))
        self._full_sweep_requested = True
        self._poke.set()
