"""File-change hints for OpenCode's databases: inotify on Linux, watchfiles elsewhere.

Each database's *directory* is watched; only events for a database, its ``-wal`` and its
``-shm`` file count (OpenCode writes in WAL mode, so the main file changes only at
checkpoints). On Linux the watcher thread blocks on inotify
(:mod:`opencode_memoryd.source.inotify`): it wakes only when a file changes, at most once
per :data:`COALESCE_SECONDS` while OpenCode writes; elsewhere watchfiles (FSEvents,
kqueue) is used. Events are only a latency hint: the daemon confirms every change with
``PRAGMA data_version`` and runs a periodic sweep, since inotify misses writes through a
memory map, can overflow, and does not work on network file systems. Where file events are
unavailable or exhausted, :class:`DbWatcher` reports it once and the daemon falls back to
polling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from fnmatch import fnmatch
from pathlib import Path

import structlog
import watchfiles

from opencode_memoryd.source import inotify

log = structlog.get_logger(__name__)

#: After a change is reported, the events of the next this many seconds are read at once
#: (a turn is many small commits: one wake-up serves a burst). Half the daemon's shortest
#: time between two checks (``MIN_CHECK_INTERVAL_SECONDS``, 0.1 s): a check waits for that
#: anyway, so a hint held back this long rarely delays one.
COALESCE_SECONDS = 0.05

#: Databases that may appear later in a watched folder (OpenCode's per-channel files).
_PATTERNS = ("opencode*.db", "opencode*.db-wal", "opencode*.db-shm")


class DbWatcher:
    """Call ``on_change()`` whenever a watched database (or its WAL/SHM) changes.

    Args:
        databases: the database files; their folders are watched (they need not exist yet).
        on_change: called from the watcher thread, once per batch of events.
        on_failure: called once, with the error, when file events stop working.
    """

    def __init__(self, databases: Iterable[Path], on_change: Callable[[], None],
                 on_failure: Callable[[BaseException], None]) -> None:
        self.names: set[str] = set()
        self.dirs: set[Path] = set()
        for db in databases:
            self.names.update({db.name, db.name + "-wal", db.name + "-shm"})
            self.dirs.add(db.parent)
        self.on_change = on_change
        self.on_failure = on_failure
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inotify: inotify.Inotify | None = None

    def _filter(self, _change: watchfiles.Change, path: str) -> bool:
        name = Path(path).name
        return name in self.names or any(fnmatch(name, p) for p in _PATTERNS)

    def start(self) -> bool:
        """Start watching in a daemon thread; ``False`` when no folder exists to watch."""
        dirs = [str(d) for d in sorted(self.dirs) if d.is_dir()]
        if not dirs:
            return False
        self._thread = threading.Thread(target=self._run, args=(dirs,), name="db-watcher",
                                        daemon=True)
        self._thread.start()
        return True

    def _run(self, dirs: list[str]) -> None:
        if inotify.available():
            self._run_inotify(dirs)
        else:
            self._run_watchfiles(dirs)

    def _run_inotify(self, dirs: list[str]) -> None:
        try:
            watch = inotify.Inotify(dirs)
        except OSError as exc:  # limits reached: fall back to polling
            log.warning("file_events_unavailable", error=str(exc))
            self.on_failure(exc)
            return
        self._inotify = watch
        try:
            while not self._stop.is_set():
                names = watch.wait()
                if names is None:
                    return
                if any(n == "" or n in self.names or any(fnmatch(n, p) for p in _PATTERNS)
                       for n in names):
                    self.on_change()
                    self._stop.wait(COALESCE_SECONDS)
        except OSError as exc:  # every folder gone, a read error
            if not self._stop.is_set():
                log.warning("file_events_unavailable", error=str(exc))
                self.on_failure(exc)
        finally:
            self._inotify = None
            watch.close()

    def _run_watchfiles(self, dirs: list[str]) -> None:
        try:
            for _changes in watchfiles.watch(*dirs, watch_filter=self._filter,
                                             stop_event=self._stop, debounce=50, step=20,
                                             raise_interrupt=False, recursive=False):
                self.on_change()
        except Exception as exc:  # inotify limits, vanished folders, unsupported FS
            if not self._stop.is_set():
                log.warning("file_events_unavailable", error=str(exc))
                self.on_failure(exc)

    def stop(self) -> None:
        """Stop the thread (returns within about a second)."""
        self._stop.set()
        watch = self._inotify
        if watch is not None:
            watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
