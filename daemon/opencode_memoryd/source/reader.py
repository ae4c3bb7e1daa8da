"""Read-only access to an OpenCode database (``opencode.db``), whatever storages it holds.

The only module in ``source`` that opens the database (one SQLAlchemy connection over
``sqlite3``, shared by the daemon's threads one statement at a time; ``sqlalchemy`` is
imported when the first database is opened). The statements of each storage of turns
(:mod:`~opencode_memoryd.source.storages`: 1.x ``message``/``part``, v2
``session_message``) and of the merged session list run through this module's connection;
each session is read from the storage that holds it
(:func:`~opencode_memoryd.source.storages.registry.storage_of`). Rules it keeps, from how
SQLite's WAL mode treats readers and from how OpenCode opens the file
(``journal_mode=WAL``, ``busy_timeout=5000``; observed with OpenCode 1.2.1 to 1.18.33):

* the database is opened with a ``file:…?mode=ro`` URI (``immutable`` only on a folder that
  cannot be written, :mod:`~opencode_memoryd.source.uri`): never a write, never a
  checkpoint, never a PRAGMA that changes the file;
* every read is a short bounded query through an index whose cursor is fully consumed; a
  batch that must be consistent across tables runs in one explicit, short read transaction
  (:meth:`OpenCodeDB.read_transaction`) that is ended at once, so no read transaction is
  ever held between reads (an open reader stops OpenCode's checkpoints and lets its WAL
  grow);
* the schema is detected when the database is opened and again whenever SQLite's schema
  cookie changes (:meth:`OpenCodeDB.refresh_schema`): an OpenCode upgrade adds tables under a
  running daemon;
* text is decoded value by value: a value that is not UTF-8 never fails a query (SQLite
  keeps whatever bytes a writer gave it). A message or part whose ``data`` is not UTF-8 is
  flagged ``corrupt`` (and logged), a session's title or folder is repaired with U+FFFD, a
  session whose id is not UTF-8 is left out, and a message whose id is not UTF-8 fails the
  read of its own session (its position cannot be recorded as a mark).

Which tables and columns are required is decided in :mod:`opencode_memoryd.source.schema`;
the rows returned are the plain values of :mod:`opencode_memoryd.conversation.rows`.

Errors: :class:`~opencode_memoryd.errors.SourceError` when the file is missing or unreadable,
:class:`~opencode_memoryd.errors.SourceSchemaError` when a required table or column is absent.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.conversation.rows import MessageRow, SessionRow, decode_text
from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import Mark
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.schema import (
    SchemaInfo,
    UnknownTable,
    detect_schema,
    table_activity,
    unknown_tables,
)
from opencode_memoryd.source.storages import registry, sessions, v2
from opencode_memoryd.source.storages.base import Storage
from opencode_memoryd.source.storages.v2 import Activity
from opencode_memoryd.source.uri import read_uri

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

log = structlog.get_logger(__name__)

#: Largest number of messages read by one query.
MESSAGE_BATCH = 400


class OpenCodeDB:
    """A read-only view of one OpenCode database.

    Args:
        path: the ``opencode.db`` file.
        busy_timeout_ms: how long one read waits for a lock (recovery, a closing writer).

    Raises:
        SourceError: the file does not exist or SQLite cannot open it.
        SourceSchemaError: a required table or column is missing (the message names them).
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 3000) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"OpenCode database not found: {self.path}")
        self.identity = source_identity(self.path)
        uri = read_uri(self.path)
        timeout = max(busy_timeout_ms, 0) / 1000

        from sqlalchemy import create_engine
        from sqlalchemy.exc import DBAPIError
        from sqlalchemy.pool import StaticPool

        def connect() -> sqlite3.Connection:  # values decoded one by one (decode_text)
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False,
                                   isolation_level=None)
            conn.text_factory = decode_text
            return conn

        # One long-lived connection (PRAGMA data_version), autocommit at the driver: every
        # SELECT is its own read transaction unless we BEGIN.
        self._engine: Engine = create_engine("sqlite://", creator=connect, poolclass=StaticPool,
                                             isolation_level="AUTOCOMMIT")
        self._errors: tuple[type[BaseException], ...] = (DBAPIError, sqlite3.Error)
        self._conn: Connection | None = None
        # SELECTs run on its driver connection (SQLAlchemy's result set-up costs more)
        self._raw: sqlite3.Connection | None = None
        # one connection, shared by the daemon's threads: one statement at a time
        self._guard = threading.RLock()
        try:
            self._conn = self._engine.connect()
            raw = self._conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)  # StaticPool: never released
            self._raw = raw
            self._cookie = self.schema_cookie()
            self.schema: SchemaInfo = detect_schema(self.rows, self.path)
        except self._errors as exc:
            self.close()
            raise SourceError(f"cannot read OpenCode database {self.path}: "
                              f"{_reason(exc)}") from exc
        except SourceError:  # SourceSchemaError, or a catalogue read that failed
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        with self._guard:
            self._raw = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._engine.dispose()

    def __enter__(self) -> OpenCodeDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _driver(self) -> sqlite3.Connection:
        """The open driver connection; raises :class:`SourceError` once :meth:`close` was
        called."""
        if self._raw is None:
            raise SourceError(f"OpenCode database {self.path} is closed")
        return self._raw

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run one bounded read-only statement and return all its rows (the
        :class:`~opencode_memoryd.source.schema.Query` the storages read through).

        Raises:
            SourceError: SQLite failed, or a parameter is not UTF-8.
        """
        with self._guard:
            try:
                return self._driver().execute(sql, dict(params or {})).fetchall()
            except self._errors as exc:
                raise SourceError(f"reading {self.path} failed: {_reason(exc)}") from exc
            except UnicodeEncodeError as exc:  # a parameter that came from a bad row
                raise SourceError(f"reading {self.path} failed: a value is not UTF-8 "
                                  f"({exc.reason})") from exc

    @contextmanager
    def read_transaction(self) -> Iterator[None]:
        """One short, explicit read transaction (a consistent snapshot), always ended;
        a failed ``BEGIN`` or ``COMMIT`` raises :class:`SourceError`."""
        with self._guard:  # BEGIN/COMMIT on the driver: SQLAlchemy keeps no transaction
            raw = self._driver()
            try:
                raw.execute("BEGIN")
            except self._errors as exc:
                raise SourceError(f"reading {self.path} failed: {_reason(exc)}") from exc
            try:
                yield
            finally:
                try:
                    raw.execute("COMMIT")
                except self._errors as exc:
                    raise SourceError(f"reading {self.path} failed: "
                                      f"{_reason(exc)}") from exc

    def select(self, sql: str, params: Mapping[str, Any] | None = None
               ) -> list[tuple[Any, ...]]:
        """Run one read-only ``SELECT`` and return all its rows as tuples.

        For the query modules next to this one (:mod:`~opencode_memoryd.source.history`):
        the statement must be bounded (a ``LIMIT``, or a key lookup) and must not write;
        the database is opened read-only, so a write fails with :class:`SourceError`.

        Raises:
            SourceError: SQLite failed (locked past the busy timeout, a malformed file).
        """
        return [tuple(r) for r in self.rows(sql, params)]

    # -- change detection ------------------------------------------------------------

    def refresh_schema(self) -> bool:
        """Detect the schema again when the schema cookie changed since the last detection.

        Returns:
            ``True`` when the schema was detected again (whatever it found).

        Raises:
            SourceSchemaError: the new schema is not readable; the previous one stays.
            SourceError: a catalogue read failed.
        """
        cookie = self.schema_cookie()
        if cookie == self._cookie:
            return False
        self.schema = detect_schema(self.rows, self.path)
        self._cookie = cookie
        return True

    # -- sessions --------------------------------------------------------------------

    def sessions(
        self,
        *,
        directory: str | None = None,
        include_archived: bool = True,
        include_subagents: bool = False,
        updated_after_ms: int | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[SessionRow]:
        """List sessions of ``session_v2`` union ``session`` (by id, ``session_v2`` wins),
        oldest first.

        Args:
            directory: when given, only the sessions whose project worktree is this folder,
                or whose working directory is this folder or below it (a normalised absolute
                path; it need not exist on this machine).
            include_archived: keep archived sessions.
            include_subagents: keep sub-agent sessions (``parent_id`` set).
            updated_after_ms: only sessions with ``time_updated`` greater than this.
            ids: only these sessions.
        """
        where: list[str] = []
        params: dict[str, Any] = {}
        if directory is not None:
            d = directory.rstrip("/") or "/"
            params["dir"] = d
            params["prefix"] = (d if d.endswith("/") else d + "/")
            # the `global` project's worktree is "/": it never selects sessions by worktree
            where.append(
                "((p.worktree = :dir AND p.worktree != '/') OR s.directory = :dir "
                "OR substr(s.directory, 1, length(:prefix)) = :prefix)"
            )
        if not include_subagents:
            where.append("s.parent_id IS NULL")
        if updated_after_ms is not None:
            where.append("s.time_updated > :after")
            params["after"] = updated_after_ms
        if ids is not None:
            if not ids:
                return []
            params.update({f"id{k}": v for k, v in enumerate(ids)})
            where.append("s.id IN (" + ", ".join(f":id{k}" for k in range(len(ids))) + ")")
        out = sessions.session_rows(self.rows, self.schema, where, params)
        if not include_archived:
            out = [s for s in out if not s.archived]
        return out

    def insert_marks(self) -> dict[str, int]:
        """Where :meth:`inserted_since` starts: the newest rowid of each table holding
        sessions, messages and parts."""
        return sessions.insert_marks(self.rows, self.schema)

    def inserted_since(self, marks: Mapping[str, int]) -> tuple[set[str], dict[str, int]]:
        """The ids of the sessions (sub-agents included) that sessions, messages or parts
        were inserted for since ``marks``, and the new marks (see
        :func:`~opencode_memoryd.source.sessions.inserted_since`)."""
        return sessions.inserted_since(self.rows, self.schema, marks)

    def session_stamps(self, *, updated_after_ms: int | None = None,
                       ids: Sequence[str] | None = None, include_archived: bool = True
                       ) -> list[tuple[str, int, int]]:
        """``(id, time_created, time_updated)`` of the top-level sessions (updated after
        ``updated_after_ms``, among ``ids``; archived ones unless excluded): what change
        detection compares, read without building :class:`SessionRow` values."""
        if ids is not None and not ids:
            return []
        return sessions.session_stamps(self.rows, self.schema,
                                        updated_after_ms=updated_after_ms, ids=ids,
                                        include_archived=include_archived)

    def session_count(self) -> int:
        """How many top-level sessions :meth:`sessions` lists (archived ones included),
        counted without reading them."""
        return sessions.session_count(self.rows, self.schema, ["s.parent_id IS NULL"], {})

    def session(self, session_id: str) -> SessionRow | None:
        """One session by id (sub-agents included), or ``None`` when it was deleted."""
        rows = sessions.session_rows(self.rows, self.schema, ["s.id = :id"],
                                      {"id": session_id})
        return rows[0] if rows else None

    # -- turns, in the storage each session is read from ---------------------------

    def storage_for(self, session_id: str) -> Storage:
        """The storage the session's turns are read from (see
        :func:`~opencode_memoryd.source.storages.registry.storage_of`)."""
        return registry.storage_of(self, session_id)

    def storage_of(self, session_id: str) -> str:
        """The name of the storage the session's turns are read from
        (:attr:`~opencode_memoryd.models.Mark.storage`)."""
        return self.storage_for(session_id).name

    def messages_after(
        self,
        session_id: str,
        mark: tuple[int, str] | None,
        *,
        limit: int = MESSAGE_BATCH,
        storage: str | None = None,
        max_rowid: int | None = None,
    ) -> list[MessageRow]:
        """Read up to ``limit`` messages of a session after a high-water mark, with parts.

        Args:
            session_id: the session.
            mark: the position of the last message already processed in ``storage``, or
                ``None`` for the start of the session.
            limit: the most messages returned; call again from the last one for more.
            storage: the storage's name; the one the session is read from when ``None``.
            max_rowid: in a storage that keeps rowids, the largest rowid already
                processed (``None``: only ``mark`` counts).

        Returns:
            Messages in the storage's order, each with its parts (see
            :meth:`~opencode_memoryd.source.storages.base.Storage.messages_after`).

        Raises:
            SourceError: the read failed, a message's id is not UTF-8, or ``storage``
                names no known storage.
        """
        st = registry.named(storage) if storage else self.storage_for(session_id)
        return st.messages_after(self, session_id, mark, limit=limit, max_rowid=max_rowid)

    def last_messages(self, session_ids: Sequence[str]) -> dict[str, Mark]:
        """The position of each session's newest row, in the storage it is read from
        (``{session_id: Mark(storage, position)}``; sessions without any row are left
        out), through each storage's index in batches of 500 ids, without reading any
        message body: whether a session holds anything after its mark."""
        return registry.last_messages(self, session_ids)

    def max_rowids(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The largest rowid of each session's rows in the storages that keep rowids
        (sessions without such rows are left out); no message body read."""
        return registry.max_rowids(self, session_ids)

    def rowid_through(self, session_id: str, position: tuple[int, str], storage: str) -> int:
        """The largest rowid of the session's rows in ``storage`` at or before
        ``position`` (0 when none): what a mark recorded without a rowid stands for."""
        return registry.named(storage).rowid_through(self, session_id, position)

    def locate(self, session_id: str, message_id: str, storage: str) -> tuple[int, str] | None:
        """The position of one message of a session in ``storage``, or ``None`` when it is
        not there (used to carry a mark across storages and to see a wiped table)."""
        return registry.named(storage).locate(self, session_id, message_id)

    def may_have_tool_parts(self, session_id: str, storage: str) -> bool:
        """Whether the session may hold a ``tool`` or ``patch`` part (what changes files or
        runs commands); ``False`` only when its storage can tell there is none."""
        return registry.named(storage).may_have_tool_parts(self, session_id)

    def in_flight(self, session_id: str, *, now_ms: int, abandoned_ms: int,
                  row: SessionRow | None = None, unconfirmed_ms: int | None = None) -> bool:
        """Whether the session (or a sub-agent of it) has an assistant message in flight.

        Looks at the newest messages of the session and of its child sessions, each in the
        storage it is read from; a message in flight for longer than ``abandoned_ms`` does
        not count (a crashed OpenCode leaves one forever). A 2.x session whose
        ``time_suspended`` is set (its busy period claimed: a turn running, or waiting for
        queued prompts or background work) less than ``unconfirmed_ms`` ago (``None``:
        ``abandoned_ms``) is in flight too; an older claim, or one that is no past time, is
        left to the finished-turn rule. ``row``: the session's row when the caller has
        just read it (else it is looked up).
        """
        session = row if row is not None and row.id == session_id else self.session(session_id)
        return registry.in_flight(self, session_id, session, now_ms=now_ms,
                                  abandoned_ms=abandoned_ms, unconfirmed_ms=unconfirmed_ms)

    # -- change detection and diagnostics -------------------------------------------

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes whenever another connection commits."""
        return int(self.rows("PRAGMA data_version")[0][0])

    def schema_cookie(self) -> int:
        """``PRAGMA schema_version``: changes whenever a table or index is added or changed."""
        return int(self.rows("PRAGMA schema_version")[0][0])

    def activity(self, created_after_ms: int | None) -> Activity:
        """Per-session activity in ``session_message`` (see
        :func:`~opencode_memoryd.source.storages.v2.activity`)."""
        return v2.activity(self.rows, self.schema, created_after_ms)

    def unknown_tables(self) -> list[UnknownTable]:
        """Tables of an unknown shape holding per-session rows (see
        :func:`~opencode_memoryd.source.schema.unknown_tables`)."""
        return unknown_tables(self.rows, self.schema)

    def table_activity(self, tables: Sequence[str], since_ms: int
                       ) -> dict[str, tuple[int, int | None]]:
        """How many rows of each table were created after ``since_ms``, and the newest one
        (for ``doctor``; see :func:`~opencode_memoryd.source.schema.table_activity`)."""
        return table_activity(self.rows, tables, since_ms)


def _reason(exc: BaseException) -> str:
    """The driver's message of a (wrapped) SQLite error."""
    return str(getattr(exc, "orig", None) or exc)
