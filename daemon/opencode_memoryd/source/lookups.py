"""Per-session lookups that pick the storage a session is read from.

A session's turns are in ``session_message`` when it has rows there (OpenCode 1.18.33's
``/api/session`` sessions, every 2.x session), else in the 1.x ``message``/``part`` tables;
never both (2.x copies 1.x rows under the same ids). These lookups answer in that storage:
where a session is read from, the position of its newest row, where one message is, and
whether a turn is still in flight. Each is one or two indexed statements, run through the
reader's connection (``_rows``); :class:`~opencode_memoryd.source.reader.OpenCodeDB`
inherits them, and :meth:`SessionLookups.table_activity` (a diagnostic for ``doctor``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import STORAGE_MESSAGE, STORAGE_SESSION_MESSAGE, Mark
from opencode_memoryd.source import reader_v2
from opencode_memoryd.source.reader_v2 import Activity, UnknownTable
from opencode_memoryd.source.rows import SessionRow, decode_object, is_utf8, sub_object
from opencode_memoryd.source.schema import SchemaInfo


class SessionLookups:
    """The storage-aware lookups of :class:`~opencode_memoryd.source.reader.OpenCodeDB`."""

    schema: SchemaInfo

    def _rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        raise NotImplementedError  # provided by the reader

    def session(self, session_id: str) -> SessionRow | None:
        raise NotImplementedError  # provided by the reader

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes whenever another connection commits."""
        return int(self._rows("PRAGMA data_version")[0][0])

    def schema_cookie(self) -> int:
        """``PRAGMA schema_version``: changes whenever a table or index is added or changed."""
        return int(self._rows("PRAGMA schema_version")[0][0])

    def activity(self, created_after_ms: int | None) -> Activity:
        """Per-session activity in ``session_message`` (see :func:`reader_v2.activity`)."""
        return reader_v2.activity(self._rows, self.schema, created_after_ms)

    def unknown_tables(self) -> list[UnknownTable]:
        """Tables of an unknown shape holding per-session rows (see
        :func:`reader_v2.unknown_tables`)."""
        return reader_v2.unknown_tables(self._rows, self.schema)

    def storage_of(self, session_id: str) -> str:
        """Where the session's turns are read from: ``session_message`` when it has rows
        there, else ``message`` (see :data:`~opencode_memoryd.models.STORAGE_MESSAGE`)."""
        return reader_v2.storage_of(self._rows, self.schema, session_id)

    def last_messages(self, session_ids: Sequence[str]) -> dict[str, Mark]:
        """The position of each session's newest row, in the storage it is read from.

        One lookup per session through the ``(session_id, seq)`` index of
        ``session_message`` and, for the sessions without rows there, the
        ``(session_id, time_created, id)`` index of ``message``, in batches of 500 ids;
        sessions without any row are left out. Used to tell, without reading any message
        bodies, whether a session holds anything after its mark. A ``message`` row whose
        ``time_created`` is not an integer (OpenCode writes integers) is passed over here,
        so it never fails the lookup of a whole batch; reading its session fails alone.

        Args:
            session_ids: the sessions to look up.

        Returns:
            ``{session_id: Mark(storage, position)}``.
        """
        out: dict[str, Mark] = {}
        if self.schema.has_session_message:
            out.update({sid: Mark(STORAGE_SESSION_MESSAGE, pos) for sid, pos in
                        reader_v2.last_positions(self._rows, session_ids).items()})
        ids = [sid for sid in session_ids if sid not in out]
        if not self.schema.has_v1_messages:
            return out
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            params = {f"i{k}": sid for k, sid in enumerate(batch)}
            values = ", ".join(f"(:i{k})" for k in range(len(batch)))
            rows = self._rows(
                f"""WITH ids(sid) AS (VALUES {values})
                    SELECT ids.sid, m.time_created, m.id
                    FROM ids JOIN message m ON m.id = (
                        SELECT id FROM message WHERE session_id = ids.sid
                        AND typeof(time_created) = 'integer'
                        ORDER BY time_created DESC, id DESC LIMIT 1)""",
                params,
            )
            out.update({r[0]: Mark(STORAGE_MESSAGE, (int(r[1]), str(r[2]))) for r in rows
                        if is_utf8(str(r[2]))})
        return out

    def max_rowids(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The largest ``message`` rowid of each session (sessions without 1.x messages are
        left out); one index range per session, no message body read."""
        if not self.schema.has_v1_messages:
            return {}
        out: dict[str, int] = {}
        ids = list(session_ids)
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            values = ", ".join(f"(:i{k})" for k in range(len(batch)))
            rows = self._rows(f"""WITH ids(sid) AS (VALUES {values}) SELECT ids.sid,
                (SELECT max(rowid) FROM message WHERE session_id = ids.sid) FROM ids""",
                              {f"i{k}": sid for k, sid in enumerate(batch)})
            out.update({r[0]: int(r[1]) for r in rows if r[1] is not None})
        return out

    def rowid_through(self, session_id: str, position: tuple[int, str]) -> int:
        """The largest rowid of the session's ``message`` rows at or before ``position``
        (``(time_created, id)``; 0 when none): what a mark recorded without a rowid
        stands for."""
        rows = self._rows(
            """SELECT max(rowid) FROM message WHERE session_id = :sid
               AND (time_created < :t OR (time_created = :t AND id <= :mid))""",
            {"sid": session_id, "t": position[0], "mid": position[1]})
        return int(rows[0][0] or 0) if rows else 0

    def locate(self, session_id: str, message_id: str, storage: str) -> tuple[int, str] | None:
        """The position of one message of a session in ``storage``, or ``None`` when it is
        not there (used to carry a mark across storages and to see a wiped table)."""
        if storage == STORAGE_SESSION_MESSAGE:
            if not self.schema.has_session_message:
                return None
            return reader_v2.locate(self._rows, session_id, message_id)
        if not self.schema.has_v1_messages:
            return None
        rows = self._rows("SELECT time_created FROM message WHERE id = :id AND "
                          "session_id = :sid", {"id": message_id, "sid": session_id})
        return (int(rows[0][0]), message_id) if rows else None

    def may_have_tool_parts(self, session_id: str, storage: str) -> bool:
        """Whether the session may hold a ``tool`` or ``patch`` part (what changes files or
        runs commands): ``False`` only for a ``message``-storage session none of whose
        parts is one (a part whose data is not valid JSON counts as one); ``True`` for
        ``session_message`` (not looked at)."""
        if storage != STORAGE_MESSAGE or not self.schema.has_v1_messages:
            return True
        try:
            return bool(self._rows(
                "SELECT 1 FROM part WHERE session_id = :sid AND (NOT json_valid(data) OR "
                "json_extract(data, '$.type') IN ('tool', 'patch')) LIMIT 1",
                {"sid": session_id}))
        except SourceError:  # a part table of another shape: read the session instead
            return True

    def in_flight(self, session_id: str, *, now_ms: int, abandoned_ms: int,
                  row: SessionRow | None = None, unconfirmed_ms: int | None = None) -> bool:
        """Whether the session (or a sub-agent of it) has an assistant message in flight.

        Looks at the newest 20 messages (assistant rows, in ``session_message``) of the
        session and of its child sessions, each in the storage it is read from; a message
        in flight for longer than ``abandoned_ms`` does not count (a crashed OpenCode leaves
        one forever). A 2.x session whose ``time_suspended`` is set (its busy period
        claimed: a turn running, or waiting for queued prompts or background work) less
        than ``unconfirmed_ms`` ago (``None``: ``abandoned_ms``) is in flight too; an older
        claim, or one that is no past time, is left to the finished-turn rule. ``row``: the
        session's row when the caller has just read it (else it is looked up).
        """
        session = row if row is not None and row.id == session_id else self.session(session_id)
        claimed_for = abandoned_ms if unconfirmed_ms is None else min(abandoned_ms, unconfirmed_ms)
        if (session is not None and session.time_suspended
                and 0 <= now_ms - session.time_suspended < claimed_for):
            return True
        for sid in [session_id, *reader_v2.child_ids(self._rows, self.schema, session_id)]:
            if self.storage_of(sid) == STORAGE_SESSION_MESSAGE:
                if reader_v2.assistant_in_flight(self._rows, sid, now_ms=now_ms,
                                                 abandoned_ms=abandoned_ms):
                    return True
                continue
            if not self.schema.has_v1_messages:
                continue
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

    # -- diagnostics -----------------------------------------------------------------

    def table_activity(self, tables: Sequence[str], since_ms: int
                       ) -> dict[str, tuple[int, int | None]]:
        """How many rows of each table were created after ``since_ms``, and the newest one.

        For ``doctor``, never the daemon's loop: one full scan of each table (most have no
        ``time_created`` index). Tables that are absent, or have no ``time_created``
        column, are left out.

        Args:
            tables: table names, such as
                :data:`~opencode_memoryd.source.schema.CONVERSATION_TABLES`; only names
                of existing tables reach the SQL text.
            since_ms: a time in ms since the epoch.

        Returns:
            ``{table: (rows created after since_ms, newest time_created in ms or None)}``.

        Raises:
            SourceError: a read failed.
        """
        present = {r[0] for r in self._rows("SELECT name FROM sqlite_master WHERE type='table'")}
        out: dict[str, tuple[int, int | None]] = {}
        for table in tables:
            if table not in present or "time_created" not in {
                    r[1] for r in self._rows(f"PRAGMA table_info({table})")}:
                continue
            n, newest = self._rows(
                f'SELECT coalesce(sum(time_created > :t), 0), max(time_created) FROM "{table}"',
                {"t": since_ms})[0]
            out[table] = (int(n), int(newest) if newest is not None else None)
        return out
