"""The statements for OpenCode's v2 storage and for the merged session list.

Run through the :class:`~opencode_memoryd.source.schema.Query` of an open
:class:`~opencode_memoryd.source.reader.OpenCodeDB` (which owns the read-only connection and
its rules); nothing here opens a database. Rules, from ``session_message`` rows written by
OpenCode 1.18.33 and the 2.x layout reported by other readers:

* the session list is ``session_v2`` union ``session`` joined by id, the ``session_v2`` row
  winning (2.x copies 1.x sessions under the same id); ``session_v2.title`` may be NULL;
* a session's turns come from ``session_message`` when it has rows there, else from
  ``message``/``part``; never both (copied rows keep their ids);
* ``session_message`` rows are ordered by ``seq``, which rises within a session but has
  gaps; positions are ``(seq, id)``; every read goes through the ``(session_id, seq)``,
  ``(session_id, type, seq)`` or ``(time_created)`` index;
* rows are updated in place after insert, and v2 turns never bump ``session.time_updated``,
  so change detection reads ``session_message`` itself (:func:`activity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from opencode_memoryd.models import STORAGE_MESSAGE, STORAGE_SESSION_MESSAGE
from opencode_memoryd.source.rows import (
    MessageRow,
    SessionRow,
    decode_object,
    is_utf8,
    session_from_row,
    sub_object,
)
from opencode_memoryd.source.schema import Query, SchemaInfo
from opencode_memoryd.source.v2rows import message_from_v2

log = structlog.get_logger(__name__)

#: Rows in a table of unknown shape count as recent writes when this young (ms).
RECENT_WRITES_MS = 3 * 86_400_000
#: Columns of a time stamp in an unknown table, tried in this order.
_TIME_COLUMNS = ("time_updated", "time_created", "updated", "created", "time")


def session_union(schema: SchemaInfo, where: Sequence[str]) -> str | None:
    """The ``SELECT … UNION ALL …`` of both session tables matching ``where`` (conditions on
    ``s``, the session, and ``p``, its project), or ``None`` when neither table exists.

    Its columns are those of :class:`SessionRow`, in order and under the same names
    (``id`` … ``time_suspended``; ``table`` is ``source_table``), so a query can wrap it."""
    cond = " AND ".join(where) or "1=1"
    selects = []
    if schema.has_v2_sessions:
        def col(name: str) -> str:
            return f"s.{name}" if name in schema.v2_session_columns else "NULL"

        archived, idle, suspended = (col("time_archived"), col("time_idle"),
                                     col("time_suspended"))
        selects.append(
            f"""SELECT s.id AS id, s.project_id AS project_id, s.parent_id AS parent_id,
                       s.directory AS directory, coalesce(s.title, '') AS title,
                       s.time_created AS time_created, s.time_updated AS time_updated,
                       {archived} AS time_archived,
                       coalesce(p.worktree, s.directory) AS worktree,
                       'session_v2' AS source_table, {idle} AS time_idle,
                       {suspended} AS time_suspended
                FROM session_v2 s LEFT JOIN project p ON p.id = s.project_id
                WHERE {cond}""")
    if schema.has_v1_sessions:
        archived = ("s.time_archived" if "time_archived" in schema.session_columns
                    else "NULL")
        shadowed = (" AND s.id NOT IN (SELECT id FROM session_v2)"
                    if schema.has_v2_sessions else "")
        selects.append(
            f"""SELECT s.id AS id, s.project_id AS project_id, s.parent_id AS parent_id,
                       s.directory AS directory, s.title AS title,
                       s.time_created AS time_created, s.time_updated AS time_updated,
                       {archived} AS time_archived,
                       coalesce(p.worktree, s.directory) AS worktree,
                       'session' AS source_table, NULL AS time_idle, NULL AS time_suspended
                FROM session s LEFT JOIN project p ON p.id = s.project_id
                WHERE {cond}{shadowed}""")
    return " UNION ALL ".join(selects) if selects else None


def session_rows(query: Query, schema: SchemaInfo, where: Sequence[str],
                 params: dict[str, Any]) -> list[SessionRow]:
    """Sessions of ``session_v2`` union ``session`` matching ``where``, oldest first.

    Args:
        where: SQL conditions on ``s`` (the session row) and ``p`` (its project), ANDed.
        params: their named parameters.
    """
    union = session_union(schema, where)
    if union is None:
        return []
    rows = query(union + " ORDER BY 6, 1", params)
    out = [s for s in map(session_from_row, rows) if s is not None]
    if len(out) < len(rows):
        log.warning("corrupt_session_row", skipped=len(rows) - len(out),
                    reason="an id is not UTF-8")
    return out


def session_count(query: Query, schema: SchemaInfo, where: Sequence[str],
                  params: dict[str, Any]) -> int:
    """How many sessions :func:`session_rows` would return (counted in SQL)."""
    union = session_union(schema, where)
    if union is None:
        return 0
    return int(query(f"SELECT count(*) FROM ({union})", params)[0][0])


#: A session as change detection sees it: ``(id, time_created, time_updated)``.
Stamp = tuple[str, int, int]


def session_stamps(query: Query, schema: SchemaInfo, *, updated_after_ms: int | None,
                   ids: Sequence[str] | None, include_archived: bool) -> list[Stamp]:
    """The top-level sessions of both session tables as :data:`Stamp` tuples (three
    columns, no join; ``session_v2`` wins for an id in both), for change detection.

    Args:
        updated_after_ms: only sessions with ``time_updated`` greater than this.
        ids: only these sessions.
        include_archived: keep archived sessions.
    """
    out: dict[str, Stamp] = {}
    for table, present, columns in (
            ("session", schema.has_v1_sessions, schema.session_columns),
            ("session_v2", schema.has_v2_sessions, schema.v2_session_columns)):
        if not present:
            continue
        # without ids, every row is looked at: a scan of the table is cheaper than going
        # through the ``parent_id`` index and back to the table for each row (``+``: no index)
        where: list[str] = ["parent_id IS NULL" if ids is not None else "+parent_id IS NULL"]
        params: dict[str, Any] = {}
        if updated_after_ms is not None:
            where.append("time_updated > :after")
            params["after"] = updated_after_ms
        if ids is not None:
            params.update({f"id{k}": v for k, v in enumerate(ids)})
            where.append("id IN (" + ", ".join(f":id{k}" for k in range(len(ids))) + ")")
        if not include_archived and "time_archived" in columns:
            where.append("NOT coalesce(time_archived, 0) > 0")
        if table == "session" and schema.has_v2_sessions:  # shadowed by session_v2
            where.append("id NOT IN (SELECT id FROM session_v2)")
        for r in query(f"SELECT id, time_created, time_updated FROM {table} WHERE "
                       + " AND ".join(where), params):
            if is_utf8(r[0]):  # an id that is not UTF-8 cannot be looked up again
                out[str(r[0])] = (str(r[0]), int(r[1]), int(r[2]))
    return list(out.values())


#: Tables whose new rows name the session they belong to: ``(table, session id column)``.
INSERT_TABLES: tuple[tuple[str, str], ...] = (
    ("session", "id"), ("session_v2", "id"), ("message", "session_id"),
    ("part", "session_id"))


def insert_marks(query: Query, schema: SchemaInfo) -> dict[str, int]:
    """The newest ``rowid`` of each table of :data:`INSERT_TABLES` that exists (0 when
    empty): where :func:`inserted_since` starts."""
    out: dict[str, int] = {}
    for table, _col in INSERT_TABLES:
        if table in schema.tables:
            row = query(f"SELECT max(rowid) FROM {table}")
            out[table] = int(row[0][0]) if row and row[0][0] is not None else 0
    return out


def inserted_since(query: Query, schema: SchemaInfo, marks: Mapping[str, int]
                   ) -> tuple[set[str], dict[str, int]]:
    """The sessions that rows were inserted for since ``marks`` (see :func:`insert_marks`),
    and the new marks.

    Every table is a rowid table and OpenCode only appends, so new rows have larger rowids
    and are found on the rowid B-tree without a scan, however big the table; a table that
    is new since ``marks`` is read from its start. Updates in place (a session's
    ``time_updated``, a message completed) are not seen here.
    """
    touched: set[str] = set()
    out: dict[str, int] = {}
    for table, col in INSERT_TABLES:
        if table not in schema.tables:
            continue
        after = marks.get(table, 0)
        newest = after
        for rowid, sid in query(f"SELECT rowid, {col} FROM {table} WHERE rowid > :r",
                                {"r": after}):
            if isinstance(sid, str) and is_utf8(sid):
                touched.add(sid)
            newest = max(newest, int(rowid))
        out[table] = newest
    return touched, out


def child_ids(query: Query, schema: SchemaInfo, session_id: str) -> list[str]:
    """The sub-agent sessions of a session, from both session tables."""
    parts = [f"SELECT id FROM {t} WHERE parent_id = :sid" for t, present in
             (("session", schema.has_v1_sessions), ("session_v2", schema.has_v2_sessions))
             if present]
    if not parts:
        return []
    return [str(r[0]) for r in query(" UNION ".join(parts), {"sid": session_id})
            if is_utf8(str(r[0]))]


def storage_of(query: Query, schema: SchemaInfo, session_id: str) -> str:
    """``session_message`` when the session has a row there, else ``message``."""
    if schema.has_session_message and query(
            "SELECT 1 FROM session_message WHERE session_id = :sid LIMIT 1",
            {"sid": session_id}):
        return STORAGE_SESSION_MESSAGE
    return STORAGE_MESSAGE


def messages_after(query: Query, session_id: str, mark: tuple[int, str] | None,
                   limit: int) -> list[MessageRow]:
    """Up to ``limit`` rows of a session after position ``(seq, id)``, in ``seq`` order."""
    after = "AND seq > :seq" if mark is not None else ""
    rows = query(
        f"""SELECT id, session_id, type, seq, time_created, time_updated, data
            FROM session_message WHERE session_id = :sid {after}
            ORDER BY seq LIMIT :limit""",
        {"sid": session_id, "seq": mark[0] if mark else 0, "limit": limit},
    )
    return [message_from_v2(*r) for r in rows]


def last_positions(query: Query, session_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
    """The ``(seq, id)`` of each session's newest ``session_message`` row (batches of 500);
    sessions without rows are left out."""
    out: dict[str, tuple[int, str]] = {}
    ids = list(session_ids)
    for start in range(0, len(ids), 500):
        batch = ids[start:start + 500]
        params = {f"i{k}": sid for k, sid in enumerate(batch)}
        values = ", ".join(f"(:i{k})" for k in range(len(batch)))
        rows = query(
            f"""WITH ids(sid) AS (VALUES {values})
                SELECT ids.sid, m.seq, m.id
                FROM ids JOIN session_message m ON m.session_id = ids.sid AND m.seq = (
                    SELECT max(seq) FROM session_message WHERE session_id = ids.sid)""",
            params,
        )
        out.update({str(r[0]): (int(r[1]), str(r[2])) for r in rows})
    return out


def locate(query: Query, session_id: str, message_id: str) -> tuple[int, str] | None:
    """The ``(seq, id)`` of one row of a session, or ``None`` when it is not there."""
    rows = query("SELECT seq FROM session_message WHERE id = :id AND session_id = :sid",
                 {"id": message_id, "sid": session_id})
    return (int(rows[0][0]), message_id) if rows else None


def assistant_in_flight(query: Query, session_id: str, *, now_ms: int,
                        abandoned_ms: int) -> bool:
    """Whether one of the session's newest 20 assistant rows has no ``time.completed``
    and no ``error`` and started less than ``abandoned_ms`` ago."""
    for (raw,) in query(
        "SELECT data FROM session_message WHERE session_id = :sid AND type = 'assistant' "
        "ORDER BY seq DESC LIMIT 20", {"sid": session_id}
    ):
        data, corrupt = decode_object(raw)
        if corrupt or data.get("error"):
            continue
        t = sub_object(data, "time")
        created = t.get("created")
        if (t.get("completed") is None and isinstance(created, int | float)
                and now_ms - created < abandoned_ms):
            return True
    return False


@dataclass(slots=True)
class Activity:
    """What :func:`activity` saw in ``session_message``.

    Attributes:
        seqs: the newest ``seq`` per session.
        updated: the newest ``time_updated`` per session, among the rows created after
            the bound (empty for a full pass).
        newest_created: the newest ``time_created`` of any row (ms), ``None`` when empty.
    """

    seqs: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    newest_created: int | None = None


def activity(query: Query, schema: SchemaInfo, created_after_ms: int | None) -> Activity:
    """Per-session activity in ``session_message``, for change detection.

    With ``created_after_ms`` only the rows created after it are read, through the
    ``(time_created)`` index, and their newest ``time_updated`` catches in-place updates
    too; without it (a full pass) the newest ``seq`` of every session is read from the
    ``(session_id, seq)`` index, which also shows a wipe (``seq`` going down).
    """
    out = Activity()
    if not schema.has_session_message:
        return out
    if created_after_ms is None:
        for sid, seq in query("SELECT session_id, max(seq) FROM session_message "
                              "GROUP BY session_id"):
            out.seqs[str(sid)] = int(seq)
        newest = query("SELECT max(time_created) FROM session_message")
        out.newest_created = int(newest[0][0]) if newest and newest[0][0] is not None else None
        return out
    for sid, seq, upd, created in query(
        """SELECT session_id, max(seq), max(time_updated), max(time_created)
           FROM session_message WHERE time_created > :after GROUP BY session_id""",
        {"after": created_after_ms},
    ):
        out.seqs[str(sid)] = int(seq)
        out.updated[str(sid)] = int(upd)
        out.newest_created = max(out.newest_created or 0, int(created))
    return out


@dataclass(frozen=True, slots=True)
class UnknownTable:
    """A table no known OpenCode release creates, that holds per-session rows.

    Attributes:
        name: the table.
        rows: its row count.
        newest_ms: the newest time stamp in it (ms; seconds are converted), or ``None``
            when it has no time column.
    """

    name: str
    rows: int
    newest_ms: int | None

    def recent(self, now_ms: int) -> bool:
        """Whether its newest time stamp is less than :data:`RECENT_WRITES_MS` old."""
        return self.newest_ms is not None and self.newest_ms >= now_ms - RECENT_WRITES_MS


def unknown_tables(query: Query, schema: SchemaInfo) -> list[UnknownTable]:
    """The unknown tables (:attr:`SchemaInfo.unknown_tables`) that look like conversation
    storage: a ``session_id`` column, or a name with ``message``, ``part`` or ``turn``.
    Reads each one's row count and newest time stamp (a scan of tables OpenCode has not
    told us about; run at start-up and at each sweep, not on every change)."""
    out: list[UnknownTable] = []
    for table in schema.unknown_tables:
        cols = {str(r[1]) for r in query(f'PRAGMA table_info("{table}")')}
        if "session_id" not in cols and not any(w in table for w in
                                                 ("message", "part", "turn")):
            continue
        rows = int(query(f'SELECT count(*) FROM "{table}"')[0][0])
        newest: int | None = None
        col = next((c for c in _TIME_COLUMNS if c in cols), None)
        if col is not None:
            value = query(f'SELECT max("{col}") FROM "{table}"')[0][0]
            if isinstance(value, int | float):
                newest = int(value * 1000) if value < 100_000_000_000 else int(value)
        out.append(UnknownTable(table, rows, newest))
    return out
