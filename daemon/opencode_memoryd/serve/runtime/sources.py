"""The daemon's view of the OpenCode databases: open each read-only, confirm a change with
``PRAGMA data_version``, and queue the sessions it touched with their debounce due time.

A check reads only the sessions updated after the newest ``time_updated`` seen, and the
``session_message`` rows created after the newest one seen (each minus
:data:`CHANGE_LOOKBACK_MS`): v2 turns never bump ``session.time_updated``, so a session also
counts as changed when its newest ``seq`` or the newest ``time_updated`` of its recent rows
moved. The periodic safety sweep re-reads every session, which also finds sessions imported
with old timestamps. A database that appears later, is deleted, or is replaced by another
file (new inode) is reopened without a restart; one whose schema changes (an OpenCode upgrade
adds tables) is detected again.

What would make capture silently blind is raised as an alert (:mod:`.alerts`): no database
found (naming the paths looked at), a database that cannot be opened or read, and rows
written to tables of an unknown shape.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.errors import SourceError, SourceSchemaError
from opencode_memoryd.models import Mark, iso_utc, utc_from_ms
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.storages.registry import named
from opencode_memoryd.source.storages.sessions import Stamp
from opencode_memoryd.source.watcher import DbWatcher

if TYPE_CHECKING:
    from collections.abc import Callable

    from opencode_memoryd.serve.runtime.alerts import Alerts
    from opencode_memoryd.serve.runtime.shared import DaemonState

log = structlog.get_logger(__name__)

#: Between full sweeps, re-read sessions updated this long (ms) before the newest
#: ``time_updated`` seen: a commit can land after a later-stamped one (OpenCode waits up
#: to 5 s for the write lock).
CHANGE_LOOKBACK_MS = 120_000
#: Sessions queued per state-file transaction during a check.
QUEUE_BATCH = 500
#: Between full sweeps, how often (s) at most the sessions updated in place are looked for
#: (``time_updated`` has no index: a scan of the session table). Inserts (new sessions,
#: messages, parts) are seen on every check.
UPDATE_SCAN_SECONDS = 5.0


@dataclass
class TrackedSource:
    """One OpenCode database the daemon follows, and what it has seen of it."""

    path: Path
    db: OpenCodeDB
    inode: tuple[int, int]
    data_version: int
    seen: dict[str, int] = field(default_factory=dict)  # session id -> time_updated
    high_water: int | None = None  # newest session.time_updated seen (ms)
    seen_seq: dict[str, int] = field(default_factory=dict)  # session id -> newest seq
    seen_v2_updated: dict[str, int] = field(default_factory=dict)  # -> newest time_updated
    v2_high_water: int | None = None  # newest session_message.time_created seen (ms)
    unknown_rows: dict[str, int] = field(default_factory=dict)  # unknown table -> rows
    inserts: dict[str, int] | None = None  # table -> newest rowid seen (see inserted_since)
    update_scan_at: float = 0.0  # when sessions updated in place were last looked for
    update_scan_pending: bool = False  # a change was seen since then

    def update_scan_due(self) -> float | None:
        """When (monotonic s) the next scan for in-place updates is due, or ``None`` when
        no change waits for one."""
        return self.update_scan_at + UPDATE_SCAN_SECONDS if self.update_scan_pending else None


class SourceTracker:
    """The daemon's view of the OpenCode databases: which are open, what was seen of
    each, the file watcher (or polling), and the sessions queued when they change.

    Args:
        shared: what the daemon's collaborators share.
        alerts: where what would make capture blind is raised.
        wake_worker: tells the worker the queue changed (``due_ms``: the earliest due
            time, wall ms, the change can have given a session).
    """

    def __init__(self, shared: DaemonState, alerts: Alerts, *,
                 wake_worker: Callable[[int | None], None]) -> None:
        self.shared, self.alerts, self._wake_worker = shared, alerts, wake_worker
        #: file events failed: the main loop polls every ``poll_interval_seconds``
        self.polling = False
        self.watcher: DbWatcher | None = None
        #: seconds spent scanning for in-place updates (paced on their own, so the main
        #: loop leaves them out of a check's cost)
        self.scan_seconds = 0.0

    def status(self) -> dict[str, Any]:
        """The databases' part of ``status`` (JSON-safe): ``databases`` (path, schema) and
        ``change_detection`` (``file events`` or ``polling``)."""
        return {"databases": [{"path": str(s.path), "schema": s.db.schema.describe()}
                              for s in self.shared.sources.values()],
                "change_detection": "polling" if self.polling else "file events"}

    def start_watcher(self) -> None:
        if self.watcher is not None:
            return
        paths = [s.path for s in self.shared.sources.values()] or self._candidate_paths()
        if not paths:
            return
        self.watcher = DbWatcher(paths, on_change=self.shared.poke.set,
                                 on_failure=self._watch_failed)
        if not self.watcher.start():
            self._watch_failed(FileNotFoundError("no database folder to watch yet"))

    def _watch_failed(self, exc: BaseException) -> None:
        if not self.polling:
            log.warning("polling_fallback", reason=str(exc),
                        poll_interval_seconds=self.shared.cfg.poll_interval_seconds)
        self.polling = True
        self.shared.poke.set()

    # -- sources ----------------------------------------------------------------------

    def _candidate_paths(self) -> list[Path]:
        try:
            return self.shared.app.database_paths()
        except SourceError:
            return []

    def _open(self, path: Path) -> TrackedSource | None:
        key = f"source:{source_identity(path)}"
        try:
            st = path.stat()
            db = self.shared.app.open_source(path)
        except (OSError, SourceError) as exc:
            self.shared.last_error = str(exc)
            event = ("source_schema_unreadable" if isinstance(exc, SourceSchemaError)
                     else "source_unavailable")
            self.alerts.warn(key, event, str(exc), db=str(path))
            return None
        self.alerts.resolve(key)
        src = TrackedSource(path, db, (st.st_dev, st.st_ino), -1)
        log.info("source_opened", db=str(path), schema=db.schema.describe())
        return src

    def _check_unread(self, ident: str, src: TrackedSource) -> None:
        """Alert when rows are written to tables of a shape we cannot read: recent time
        stamps, or (without a time column) more rows than at the last check."""
        try:
            tables = src.db.unknown_tables()
        except SourceError as exc:
            log.warning("unknown_tables_unreadable", db=str(src.path), error=str(exc))
            return
        now_ms = int(self.shared.clock().timestamp() * 1000)
        written = []
        for t in tables:
            before = src.unknown_rows.get(t.name)
            src.unknown_rows[t.name] = t.rows
            if t.newest_ms is not None and t.recent(now_ms):
                written.append(f"{t.name} ({t.rows} rows, newest "
                               f"{iso_utc(utc_from_ms(t.newest_ms))})")
            elif t.newest_ms is None and before is not None and t.rows > before:
                written.append(f"{t.name} ({t.rows - before} new rows)")
        key = f"unread:{ident}"
        if not written:
            self.alerts.resolve(key)
            return
        self.alerts.warn(
            key, "unreadable_writes",
            f"{src.path}: OpenCode writes rows to tables this version cannot read: "
            + "; ".join(written) + ". Turns stored there are not captured; upgrade "
            "opencode-memoryd", db=str(src.path), tables=[t.name for t in tables])

    def _refresh_schema(self, ident: str, src: TrackedSource) -> bool:
        """Detect the schema again when it changed; ``True`` when it did (and is readable)."""
        key = f"schema:{ident}"
        try:
            changed = src.db.refresh_schema()
        except SourceError as exc:
            self.shared.last_error = str(exc)
            self.alerts.warn(key, "source_schema_unreadable", str(exc), db=str(src.path))
            return False
        self.alerts.resolve(key)
        if changed:
            log.info("source_schema_changed", db=str(src.path),
                     schema=src.db.schema.describe())
            self._check_unread(ident, src)
        return changed

    def check_sources(self, *, full: bool = False) -> int:
        """Confirm changes with ``PRAGMA data_version`` and queue changed sessions.

        Handles databases that appeared, vanished or were replaced (new inode), and schema
        changes (an upgrade under a running daemon: the database is read again in full).
        With ``full`` the session list is re-read even when ``data_version`` is unchanged,
        and tables of unknown shape are looked at.

        Returns:
            The number of sessions queued.
        """
        queued = 0
        try:
            found, looked = self.shared.app.database_paths(), None
        except SourceError as exc:
            found, looked = [], str(exc)
        paths = {source_identity(p): p for p in found}
        self._close_gone(paths)
        self.alerts.resolve_prefix("source:", {f"source:{i}" for i in paths})
        for ident, path in paths.items():
            queued += self._check_one(ident, path, full=full)
        self._alert_no_database(looked, list(paths.values()))
        return queued

    def _close_gone(self, paths: dict[str, Path]) -> None:
        """Close the databases no longer among ``paths`` (identity -> path) or replaced
        (another inode at their path)."""
        for ident in list(self.shared.sources):
            src = self.shared.sources[ident]
            try:
                st = src.path.stat()
                replaced = (st.st_dev, st.st_ino) != src.inode
            except OSError:
                replaced = True
            if replaced or ident not in paths:
                log.info("source_closed", db=str(src.path),
                         reason="replaced" if ident in paths else "gone")
                src.db.close()
                del self.shared.sources[ident]

    def _check_one(self, ident: str, path: Path, *, full: bool) -> int:
        """Open the database ``ident`` at ``path`` if it is new, and queue its changed
        sessions when its ``data_version`` moved (or ``full``, or an update scan is due);
        the number queued. A read failure is logged and kept as the last error."""
        fresh = ident not in self.shared.sources
        if fresh:
            opened = self._open(path)
            if opened is None:
                return 0
            self.shared.sources[ident] = opened
            if self.watcher is None or path.parent not in self.watcher.dirs:
                self._restart_watcher()
        src = self.shared.sources[ident]
        try:
            version = src.db.data_version()
            scan_due = src.update_scan_due()
            if (version == src.data_version and not full
                    and (scan_due is None or scan_due > time.monotonic())):
                return 0
            src.data_version = version
            again = self._refresh_schema(ident, src)
            if (full or fresh) and not again:
                self._check_unread(ident, src)
            return self._queue_changed(ident, src, full=full or again)
        except SourceError as exc:
            self.shared.last_error = str(exc)
            log.warning("source_read_failed", db=str(src.path), error=str(exc))
            return 0

    def next_update_scan(self) -> float | None:
        """When (monotonic s) a database has a scan for in-place updates due (a change was
        seen since its last one), or ``None``: the main loop checks again by then."""
        due = [d for d in (s.update_scan_due() for s in self.shared.sources.values())
               if d is not None]
        return min(due) if due else None

    def _alert_no_database(self, looked: str | None, paths: list[Path]) -> None:
        if self.shared.sources:
            self.alerts.resolve("no_database")
            return
        message = looked or ("no OpenCode database could be opened: looked at "
                             + ", ".join(str(p) for p in paths))
        self.alerts.warn("no_database", "no_opencode_database",
                         message + "; nothing is captured until one appears")

    def _restart_watcher(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        self.start_watcher()

    def _changed_sessions(self, src: TrackedSource, *, full: bool) -> list[Stamp]:
        """The sessions of one database that changed since they were last seen (see
        :meth:`_queue_changed`), as ``(id, time_created, time_updated)``, oldest first;
        updates what was seen of ``session_message``."""
        after = v2_after = None
        if not full and src.high_water is not None:
            after = src.high_water - CHANGE_LOOKBACK_MS
        if not full and src.v2_high_water is not None:
            v2_after = src.v2_high_water - CHANGE_LOOKBACK_MS
        archived = self.shared.app.config.opencode.include_archived
        by_id: dict[str, Stamp] = {}
        touched: set[str] = set()
        now = time.monotonic()
        if after is None or src.inserts is None:  # a full read
            src.inserts = src.db.insert_marks()  # before the read: nothing falls between
            by_id = {s[0]: s for s in src.db.session_stamps(include_archived=archived)}
            src.update_scan_at, src.update_scan_pending = now, False
        else:  # the sessions rows were inserted for, and now and then those updated
            touched, src.inserts = src.db.inserted_since(src.inserts)
            if now - src.update_scan_at >= UPDATE_SCAN_SECONDS:
                by_id = {s[0]: s for s in src.db.session_stamps(
                    updated_after_ms=after, include_archived=archived)}
                src.update_scan_at, src.update_scan_pending = now, False
                self.scan_seconds += time.monotonic() - now
            else:
                src.update_scan_pending = True
            missing = [sid for sid in touched if sid not in by_id]
            for start in range(0, len(missing), QUEUE_BATCH):
                by_id.update((s[0], s) for s in src.db.session_stamps(
                    ids=missing[start:start + QUEUE_BATCH], include_archived=archived))
        ids = {sid for sid, s in by_id.items() if src.seen.get(sid) != s[2]}
        ids |= {sid for sid in touched if sid in by_id}  # an insert is a change
        ids |= _active_since(src, v2_after)
        missing = [sid for sid in ids if sid not in by_id]
        for start in range(0, len(missing), QUEUE_BATCH):
            by_id.update((s[0], s) for s in src.db.session_stamps(
                ids=missing[start:start + QUEUE_BATCH], include_archived=archived))
        return sorted((by_id[i] for i in ids if i in by_id), key=lambda s: (s[1], s[0]))

    def _queue_changed(self, ident: str, src: TrackedSource, *, full: bool = False) -> int:
        """Queue the sessions of one database that changed since they were last seen.

        Between sweeps only the sessions updated since the newest ``time_updated`` seen,
        and the ``session_message`` rows created since the newest one seen, are read (less
        ``CHANGE_LOOKBACK_MS`` for commits that land late), so a change costs about the same
        in a database of 100 sessions or 100,000. A ``full`` pass (start-up, the safety
        sweep, a schema change) reads them all, which also finds sessions written with old
        timestamps (``opencode import``) and ``session_message`` rows wiped and rewritten. A
        session seen for the first time is queued only when it has a message after its mark
        (any message, when it has no mark or a mark in another storage): in ``message``, a
        newer ``(time_created, id)`` or a larger rowid than the mark's ``max_rowid``. One
        whose session row and newest ``message`` row are older than the quiet period is
        quiet already, and is due at once (a catch-up does not wait a quiet period for
        sessions long finished).
        """
        cfg = self.shared.cfg
        now_ms = int(self.shared.clock().timestamp() * 1000)
        quiet_ms = int(min(cfg.quiet_period_seconds, cfg.max_wait_seconds) * 1000)
        changed = self._changed_sessions(src, full=full)
        n = 0
        for start in range(0, len(changed), QUEUE_BATCH):
            if self.shared.stop_event.is_set():
                break  # SIGTERM during a long catch-up: the sweep at next start resumes it
            self.shared.step_aside()
            batch = changed[start:start + QUEUE_BATCH]
            first = [sid for sid, _, _ in batch if sid not in src.seen]
            marks = self.shared.state.marks.marks(ident, first) if first else {}
            newest = src.db.last_messages(first) if first else {}
            due_ids = []
            since: dict[str, int] = {}
            rowids = self.shared.state.marks.max_rowids(ident, first) if first else {}
            top_rowids = src.db.max_rowids(list(rowids)) if rowids else {}
            for sid, _created, updated in batch:
                if sid not in src.seen:
                    last = newest.get(sid)
                    if (_read_up_to(last, marks.get(sid))
                            and top_rowids.get(sid, 0) <= rowids.get(sid, 0)):
                        continue  # no message yet, or read up to its newest one already
                    made = (named(last.storage).position_time(last.position)
                            if last is not None else None)
                    if made is not None:
                        since[sid] = min(now_ms, max(updated, made))
                due_ids.append(sid)
            self.shared.state.queue.queue_touch_many(ident, due_ids, now_ms,
                                                     cfg.quiet_period_seconds,
                                                     cfg.max_wait_seconds, changed_ms=since)
            for sid, _created, updated in batch:  # seen once queued (or skipped)
                src.seen[sid] = updated
                src.high_water = max(src.high_water or 0, updated)
            if due_ids:  # a session seen again is due no sooner than the worker knew
                self._wake_worker(min(min(now_ms, since.get(sid, now_ms)) for sid in due_ids)
                                 + quiet_ms)
            n += len(due_ids)
        return n


def _read_up_to(last: Mark | None, mark: Mark | None) -> bool:
    """Whether a session needs no reading: no row at all, or its mark is at its newest row
    (as its storage tells: :meth:`~opencode_memoryd.source.storages.base.Storage.read_up_to`)."""
    if last is None:
        return True
    if mark is None or mark.storage != last.storage:
        return False
    return named(last.storage).read_up_to(last.position, mark.position)


def _active_since(src: TrackedSource, after: int | None) -> set[str]:
    """The sessions whose message rows moved since they were last seen (a new sequence
    number or a newer in-place update), from the database's activity after ``after`` (ms;
    ``None``: all); records what was seen and moves the source's high-water mark."""
    ids: set[str] = set()
    act = src.db.activity(after)
    for sid, seq in act.seqs.items():
        upd = act.updated.get(sid)
        if src.seen_seq.get(sid) != seq or (upd is not None
                                            and src.seen_v2_updated.get(sid) != upd):
            ids.add(sid)
        src.seen_seq[sid] = seq
        if upd is not None:
            src.seen_v2_updated[sid] = upd
    if act.newest_created is not None:
        src.v2_high_water = max(src.v2_high_water or 0, act.newest_created)
    return ids
