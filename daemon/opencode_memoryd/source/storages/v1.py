"""OpenCode 1.x storage: a session's turns in ``message`` rows, each with its ``part`` rows.

Observed with OpenCode 1.2.1 to 1.18.33: messages are ordered by ``(time_created, id)``
through the ``(session_id, time_created, id)`` index and parts are read through the
``(message_id, id)`` index; there is no global scan. A position is ``(time_created, id)``;
it never changes once written. A row's SQLite ``rowid`` grows with every insert, whatever
clock stamped ``time_created``, so a mark keeps the largest rowid processed too: a message
written later with a smaller time (a clock set back, or an earlier row stamped in the
future) is still read. Messages and parts of one batch come from one short read
transaction, so they are consistent; a row whose ``data`` is not JSON is flagged
``corrupt`` and logged, and a message whose id is not UTF-8 fails the read of its session
(its position cannot be recorded as a mark).

The history browser's statements are in :mod:`.v1_history`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import structlog

from opencode_memoryd.conversation.rows import (
    MessageRow,
    PartRow,
    clean_text,
    decode_object,
    is_utf8,
    sub_object,
)
from opencode_memoryd.conversation.transcript import Readable, readable
from opencode_memoryd.errors import SourceError
from opencode_memoryd.source.schema import SchemaInfo
from opencode_memoryd.source.storages import v1_history
from opencode_memoryd.source.storages.base import (
    Checkpoint,
    Position,
    Reader,
    SearchScope,
    TextPart,
)

log = structlog.get_logger(__name__)

#: Most session ids in one ``VALUES`` list; most message ids in one ``IN (…)`` list.
IDS_BATCH = 500
PARTS_BATCH = 200


def _values(ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(VALUES list, params)`` per batch of at most :data:`IDS_BATCH` ids."""
    for start in range(0, len(ids), IDS_BATCH):
        batch = ids[start:start + IDS_BATCH]
        yield (", ".join(f"(:i{k})" for k in range(len(batch))),
               {f"i{k}": sid for k, sid in enumerate(batch)})


class MessageStorage:
    """The 1.x ``message``/``part`` storage (see the module docstring)."""

    name = "message"
    label = "1.x"
    tables: tuple[str, ...] = ("message", "part")
    stable_positions = True
    keeps_rowid = True
    looks_again = False

    def present(self, schema: SchemaInfo) -> bool:
        return schema.has_v1_messages

    def holds(self, db: Reader, session_id: str) -> bool:
        return bool(db.rows("SELECT 1 FROM message WHERE session_id = :sid LIMIT 1",
                            {"sid": session_id}))

    def holds_sql(self, schema: SchemaInfo, session_id_sql: str) -> str | None:
        if not self.present(schema):
            return None
        return f"EXISTS (SELECT 1 FROM message mm WHERE mm.session_id = {session_id_sql})"

    def newest_row_sql(self, schema: SchemaInfo, session_id_sql: str) -> str | None:
        """``None``: a 1.x turn bumps the session's ``time_updated``."""
        return None

    # -- capture -------------------------------------------------------------------

    def messages_after(self, db: Reader, session_id: str, mark: Position | None, *,
                       limit: int, max_rowid: int | None) -> list[MessageRow]:
        """Messages in ``(time_created, id)`` order: after the mark when their
        ``(time_created, id)`` is larger, or their ``rowid`` larger than ``max_rowid``."""
        if not self.present(db.schema):
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
        return self.messages(db, f"session_id = :sid {cond} ORDER BY time_created, id "
                             "LIMIT :limit", params)

    def messages(self, db: Reader, where: str, params: Mapping[str, Any]
                 ) -> list[MessageRow]:
        """Messages matching ``where`` (with its ORDER BY/LIMIT) and their parts, read in
        one short read transaction that is closed on return.

        Raises:
            SourceError: the read failed, or a message's id is not UTF-8.
        """
        with db.read_transaction():
            rows = db.rows("SELECT id, session_id, time_created, time_updated, data, rowid "
                           f"FROM message WHERE {where}", params)
            messages: list[MessageRow] = []
            for r in rows:
                if not is_utf8(r[0]):
                    raise SourceError(
                        f"reading {db.path} failed: message {clean_text(r[0])!r} of "
                        f"session {r[1]} (created at {r[2]}) has an id that is not "
                        "UTF-8; the session cannot be read past it")
                data, corrupt = decode_object(r[4])
                if corrupt:
                    log.warning("corrupt_message_row", message_id=r[0], session_id=r[1])
                messages.append(MessageRow(r[0], r[1], int(r[2]), int(r[3]), data,
                                           corrupt=corrupt, rowid=int(r[5])))
            _attach_parts(db, messages)
        return messages

    def last_positions(self, db: Reader, session_ids: Sequence[str]) -> dict[str, Position]:
        """Through the ``(session_id, time_created, id)`` index. A row whose
        ``time_created`` is not an integer (OpenCode writes integers) is passed over here,
        so it never fails the look-up of a whole batch; reading its session fails alone."""
        out: dict[str, Position] = {}
        if not self.present(db.schema):
            return out
        for values, params in _values(list(session_ids)):
            rows = db.rows(
                f"""WITH ids(sid) AS (VALUES {values})
                    SELECT ids.sid, m.time_created, m.id
                    FROM ids JOIN message m ON m.id = (
                        SELECT id FROM message WHERE session_id = ids.sid
                        AND typeof(time_created) = 'integer'
                        ORDER BY time_created DESC, id DESC LIMIT 1)""", params)
            out.update({r[0]: (int(r[1]), str(r[2])) for r in rows if is_utf8(str(r[2]))})
        return out

    def locate(self, db: Reader, session_id: str, message_id: str) -> Position | None:
        if not self.present(db.schema):
            return None
        rows = db.rows("SELECT time_created FROM message WHERE id = :id AND "
                       "session_id = :sid", {"id": message_id, "sid": session_id})
        return (int(rows[0][0]), message_id) if rows else None

    def in_flight(self, db: Reader, session_id: str, *, now_ms: int,
                  abandoned_ms: int) -> bool:
        """Looks at the session's newest 20 messages: an assistant one without
        ``time.completed`` or ``error``, created less than ``abandoned_ms`` ago."""
        if not self.present(db.schema):
            return False
        for (raw,) in db.rows("SELECT data FROM message WHERE session_id = :sid "
                              "ORDER BY time_created DESC, id DESC LIMIT 20",
                              {"sid": session_id}):
            data, corrupt = decode_object(raw)
            if corrupt or data.get("role") != "assistant" or data.get("error"):
                continue
            t = sub_object(data, "time")
            if t.get("completed") is None:
                created = t.get("created")
                if isinstance(created, int | float) and now_ms - created < abandoned_ms:
                    return True
        return False

    def may_have_tool_parts(self, db: Reader, session_id: str) -> bool:
        """``False`` only when none of the session's parts is a ``tool`` or ``patch``
        (a part whose data is not valid JSON counts as one)."""
        if not self.present(db.schema):
            return True
        try:
            return bool(db.rows(
                "SELECT 1 FROM part WHERE session_id = :sid AND (NOT json_valid(data) OR "
                "json_extract(data, '$.type') IN ('tool', 'patch')) LIMIT 1",
                {"sid": session_id}))
        except SourceError:  # a part table of another shape: read the session instead
            return True

    def max_rowids(self, db: Reader, session_ids: Sequence[str]) -> dict[str, int]:
        """One index range per session, no message body read."""
        out: dict[str, int] = {}
        if not self.present(db.schema):
            return out
        for values, params in _values(list(session_ids)):
            rows = db.rows(f"""WITH ids(sid) AS (VALUES {values}) SELECT ids.sid,
                (SELECT max(rowid) FROM message WHERE session_id = ids.sid) FROM ids""",
                           params)
            out.update({r[0]: int(r[1]) for r in rows if r[1] is not None})
        return out

    def rowid_through(self, db: Reader, session_id: str, position: Position) -> int:
        """What a mark recorded without a rowid stands for."""
        rows = db.rows(
            """SELECT max(rowid) FROM message WHERE session_id = :sid
               AND (time_created < :t OR (time_created = :t AND id <= :mid))""",
            {"sid": session_id, "t": position[0], "mid": position[1]})
        return int(rows[0][0] or 0) if rows else 0

    def read_up_to(self, newest: Position, mark: Position) -> bool:
        """At or after it: a reverted row may have vanished."""
        return newest <= mark

    def position_time(self, position: Position) -> int | None:
        return position[0]

    def chunk_key(self, source_id: str, session_id: str, first: Position,
                  last: Position) -> str:
        """Both positions (they never change)."""
        return f"{source_id}|{session_id}|{first}|{last}"

    # -- the history browser -------------------------------------------------------

    def message_count(self, db: Reader, session_id: str) -> int:
        """Counted on the ``(session_id, …)`` index."""
        if not self.present(db.schema):
            return 0
        return int(db.rows("SELECT count(*) FROM message WHERE session_id = :sid",
                           {"sid": session_id})[0][0])

    def message_page(self, db: Reader, session_id: str, *, offset: int,
                     limit: int) -> list[MessageRow]:
        """The page's ids are picked on the ``(session_id, time_created, id)`` index (rows
        skipped by ``offset`` are never read), then read in one consistent snapshot."""
        if not self.present(db.schema):
            return []
        return self.messages(
            db, "id IN (SELECT id FROM message WHERE session_id = :sid "
            "ORDER BY time_created, id LIMIT :limit OFFSET :offset) "
            "ORDER BY time_created, id",
            {"sid": session_id, "limit": limit, "offset": offset})

    def role_counts(self, db: Reader, session_ids: Sequence[str]
                    ) -> dict[str, tuple[int, int]]:
        """Reads the ``data`` of every message of theirs."""
        if not self.present(db.schema):
            return {}
        return v1_history.role_counts(db, session_ids)

    def text_parts_like(self, db: Reader, scope: SearchScope, *, batch: int,
                        max_rows: int) -> Iterator[TextPart]:
        """The non-synthetic text parts (see :func:`.v1_history.text_parts_like`)."""
        if not (self.present(db.schema) and db.schema.has_v1_sessions):
            return iter(())
        return v1_history.text_parts_like(db, scope, batch=batch, max_rows=max_rows)

    def compactions(self, db: Reader, session_id: str, *, limit: int) -> list[Checkpoint]:
        """Requests are found among the session's parts (``part.session_id`` index); each
        summary is the first compaction-summary message among the few messages after its
        request, preferring the one whose ``parentID`` is the request."""
        if not self.present(db.schema):
            return []
        return v1_history.compactions(db, self, session_id, limit=limit)

    def render(self, message: MessageRow, *, tool_output_chars: int) -> Readable:
        return readable(message, tool_output_chars=tool_output_chars)

    def role_of(self, message: MessageRow) -> str:
        return message.role


def _attach_parts(db: Reader, messages: Sequence[MessageRow]) -> None:
    by_id = {m.id: m for m in messages}
    for chunk in _chunks(list(by_id), PARTS_BATCH):
        names = {f"m{i}": mid for i, mid in enumerate(chunk)}
        placeholders = ", ".join(f":{k}" for k in names)
        for pid, mid, raw in db.rows(
            f"SELECT id, message_id, data FROM part WHERE message_id IN ({placeholders}) "
            "ORDER BY message_id, id", names,
        ):
            data, corrupt = decode_object(raw)
            if corrupt:
                log.warning("corrupt_part_row", part_id=clean_text(pid), message_id=mid)
            by_id[mid].parts.append(PartRow(clean_text(pid), data, corrupt))


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


#: The one instance (strategies hold no state).
MESSAGE = MessageStorage()
