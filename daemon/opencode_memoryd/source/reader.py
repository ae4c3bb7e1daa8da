"""Read-only access to the 1.x tables of an OpenCode database (``opencode.db``).

The only module in ``source`` that talks SQL through SQLAlchemy. Rules it keeps, from how
SQLite's WAL mode treats readers and from how OpenCode opens the file
(``journal_mode=WAL``, ``busy_timeout=5000``; observed with OpenCode 1.2.1 to 1.18.33):

* the database is opened with a ``file:…?mode=ro`` URI: never ``immutable``, never a write,
  never a checkpoint, never a PRAGMA that changes the file;
* every read is a short bounded query whose cursor is fully consumed; a batch that must be
  consistent across ``message`` and ``part`` runs in one explicit, short read transaction
  that is ended at once, so no read transaction is ever held between reads (an open reader
  stops OpenCode's checkpoints and lets its WAL grow);
* messages are ordered by ``(time_created, id)`` through the ``(session_id, time_created, id)``
  index and parts are read through the ``(message_id, id)`` index; there is no global scan;
* text is decoded row by row: a value that is not valid UTF-8 never fails a query (SQLite
  stores whatever bytes a writer gave it). A message or part whose ``data`` is not UTF-8 is
  returned flagged ``corrupt`` (and logged), a session's title or folder is repaired with
  U+FFFD, and a session or message whose *id* is not UTF-8 is left out (sessions) or fails
  the read of its own session (messages: its position cannot be recorded as a mark).

Which tables and columns are required is decided in :mod:`opencode_memoryd.source.schema`;
the rows returned are the plain values of :mod:`opencode_memoryd.source.rows`. Sessions that
OpenCode 2 writes to ``session_v2``/``session_message`` are not read here.

Errors: :class:`~opencode_memoryd.errors.SourceError` when the file is missing or unreadable,
:class:`~opencode_memoryd.errors.SourceSchemaError` when a required table or column is absent.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

from opencode_memoryd.errors import SourceError
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.rows import (
    MessageRow,
    PartRow,
    SessionRow,
    clean_text,
    decode_object,
    is_utf8,
    sub_object,
)
from opencode_memoryd.source.schema import SchemaInfo, detect_schema

log = structlog.get_logger(__name__)

#: Largest number of messages read by one query.
MESSAGE_BATCH = 400


def _decode_text(raw: bytes) -> str:
    """SQLite TEXT to ``str``, one value at a time: bytes that are not UTF-8 become lone
    surrogates (``surrogateescape``) instead of failing the whole query."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


def _session_row(r: Sequence[Any]) -> SessionRow | None:
    """A ``session`` query row as a :class:`SessionRow`; ``None`` (logged) when its id is
    not UTF-8. Its title and folders are repaired."""
    if not (is_utf8(r[0]) and is_utf8(r[1] or "")):
        log.warning("corrupt_session_row", reason="id is not UTF-8")
        return None
    values: list[Any] = [clean_text(v) if isinstance(v, str) else v for v in r]
    return SessionRow(*values)


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
        uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        timeout = max(busy_timeout_ms, 0) / 1000

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False,
                                   isolation_level=None)
            conn.text_factory = _decode_text
            return conn

        # One long-lived connection (needed for PRAGMA data_version), autocommit at the
        # DB-API level: every SELECT is its own short read transaction unless we BEGIN.
        self._engine: Engine = create_engine(
            "sqlite://", creator=connect, poolclass=StaticPool
        )
        self._conn: Connection | None = None
        # one connection, shared by the daemon's threads: one statement at a time
        self._guard = threading.RLock()
        try:
            self._conn = self._engine.connect()
            self.schema: SchemaInfo = detect_schema(self._rows, self.path)
        except DBAPIError as exc:
            self.close()
            raise SourceError(f"cannot read OpenCode database {self.path}: {exc.orig}") from exc
        except SourceError:  # SourceSchemaError, or a catalogue read that failed
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._engine.dispose()

    def __enter__(self) -> OpenCodeDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> Connection:
        """The open connection; raises :class:`SourceError` once :meth:`close` was called."""
        if self._conn is None:
            raise SourceError(f"OpenCode database {self.path} is closed")
        return self._conn

    def _rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._guard:
            try:
                return list(self.conn.execute(text(sql), dict(params or {})).all())
            except DBAPIError as exc:
                raise SourceError(f"reading {self.path} failed: {exc.orig}") from exc
            except UnicodeEncodeError as exc:  # a parameter that came from a bad row
                raise SourceError(f"reading {self.path} failed: a value is not UTF-8 "
                                  f"({exc.reason})") from exc

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        """One short, explicit read transaction (consistent snapshot), always ended."""
        with self._guard:
            raw = self.conn.connection.driver_connection
            assert raw is not None
            raw.execute("BEGIN")
            try:
                yield
            finally:
                raw.execute("COMMIT")

    # -- change detection ------------------------------------------------------------

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes whenever another connection commits."""
        return int(self._rows("PRAGMA data_version")[0][0])

    # -- sessions --------------------------------------------------------------------

    def sessions(
        self,
        *,
        directory: str | None = None,
        include_archived: bool = True,
        include_subagents: bool = False,
        updated_after_ms: int | None = None,
    ) -> list[SessionRow]:
        """List sessions, oldest first.

        Args:
            directory: when given, only the sessions whose project worktree is this folder,
                or whose working directory is this folder or below it (a normalised absolute
                path; it need not exist on this machine).
            include_archived: keep archived sessions.
            include_subagents: keep sub-agent sessions (``parent_id`` set).
            updated_after_ms: only sessions with ``time_updated`` greater than this.
        """
        archived = ("s.time_archived" if "time_archived" in self.schema.session_columns
                    else "NULL")
        where = ["1=1"]
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
        rows = self._rows(
            f"""SELECT s.id, s.project_id, s.parent_id, s.directory, s.title, s.time_created,
                       s.time_updated, {archived}, coalesce(p.worktree, s.directory)
                FROM session s LEFT JOIN project p ON p.id = s.project_id
                WHERE {' AND '.join(where)}
                ORDER BY s.time_created, s.id""",
            params,
        )
        out = [s for s in map(_session_row, rows) if s is not None]
        if not include_archived:
            out = [s for s in out if not s.archived]
        return out

    def session(self, session_id: str) -> SessionRow | None:
        """One session by id (sub-agents included), or ``None`` when it was deleted."""
        archived = ("s.time_archived" if "time_archived" in self.schema.session_columns
                    else "NULL")
        rows = self._rows(
            f"""SELECT s.id, s.project_id, s.parent_id, s.directory, s.title, s.time_created,
                       s.time_updated, {archived}, coalesce(p.worktree, s.directory)
                FROM session s LEFT JOIN project p ON p.id = s.project_id
                WHERE s.id = :id""",
            {"id": session_id},
        )
        return _session_row(rows[0]) if rows else None

    def last_messages(self, session_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The position ``(time_created, id)`` of each session's newest message.

        One lookup per session through the ``(session_id, time_created, id)`` index, in
        batches of 500 ids; sessions without messages are left out. Used to tell, without
        reading any message bodies, whether a session holds anything after its mark.

        Args:
            session_ids: the sessions to look up.

        Returns:
            ``{session_id: (time_created_ms, message_id)}``.
        """
        rows = self._per_session(session_ids, """SELECT ids.sid, m.time_created, m.id
            FROM ids JOIN message m ON m.id = (SELECT id FROM message WHERE session_id =
                ids.sid ORDER BY time_created DESC, id DESC LIMIT 1)""")
        return {r[0]: (int(r[1]), str(r[2])) for r in rows if is_utf8(r[2])}

    def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The largest message ``rowid`` of each session (sessions without messages are
        left out); one index range per session, no message body read."""
        rows = self._per_session(session_ids, """SELECT ids.sid, (SELECT max(rowid)
            FROM message WHERE session_id = ids.sid) FROM ids""")
        return {r[0]: int(r[1]) for r in rows if r[1] is not None}

    def _per_session(self, session_ids: Sequence[str], select: str) -> list[Any]:
        """Run ``select`` over ``WITH ids(sid)`` holding the ids, 500 at a time."""
        out: list[Any] = []
        ids = list(session_ids)
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            values = ", ".join(f"(:i{k})" for k in range(len(batch)))
            out += self._rows(f"WITH ids(sid) AS (VALUES {values}) {select}",
                              {f"i{k}": sid for k, sid in enumerate(batch)})
        return out

    def in_flight(self, session_id: str, *, now_ms: int, abandoned_ms: int) -> bool:
        """Whether the session (or a sub-agent of it) has an assistant message in flight.

        Looks at the newest 20 messages of the session and of its child sessions through
        the ``(session_id, time_created, id)`` index; a message in flight for longer than
        ``abandoned_ms`` does not count (a crashed OpenCode leaves one forever).
        """
        ids = [session_id] + [r[0] for r in self._rows(
            "SELECT id FROM session WHERE parent_id = :sid", {"sid": session_id})
            if is_utf8(r[0])]
        for sid in ids:
            for (raw,) in self._rows(
                "SELECT data FROM message WHERE session_id = :sid "
                "ORDER BY time_created DESC, id DESC LIMIT 20", {"sid": sid}
            ):
                data, corrupt = decode_object(raw)
                if corrupt or data.get("role") != "assistant" or data.get("error"):
                    continue
                t = sub_object(data, "time")
                if t.get("completed") is None:
                    created = t.get("created")
                    if isinstance(created, int | float) and now_ms - created < abandoned_ms:
                        return True
        return False

    # -- messages --------------------------------------------------------------------

    def seq_through(self, session_id: str, mark: tuple[int, str]) -> int:
        """The largest ``rowid`` of the session's messages at or before ``mark`` by
        ``(time_created, id)`` (0 when none): the ``seq`` a mark recorded before marks
        had one stands for."""
        rows = self._rows(
            """SELECT max(rowid) FROM message WHERE session_id = :sid
               AND (time_created < :t OR (time_created = :t AND id <= :mid))""",
            {"sid": session_id, "t": mark[0], "mid": mark[1]},
        )
        return int(rows[0][0] or 0) if rows else 0

    def messages_after(
        self,
        session_id: str,
        mark: tuple[int, str] | None,
        *,
        seq: int | None = None,
        limit: int = MESSAGE_BATCH,
    ) -> list[MessageRow]:
        """Read up to ``limit`` messages of a session after a high-water mark, with parts.

        A message is after the mark when its ``(time_created, id)`` is larger than
        ``mark``, or its ``rowid`` is larger than ``seq``: a message written later with a
        smaller time (a writer's clock set back, or an earlier message stamped in the
        future) is still read.

        Args:
            session_id: the session.
            mark: ``(time_created, id)`` of the last message already processed, or ``None``
                for the start of the session.
            seq: the largest ``rowid`` already processed, or ``None`` (then only ``mark``
                counts).
            limit: the most messages returned; call again from the last one for more.

        Returns:
            Messages in ``(time_created, id)`` order, each with its parts. Messages and parts
            come from one consistent snapshot; the read transaction is closed on return. A
            message or part whose ``data`` cannot be decoded is flagged ``corrupt``.

        Raises:
            SourceError: the read failed, or a message's id is not UTF-8 (its position
                cannot be stored as a mark, so this session cannot be read past it).
        """
        params: dict[str, Any] = {"sid": session_id, "limit": limit}
        cond = ""
        if mark is not None:
            params["t"], params["mid"] = mark
            after = "time_created > :t OR (time_created = :t AND id > :mid)"
            if seq is not None:
                params["seq"] = seq
                after += " OR rowid > :seq"
            cond = f"AND ({after})"
        try:
            with self._read_transaction():
                rows = self._rows(
                    f"""SELECT id, session_id, time_created, time_updated, data, rowid
                        FROM message WHERE session_id = :sid {cond}
                        ORDER BY time_created, id LIMIT :limit""",
                    params,
                )
                messages: list[MessageRow] = []
                for r in rows:
                    if not is_utf8(r[0]):
                        raise SourceError(
                            f"reading {self.path} failed: message {clean_text(r[0])!r} of "
                            f"session {session_id} (created at {r[2]}) has an id that is not "
                            "UTF-8; the session cannot be read past it")
                    data, corrupt = decode_object(r[4])
                    if corrupt:
                        log.warning("corrupt_message_row", message_id=r[0], session_id=r[1])
                    messages.append(MessageRow(r[0], r[1], int(r[2]), int(r[3]), data,
                                               corrupt=corrupt, seq=int(r[5])))
                self._attach_parts(messages)
        except sqlite3.Error as exc:  # raised by BEGIN/COMMIT on the raw connection
            raise SourceError(f"reading {self.path} failed: {exc}") from exc
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


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
