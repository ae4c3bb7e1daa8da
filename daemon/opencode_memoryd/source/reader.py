"""Read-only access to an OpenCode database (``opencode.db``): the 1.x tables and the v2 ones.

The only module in ``source`` that opens the database (one SQLAlchemy connection over
``sqlite3``, shared by the daemon's threads one statement at a time; ``sqlalchemy`` is
imported when the first database is opened): the statements of
:mod:`~opencode_memoryd.source.reader_v2` (v2 tables, the merged session list) and of
:mod:`~opencode_memoryd.source.lookups` (per-session lookups in either storage) run through
this module's connection. Rules it keeps, from how SQLite's WAL mode treats readers and from
how OpenCode opens the file
(``journal_mode=WAL``, ``busy_timeout=5000``; observed with OpenCode 1.2.1 to 1.18.33):

* the database is opened with a ``file:…?mode=ro`` URI (``immutable`` only on a folder that
  cannot be written, :mod:`~opencode_memoryd.source.uri`): never a write, never a
  checkpoint, never a PRAGMA that changes the file;
* every read is a short bounded query whose cursor is fully consumed; a batch that must be
  consistent across ``message`` and ``part`` runs in one explicit, short read transaction
  that is ended at once, so no read transaction is ever held between reads (an open reader
  stops OpenCode's checkpoints and lets its WAL grow);
* messages are ordered by ``(time_created, id)`` through the ``(session_id, time_created, id)``
  index and parts are read through the ``(message_id, id)`` index; there is no global scan;
* each session is read from one storage (:meth:`OpenCodeDB.storage_of`): ``session_message``
  when it has rows there, else ``message``/``part``;
* the schema is detected when the database is opened and again whenever SQLite's schema
  cookie changes (:meth:`OpenCodeDB.refresh_schema`): an OpenCode upgrade adds tables under a
  running daemon;
* text is decoded value by value: a value that is not UTF-8 never fails a query (SQLite
  keeps whatever bytes a writer gave it). A message or part whose ``data`` is not UTF-8 is
  flagged ``corrupt`` (and logged), a session's title or folder is repaired with U+FFFD, a
  session whose id is not UTF-8 is left out, and a message whose id is not UTF-8 fails the
  read of its own session (its position cannot be recorded as a mark).

Which tables and columns are required is decided in :mod:`opencode_memoryd.source.schema`;
the rows returned are the plain values of :mod:`opencode_memoryd.source.rows`.

Errors: :class:`~opencode_memoryd.errors.SourceError` when the file is missing or unreadable,
:class:`~opencode_memoryd.errors.SourceSchemaError` when a required table or column is absent.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import STORAGE_SESSION_MESSAGE
from opencode_memoryd.source import reader_v2
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.lookups import SessionLookups
from opencode_memoryd.source.rows import (
    MessageRow,
    PartRow,
    SessionRow,
    clean_text,
    decode_object,
    decode_text,
    is_utf8,
)
from opencode_memoryd.source.schema import SchemaInfo, detect_schema
from opencode_memoryd.source.uri import read_uri

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

log = structlog.get_logger(__name__)

#: Largest number of messages read by one query.
MESSAGE_BATCH = 400


class OpenCodeDB(SessionLookups):
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
            self.schema: SchemaInfo = detect_schema(self._rows, self.path)
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

    def _rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._guard:
            try:
                return self._driver().execute(sql, dict(params or {})).fetchall()
            except self._errors as exc:
                raise SourceError(f"reading {self.path} failed: {_reason(exc)}") from exc
            except UnicodeEncodeError as exc:  # a parameter that came from a bad row
                raise SourceError(f"reading {self.path} failed: a value is not UTF-8 "
                                  f"({exc.reason})") from exc

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        """One short, explicit read transaction (consistent snapshot), always ended."""
        with self._guard:  # BEGIN/COMMIT on the driver: SQLAlchemy keeps no transaction
            raw = self._driver()
            raw.execute("BEGIN")
            try:
                yield
            finally:
                raw.execute("COMMIT")

    def select(self, sql: str, params: Mapping[str, Any] | None = None
               ) -> list[tuple[Any, ...]]:
        """Run one read-only ``SELECT`` and return all its rows as tuples.

        For the query modules next to this one (:mod:`~opencode_memoryd.source.history`):
        the statement must be bounded (a ``LIMIT``, or a key lookup) and must not write;
        the database is opened read-only, so a write fails with :class:`SourceError`.

        Raises:
            SourceError: SQLite failed (locked past the busy timeout, a malformed file).
        """
        return [tuple(r) for r in self._rows(sql, params)]

    def session_select(self) -> str:
        """``SELECT … FROM session s LEFT JOIN project p`` yielding :class:`SessionRow`
        columns in order (``time_archived`` is ``NULL`` where the column does not exist);
        append a ``WHERE`` clause."""
        archived = ("s.time_archived" if "time_archived" in self.schema.session_columns
                    else "NULL")
        return (f"SELECT s.id, s.project_id, s.parent_id, s.directory, s.title, "
                f"s.time_created, s.time_updated, {archived}, "
                f"coalesce(p.worktree, s.directory) "
                f"FROM session s LEFT JOIN project p ON p.id = s.project_id")

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
        self.schema = detect_schema(self._rows, self.path)
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
        out = reader_v2.session_rows(self._rows, self.schema, where, params)
        if not include_archived:
            out = [s for s in out if not s.archived]
        return out

    def insert_marks(self) -> dict[str, int]:
        """Where :meth:`inserted_since` starts: the newest rowid of each table holding
        sessions, messages and parts."""
        return reader_v2.insert_marks(self._rows, self.schema)

    def inserted_since(self, marks: Mapping[str, int]) -> tuple[set[str], dict[str, int]]:
        """The ids of the sessions (sub-agents included) that sessions, messages or parts
        were inserted for since ``marks``, and the new marks (see
        :func:`~opencode_memoryd.source.reader_v2.inserted_since`)."""
        return reader_v2.inserted_since(self._rows, self.schema, marks)

    def session_stamps(self, *, updated_after_ms: int | None = None,
                       ids: Sequence[str] | None = None, include_archived: bool = True
                       ) -> list[tuple[str, int, int]]:
        """``(id, time_created, time_updated)`` of the top-level sessions (updated after
        ``updated_after_ms``, among ``ids``; archived ones unless excluded): what change
        detection compares, read without building :class:`SessionRow` values."""
        if ids is not None and not ids:
            return []
        return reader_v2.session_stamps(self._rows, self.schema,
                                        updated_after_ms=updated_after_ms, ids=ids,
                                        include_archived=include_archived)

    def session_count(self) -> int:
        """How many top-level sessions :meth:`sessions` lists (archived ones included),
        counted without reading them."""
        return reader_v2.session_count(self._rows, self.schema, ["s.parent_id IS NULL"], {})

    def session(self, session_id: str) -> SessionRow | None:
        """One session by id (sub-agents included), or ``None`` when it was deleted."""
        rows = reader_v2.session_rows(self._rows, self.schema, ["s.id = :id"],
                                      {"id": session_id})
        return rows[0] if rows else None

    # -- messages --------------------------------------------------------------------

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

        In ``message``, a row is after the mark when its ``(time_created, id)`` is larger,
        or its ``rowid`` is larger than ``max_rowid``: a message written later with a
        smaller time (a clock set back, or an earlier row stamped in the future) is read.

        Args:
            session_id: the session.
            mark: the position of the last message already processed in ``storage``
                (``(time_created, id)`` in ``message``, ``(seq, id)`` in
                ``session_message``), or ``None`` for the start of the session.
            limit: the most messages returned; call again from the last one for more.
            storage: the table to read; :meth:`storage_of` the session when ``None``.
            max_rowid: in ``message``, the largest rowid already processed (``None``:
                only ``mark`` counts).

        Returns:
            Messages in ``(time_created, id)`` (``message``) or ``seq``
            (``session_message``) order, each with its parts. Messages and parts come from
            one consistent snapshot; the read transaction is closed on return. A row whose
            ``data`` cannot be decoded is flagged ``corrupt``.

        Raises:
            SourceError: the read failed, or a message's id is not UTF-8.
        """
        if (storage or self.storage_of(session_id)) == STORAGE_SESSION_MESSAGE:
            return reader_v2.messages_after(self._rows, session_id, mark, limit)
        if not self.schema.has_v1_messages:
            return []
        params: dict[str, Any] = {"sid": session_id, "limit": limit}
        cond = ""
        if mark is not None:
            params["t"], params["mid"] = mark
            after = "time_created > :t OR (time_created = :t AND id > :mid)"
            if max_rowid is not None:
                params["rowid"] = max_rowid
                after += " OR rowid > :rowid"
            cond = f"AND ({after})"
        return self._messages(f"session_id = :sid {cond} ORDER BY time_created, id "
                              "LIMIT :limit", params)

    def message_count(self, session_id: str) -> int:
        """How many messages a session has (counted on the ``(session_id, …)`` index)."""
        return int(self._rows("SELECT count(*) FROM message WHERE session_id = :sid",
                              {"sid": session_id})[0][0])

    def message_page(self, session_id: str, *, offset: int, limit: int) -> list[MessageRow]:
        """Messages ``offset`` … ``offset + limit - 1`` of a session, with their parts.

        The page's ids are picked on the ``(session_id, time_created, id)`` index (rows
        skipped by ``offset`` are never read), then those rows are read in one consistent
        snapshot, in ``(time_created, id)`` order.
        """
        return self._messages(
            "id IN (SELECT id FROM message WHERE session_id = :sid "
            "ORDER BY time_created, id LIMIT :limit OFFSET :offset) "
            "ORDER BY time_created, id",
            {"sid": session_id, "limit": limit, "offset": offset})

    def _messages(self, where: str, params: Mapping[str, Any]) -> list[MessageRow]:
        """Messages matching ``where`` (with its ORDER BY/LIMIT) and their parts, read in
        one short read transaction that is closed on return."""
        try:
            with self._read_transaction():
                rows = self._rows(
                    "SELECT id, session_id, time_created, time_updated, data, rowid "
                    f"FROM message WHERE {where}", params)
                messages: list[MessageRow] = []
                for r in rows:
                    if not is_utf8(r[0]):
                        raise SourceError(
                            f"reading {self.path} failed: message {clean_text(r[0])!r} of "
                            f"session {r[1]} (created at {r[2]}) has an id that is not "
                            "UTF-8; the session cannot be read past it")
                    data, corrupt = decode_object(r[4])
                    if corrupt:
                        log.warning("corrupt_message_row", message_id=r[0], session_id=r[1])
                    messages.append(MessageRow(r[0], r[1], int(r[2]), int(r[3]), data,
                                               corrupt=corrupt, rowid=int(r[5])))
                self._attach_parts(messages)
        except self._errors as exc:  # raised by BEGIN/COMMIT
            raise SourceError(f"reading {self.path} failed: {_reason(exc)}") from exc
        return messages

    def _attach_parts(self, messages: Sequence[MessageRow]) -> None:
        by_id = {m.id: m for m in messages}
        for chunk in _chunks(list(by_id), 200):
            names = {f"m{i}": mid for i, mid in enumerate(chunk)}
            placeholders = ", ".join(f":{k}" for k in names)
            for pid, mid, raw in self._rows(
                f"SELECT id, message_id, data FROM part WHERE message_id IN ({placeholders}) "
                "ORDER BY message_id, id",
                names,
            ):
                data, corrupt = decode_object(raw)
                if corrupt:
                    log.warning("corrupt_part_row", part_id=clean_text(pid), message_id=mid)
                by_id[mid].parts.append(PartRow(clean_text(pid), data, corrupt))


def _reason(exc: BaseException) -> str:
    """The driver's message of a (wrapped) SQLite error."""
    return str(getattr(exc, "orig", None) or exc)


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
