"""The dream journal: one JSON line per dream run, appended, never rewritten.

The file lives at ``$XDG_STATE_HOME/opencode-memoryd/dream-journal.jsonl`` (the caller
passes the path). Every dream leaves an entry, including failed and skipped ones. An entry
is a JSON object chosen by the caller; the keys this module relies on are ``run_id``
(required, a non-empty string), ``status``, ``scope`` and ``project_key``. The usual shape::

    {"run_id": "3f2a9c0d1b7e", "started_at": "2025-01-02T03:04:05.000Z",
     "ended_at": "...", "trigger": "schedule", "dry_run": false,
     "scope": "project" | "user", "project_key": "...", "project_root": "/path" | null,
     "status": "ok" | "failed" | "skipped" | ..., "reason": str | null,
     "counts": {"before": 40, "after": 31, "merged": 6, "superseded": 3, "kept": 31,
                "rejected_plans": 1},
     "operations": [...], "model": "...", "tokens_in": 1200, "tokens_out": 340,
     "duration_ms": 5120}

Durability:

* An entry is written with one ``os.write`` on an ``O_APPEND`` descriptor, then the file is
  ``fsync``-ed (and its folder too when the file was just created). A successful
  :meth:`DreamJournal.append` therefore survives power loss.
* Writers take ``fcntl.flock(LOCK_EX)`` on the journal for the append and the ``fsync``, so
  several processes can share one journal; a ``threading.Lock`` serialises threads.
* A torn last line (power loss in the middle of a write: the file does not end with
  ``\\n``) is moved aside on first use: its bytes are appended to ``<journal>.torn``
  (followed by a ``\\n`` separator) and fsynced, then the journal is truncated to its last
  complete line. A ``journal_repaired`` warning names the byte count.
* A complete line that is not a JSON object (corruption) is skipped when reading, with a
  ``journal_line_corrupt`` warning once per line, and counted in
  :attr:`DreamJournal.corrupt_lines`; it is never fatal.

Appends are idempotent by ``run_id`` and ``status``: when the newest entry already in the
journal for that run has the same status, nothing is written (a crash between the state
update and the journal write makes the caller append again on recovery).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.errors import StateError

log = structlog.get_logger(__name__)

TORN_SUFFIX = ".torn"


class DreamJournal:
    """An append-only JSON Lines journal of dream runs.

    Args:
        path: the journal file; it and its folder (``0700``) are created on the first
            append, the file with mode ``0600``. Nothing is touched until first use.

    Attributes:
        path: the journal file.
        torn_path: where torn bytes are saved (``<path>.torn``).

    Every method raises :class:`~opencode_memoryd.errors.StateError` when the journal
    cannot be opened, locked, read, repaired or written. A missing file reads as empty.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.torn_path = self.path.with_name(self.path.name + TORN_SUFFIX)
        self._lock = threading.Lock()
        self._loaded = False
        self._offset = 0  # bytes of the file already folded into the index
        self._ino: int | None = None
        self._last_status: dict[str, Any] = {}  # run_id -> status of its newest entry
        self._corrupt: set[int] = set()  # byte offsets of corrupt lines already reported

    # ------------------------------------------------------------------ public API

    @property
    def corrupt_lines(self) -> int:
        """How many corrupt (non-JSON-object) lines have been seen and skipped so far."""
        return len(self._corrupt)

    def append(self, entry: Mapping[str, Any]) -> bool:
        """Append one entry durably.

        Args:
            entry: a JSON-serialisable mapping with a non-empty string ``run_id``.

        Returns:
            ``True`` when the entry was written and fsynced; ``False`` when the newest entry
            already in the journal for this ``run_id`` has the same ``status`` (nothing
            written).

        Raises:
            ValueError: ``run_id`` is missing or not a non-empty string, or the entry cannot
                be serialised to JSON.
            StateError: the journal cannot be opened, locked, written or fsynced. A short
                write is rolled back (truncated away) before this is raised.
        """
        run_id = entry.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("a journal entry needs a non-empty string run_id")
        try:
            line = json.dumps(dict(entry), ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"journal entry for run {run_id} is not valid JSON: {exc}") from exc
        data = (line + "\n").encode("utf-8")
        status = entry.get("status")

        with self._lock:
            fd, created = self._open_for_append()
            try:
                self._flock(fd, fcntl.LOCK_EX)
                self._sync_locked(fd)
                if run_id in self._last_status and self._last_status[run_id] == status:
                    return False
                size = self._offset  # the file's size: synced just now, under the lock
                try:
                    written = os.write(fd, data)
                    if written != len(data):
                        raise OSError(f"short write: {written} of {len(data)} bytes")
                    os.fsync(fd)
                except OSError as exc:
                    self._rollback(fd, size)
                    raise StateError(f"cannot write the dream journal {self.path}: {exc}") from exc
                self._offset = size + len(data)
                self._last_status[run_id] = status
            finally:
                os.close(fd)  # also releases the flock
            if created:
                _fsync_dir(self.path.parent)
            return True

    def entries(
        self,
        *,
        project_key: str | None = None,
        user: bool = False,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Return journal entries, newest first.

        Args:
            project_key: keep only entries whose ``project_key`` equals this.
            user: keep only user-scope entries (``scope == "user"``). With ``project_key``
                too, an entry matching either filter is kept.
            limit: keep only the newest ``limit`` entries (after filtering); ``None`` for all.

        Returns:
            A list of fresh dicts (file order reversed); corrupt lines are skipped. A
            journal this process may only read is read as is (a torn tail is ignored,
            not repaired).
        """
        rows = list(self._read())
        rows.reverse()
        if project_key is not None or user:
            rows = [
                r for r in rows
                if (project_key is not None and r.get("project_key") == project_key)
                or (user and r.get("scope") == "user")
            ]
        if limit is not None:
            rows = rows[: max(limit, 0)]
        return rows

    def find(self, run_id: str) -> dict[str, Any] | None:
        """Return the newest entry for ``run_id``, or ``None`` when the run has none."""
        found: dict[str, Any] | None = None
        for row in self._read():
            if row.get("run_id") == run_id:
                found = row
        return found

    # ------------------------------------------------------------------ internals

    def _read(self) -> Iterator[dict[str, Any]]:
        """Yield every valid entry in file order (repairing a torn tail on first use)."""
        with self._lock:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                return iter(())
            except PermissionError:
                return iter(self._read_only())
            except OSError as exc:
                raise StateError(f"cannot open the dream journal {self.path}: {exc}") from exc
            try:
                self._flock(fd, fcntl.LOCK_EX)
                self._sync_locked(fd)
                # _sync_locked leaves the file ending in "\n" (or empty), and we hold the
                # lock, so everything up to here is complete lines.
                data = _pread_all(fd, 0, self._offset, self.path)
            finally:
                os.close(fd)
            return iter([row for _, row in self._parse(data, 0)])

    def _read_only(self) -> list[dict[str, Any]]:
        """Read a journal we may not write: complete lines only, no repair, no index."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateError(f"cannot open the dream journal {self.path}: {exc}") from exc
        try:
            self._flock(fd, fcntl.LOCK_SH)
            data = _pread_all(fd, 0, 1 << 62, self.path)
        finally:
            os.close(fd)
        return [row for _, row in self._parse(data[: data.rfind(b"\n") + 1], 0)]

    def _open_for_append(self) -> tuple[int, bool]:
        """Open (creating if needed, mode 0600) the journal for appending."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            for _ in range(5):
                try:
                    fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    pass
                else:
                    try:
                        os.fchmod(fd, 0o600)
                    except OSError:
                        os.close(fd)
                        raise
                    return fd, True
                try:
                    return os.open(self.path, flags), False
                except FileNotFoundError:
                    continue  # removed between the two opens: try to create it again
        except OSError as exc:
            raise StateError(f"cannot open the dream journal {self.path}: {exc}") from exc
        raise StateError(f"cannot open the dream journal {self.path}: it keeps disappearing")

    def _flock(self, fd: int, op: int) -> None:
        try:
            fcntl.flock(fd, op)
        except OSError as exc:
            raise StateError(f"cannot lock the dream journal {self.path}: {exc}") from exc

    def _sync_locked(self, fd: int) -> None:
        """Fold bytes appended since the last look into the index; repair a torn tail.

        Called with the thread lock and the exclusive flock held, so no writer is in the
        middle of a write: a missing final ``\\n`` is a torn line.
        """
        try:
            st = os.fstat(fd)
        except OSError as exc:
            raise StateError(f"cannot stat the dream journal {self.path}: {exc}") from exc
        if not self._loaded or st.st_ino != self._ino or st.st_size < self._offset:
            # First use, or the file was replaced or shrunk behind our back: rebuild.
            self._offset = 0
            self._last_status.clear()
            self._corrupt.clear()
            self._ino = st.st_ino
        if st.st_size == self._offset:
            self._loaded = True
            return
        data = _pread_all(fd, self._offset, st.st_size - self._offset, self.path)
        end = data.rfind(b"\n") + 1
        if end < len(data):
            self._repair(fd, self._offset + end, data[end:])
            data = data[:end]
        for _, row in self._parse(data, self._offset):
            run_id = row.get("run_id")
            if isinstance(run_id, str):
                self._last_status[run_id] = row.get("status")
        self._offset += len(data)
        self._loaded = True

    def _repair(self, fd: int, keep: int, torn: bytes) -> None:
        """Save ``torn`` to the ``.torn`` file, then truncate the journal to ``keep`` bytes."""
        try:
            created = False
            flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
            try:
                tfd = os.open(self.torn_path, flags | os.O_CREAT | os.O_EXCL, 0o600)
                created = True
            except FileExistsError:
                tfd = os.open(self.torn_path, flags)
            try:
                _write_all(tfd, torn + b"\n")
                os.fsync(tfd)
            finally:
                os.close(tfd)
            if created:
                _fsync_dir(self.torn_path.parent)
            os.ftruncate(fd, keep)
            os.fsync(fd)
        except OSError as exc:
            raise StateError(
                f"cannot repair the torn last line of the dream journal {self.path}: {exc}"
            ) from exc
        log.warning("journal_repaired", path=str(self.path), torn_bytes=len(torn),
                    torn_path=str(self.torn_path))

    def _rollback(self, fd: int, size: int) -> None:
        """Best effort: cut a partial write back off so the journal keeps whole lines."""
        try:
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)
                os.fsync(fd)
        except OSError as exc:
            log.warning("journal_rollback_failed", path=str(self.path), error=str(exc))

    def _parse(self, data: bytes, base: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield ``(byte offset, entry)`` for each complete valid line of ``data``."""
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            raw = data[pos:nl]
            offset = base + pos
            pos = nl + 1
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except ValueError:
                row = None
            if not isinstance(row, dict):
                if offset not in self._corrupt:
                    self._corrupt.add(offset)
                    log.warning("journal_line_corrupt", path=str(self.path),
                                byte_offset=offset, length=len(raw))
                continue
            yield offset, row


def _pread_all(fd: int, offset: int, size: int, path: Path) -> bytes:
    chunks: list[bytes] = []
    try:
        while size > 0:
            chunk = os.pread(fd, min(size, 1 << 20), offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            size -= len(chunk)
    except OSError as exc:
        raise StateError(f"cannot read the dream journal {path}: {exc}") from exc
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(directory: Path) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StateError(f"cannot open {directory} to fsync it: {exc}") from exc
    try:
        os.fsync(dfd)
    except OSError as exc:
        raise StateError(f"cannot fsync {directory}: {exc}") from exc
    finally:
        os.close(dfd)
