"""OpenCode's v2 storage: a session's turns as ``session_message`` rows.

Written by OpenCode 1.18.33 for sessions driven through its ``/api/session`` routes and by
2.x for every session (2.x copies 1.x rows here under the same ids, so a session with rows
here is read from here alone). Rules, from rows written by OpenCode 1.18.33 and the 2.x
layout reported by other readers:

* rows are ordered by ``seq``, which rises within a session but has gaps; a position is
  ``(seq, id)``, and OpenCode may project rows again under new ``seq`` values, so a row
  is found again by its id (:meth:`SessionMessageStorage.locate`) and an outbox id holds
  row ids only; every read goes through the ``(session_id, seq)``,
  ``(session_id, type, seq)`` or ``(time_created)`` index;
* one row per user prompt, per model step and per note; each is mapped onto a
  :class:`~opencode_memoryd.conversation.rows.MessageRow` by :mod:`.v2rows`;
* rows are updated in place after insert, and v2 turns never bump
  ``session.time_updated``, so change detection reads this table itself (:func:`activity`)
  and a turn waiting to finish is looked at again.

The history browser's statements are in :mod:`.v2_history`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from opencode_memoryd.conversation.rows import MessageRow, decode_object, sub_object
from opencode_memoryd.conversation.transcript import Readable
from opencode_memoryd.source.schema import Query, SchemaInfo
from opencode_memoryd.source.storages import v2_history
from opencode_memoryd.source.storages.base import (
    Checkpoint,
    Position,
    Reader,
    SearchScope,
    TextPart,
)
from opencode_memoryd.source.storages.v2rows import message_from_v2

#: Most session ids in one ``VALUES`` list.
IDS_BATCH = 500


class SessionMessageStorage:
    """The v2 ``session_message`` storage (see the module docstring)."""

    name = "session_message"
    label = "v2"
    tables: tuple[str, ...] = ("session_message",)
    stable_positions = False
    keeps_rowid = False
    looks_again = True

    def present(self, schema: SchemaInfo) -> bool:
        return schema.has_session_message

    def holds(self, db: Reader, session_id: str) -> bool:
        return bool(db.rows("SELECT 1 FROM session_message WHERE session_id = :sid LIMIT 1",
                            {"sid": session_id}))

    def holds_sql(self, schema: SchemaInfo, session_id_sql: str) -> str | None:
        if not self.present(schema):
            return None
        return (f"EXISTS (SELECT 1 FROM session_message sm "
                f"WHERE sm.session_id = {session_id_sql})")

    def newest_row_sql(self, schema: SchemaInfo, session_id_sql: str) -> str | None:
        """The newest row's ``time_created`` (v2 turns do not bump ``time_updated``)."""
        if not self.present(schema):
            return None
        return (f"coalesce((SELECT max(m.time_created) FROM session_message m "
                f"WHERE m.session_id = {session_id_sql}), 0)")

    # -- capture -------------------------------------------------------------------

    def messages_after(self, db: Reader, session_id: str, mark: Position | None, *,
                       limit: int, max_rowid: int | None) -> list[MessageRow]:
        """Rows in ``seq`` order after ``mark``'s ``seq`` (``max_rowid`` is not used)."""
        after = "AND seq > :seq" if mark is not None else ""
        rows = db.rows(
            f"""SELECT id, session_id, type, seq, time_created, time_updated, data
                FROM session_message WHERE session_id = :sid {after}
                ORDER BY seq LIMIT :limit""",
            {"sid": session_id, "seq": mark[0] if mark else 0, "limit": limit})
        return [message_from_v2(*r) for r in rows]

    def last_positions(self, db: Reader, session_ids: Sequence[str]) -> dict[str, Position]:
        """Through the ``(session_id, seq)`` index, in batches of :data:`IDS_BATCH`."""
        out: dict[str, Position] = {}
        if not self.present(db.schema):
            return out
        ids = list(session_ids)
        for start in range(0, len(ids), IDS_BATCH):
            batch = ids[start:start + IDS_BATCH]
            params = {f"i{k}": sid for k, sid in enumerate(batch)}
            values = ", ".join(f"(:i{k})" for k in range(len(batch)))
            rows = db.rows(
                f"""WITH ids(sid) AS (VALUES {values})
                    SELECT ids.sid, m.seq, m.id
                    FROM ids JOIN session_message m ON m.session_id = ids.sid AND m.seq = (
                        SELECT max(seq) FROM session_message WHERE session_id = ids.sid)""",
                params)
            out.update({str(r[0]): (int(r[1]), str(r[2])) for r in rows})
        return out

    def locate(self, db: Reader, session_id: str, message_id: str) -> Position | None:
        if not self.present(db.schema):
            return None
        rows = db.rows("SELECT seq FROM session_message WHERE id = :id AND session_id = :sid",
                       {"id": message_id, "sid": session_id})
        return (int(rows[0][0]), message_id) if rows else None

    def in_flight(self, db: Reader, session_id: str, *, now_ms: int,
                  abandoned_ms: int) -> bool:
        """Whether one of the session's newest 20 assistant rows has no
        ``time.completed`` and no ``error`` and started less than ``abandoned_ms`` ago."""
        for (raw,) in db.rows(
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

    def may_have_tool_parts(self, db: Reader, session_id: str) -> bool:
        """Always ``True`` (not looked at)."""
        return True

    def max_rowids(self, db: Reader, session_ids: Sequence[str]) -> dict[str, int]:
        return {}

    def rowid_through(self, db: Reader, session_id: str, position: Position) -> int:
        return 0

    def read_up_to(self, newest: Position, mark: Position) -> bool:
        """Exactly there: a wiped and rewritten table starts over."""
        return newest == mark

    def position_time(self, position: Position) -> int | None:
        return None

    def chunk_key(self, source_id: str, session_id: str, first: Position,
                  last: Position) -> str:
        """The first and last row ids only (``seq`` values change when OpenCode projects
        rows again)."""
        return f"{source_id}|{session_id}|{self.name}|{first[1]}|{last[1]}"

    # -- the history browser -------------------------------------------------------

    def message_count(self, db: Reader, session_id: str) -> int:
        return v2_history.message_count(db, session_id)

    def message_page(self, db: Reader, session_id: str, *, offset: int,
                     limit: int) -> list[MessageRow]:
        return v2_history.message_page(db, session_id, offset=offset, limit=limit)

    def role_counts(self, db: Reader, session_ids: Sequence[str]
                    ) -> dict[str, tuple[int, int]]:
        if not self.present(db.schema):
            return {}
        return v2_history.role_counts(db, session_ids)

    def text_parts_like(self, db: Reader, scope: SearchScope, *, batch: int,
                        max_rows: int) -> Iterator[TextPart]:
        """One :class:`TextPart` per row of :data:`.v2_history.SEARCH_KINDS`, its
        ``part_id`` the row id, its text :func:`.v2_history.search_text`."""
        return (TextPart(m.session_id, title, m.id, m.id, v2_history.role_of(m),
                         m.time_created, v2_history.search_text(m), m.kind == "compaction")
                for title, m in v2_history.text_rows_like(db, scope, batch=batch,
                                                          max_rows=max_rows))

    def compactions(self, db: Reader, session_id: str, *, limit: int) -> list[Checkpoint]:
        """The session's ``compaction`` rows (``reason``, ``summary``): each is the
        request and, once its summary is written, the summary."""
        return [Checkpoint(m.id, m.time_created, v2_history.compaction_part(m),
                           m if v2_history.search_text(m).strip() else None)
                for m in v2_history.compaction_rows(db, session_id, limit=limit)]

    def render(self, message: MessageRow, *, tool_output_chars: int) -> Readable:
        return v2_history.readable_v2(message, tool_output_chars=tool_output_chars)

    def role_of(self, message: MessageRow) -> str:
        return v2_history.role_of(message)


#: The one instance (strategies hold no state).
SESSION_MESSAGE = SessionMessageStorage()


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
