"""File-change hints for OpenCode's databases, with watchfiles.

watchfiles watches each database's *directory*; only events for a database, its ``-wal``
and its ``-shm`` file count (OpenCode writes in WAL mode, so the main file changes only at
checkpoints). Events are only a latency hint: the daemon confirms every change with
``PRAGMA data_version`` and runs a periodic sweep, since inotify misses writes through a
memory map, can overflow, and does not work on network file systems. Where inotify is
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

log = structlog.get_logger(__name__)

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
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
