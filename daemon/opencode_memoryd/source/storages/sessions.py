"""OpenCode's session tables: the 1.x ``session`` and the 2.x ``session_v2``, as one list.

Run through the :class:`~opencode_memoryd.source.schema.Query` of an open
:class:`~opencode_memoryd.source.reader.OpenCodeDB` (which owns the read-only connection and
its rules); nothing here opens a database. Rules, from databases written by OpenCode 1.2.1
to 1.18.33 and the 2.x layout reported by other readers:

* the session list is ``session_v2`` union ``session`` joined by id, the ``session_v2`` row
  winning (2.x copies 1.x sessions under the same id); ``session_v2.title`` may be NULL;
* a 2.x session records when it went idle and while a turn is claimed
  (``time_idle``/``time_suspended``): :func:`idle_of`;
* every table is a rowid table that OpenCode only appends to, so rows inserted since a
  mark are found on the rowid B-tree (:func:`inserted_since`).

Which storage a session's turns are read from is decided in :mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from opencode_memoryd.conversation.rows import SessionRow, is_utf8, session_from_row
from opencode_memoryd.conversation.turns import Idle
from opencode_memoryd.source.schema import Query, SchemaInfo

log = structlog.get_logger(__name__)

#: The OpenCode generation of each session table but the shared ``session``.
SESSION_SHAPES: dict[str, str] = {"session_v2": "v2"}


def idle_of(session: SessionRow) -> Idle | None:
    """The idle state of a 2.x session (read from ``session_v2``); ``None`` for a session
    of the 1.x ``session`` table, which records none."""
    if session.table == "session_v2":
        return Idle(session.time_idle, session.time_suspended)
    return None


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


def child_counts(query: Query, schema: SchemaInfo, session_ids: Sequence[str]
                 ) -> dict[str, int]:
    """``{session_id: number of sub-agent sessions it started}`` of at most a few hundred
    sessions (those with none are left out), from both session tables through their
    ``parent_id`` indexes (a session in both is counted once)."""
    tables = [t for t, present in (("session", schema.has_v1_sessions),
                                   ("session_v2", schema.has_v2_sessions)) if present]
    if not tables or not session_ids:
        return {}
    params = {f"i{k}": sid for k, sid in enumerate(session_ids)}
    names = ", ".join(f":i{k}" for k in range(len(session_ids)))
    union = " UNION ".join(f"SELECT id, parent_id FROM {t} WHERE parent_id IN ({names})"
                           for t in tables)
    return {str(sid): int(n) for sid, n in query(
        f"SELECT parent_id, count(*) FROM ({union}) GROUP BY parent_id", params)}


def child_ids(query: Query, schema: SchemaInfo, session_id: str) -> list[str]:
    """The sub-agent sessions of a session, from both session tables."""
    parts = [f"SELECT id FROM {t} WHERE parent_id = :sid" for t, present in
             (("session", schema.has_v1_sessions), ("session_v2", schema.has_v2_sessions))
             if present]
    if not parts:
        return []
    return [str(r[0]) for r in query(" UNION ".join(parts), {"sid": session_id})
            if is_utf8(str(r[0]))]
