"""The transactional outbox (``items``) and the high-water marks (``marks``).

* ``marks``: the incremental high-water mark per (source database identity, session): the
  position of the last processed row and the OpenCode table it is in (``storage``):
  ``(time_created, id)`` in ``message``, ``(seq, id)`` in ``session_message``; the columns
  ``time_created``/``message_id`` hold the position whatever the storage. In ``message``
  the mark also keeps ``max_rowid``, the largest SQLite ``rowid`` of a processed message
  (``NULL`` in marks written before schema 3): the position and it each only grow,
  and the reader reads what is beyond either (see :mod:`opencode_memoryd.capture.processor`).
* ``items``: one row per extracted chunk of turns, written with the extraction result
  *before* anything reaches the store. Status ``extracted`` means the result is recorded
  but not yet stored; ``stored`` means its memories are durably in the store and the
  session's mark has moved past it (both in one transaction).

Pattern: transactional outbox plus idempotent consumer
(https://masstransit.io/documentation/patterns/transactional-outbox): a crash between
recording and storing replays the recorded result, and storing it twice is harmless.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencode_memoryd.models import STORAGE_MESSAGE, Mark
from opencode_memoryd.state.engine import StateFile

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, RowMapping

__all__ = ["Item", "MarkTable", "OutboxTable"]


@dataclass(frozen=True, slots=True)
class Item:
    """One outbox row. ``result`` is the JSON-decoded extraction result."""

    id: str
    source_id: str
    session_id: str
    first: tuple[int, str]
    last: tuple[int, str]
    project_key: str
    project_root: str | None
    status: str
    extractor: str
    model: str | None
    result: dict[str, Any]
    tokens_in: int
    tokens_out: int
    #: the OpenCode table ``first``/``last`` are positions in (see :class:`Mark`)
    storage: str = STORAGE_MESSAGE


class MarkTable:
    """The high-water marks (``marks``): :attr:`~opencode_memoryd.state.db.StateDB.marks`.

    Times named ``now`` are ISO 8601 UTC strings; marks are :class:`Mark` values.

    Args:
        file: the open state file.
    """

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def get_mark(self, source_id: str, session_id: str) -> Mark | None:
        """The session's high-water mark, or ``None`` when nothing was read yet."""
        return self.get_mark_row(source_id, session_id)[0]

    def get_mark_row(self, source_id: str, session_id: str) -> tuple[Mark | None, int | None]:
        """The session's mark and its ``max_rowid`` in one read: ``(None, None)`` when
        nothing was read yet."""
        with self._file.read() as c:
            row = c.exec_driver_sql(
                "SELECT storage, time_created, message_id, max_rowid FROM marks "
                "WHERE source_id=:s AND session_id=:sid",
                {"s": source_id, "sid": session_id},
            ).fetchone()
        if row is None:
            return None, None
        return (Mark(str(row[0]), (int(row[1]), str(row[2]))),
                None if row[3] is None else int(row[3]))

    def get_max_rowid(self, source_id: str, session_id: str) -> int | None:
        """The largest ``message`` rowid the session's mark has processed (``None``: not
        recorded, or no mark)."""
        return self.max_rowids(source_id, [session_id]).get(session_id)

    def max_rowids(self, source_id: str, session_ids: Sequence[str]) -> dict[str, int]:
        """The ``max_rowid`` of the marks that have one, by session id."""
        out: dict[str, int] = {}
        ids = list(session_ids)
        with self._file.read() as c:
            for start in range(0, len(ids), 500):
                batch = ids[start:start + 500]
                params: dict[str, Any] = {f"i{k}": v for k, v in enumerate(batch)}
                params["s"] = source_id
                names = ", ".join(f":i{k}" for k in range(len(batch)))
                for r in c.exec_driver_sql(
                        "SELECT session_id, max_rowid FROM marks WHERE source_id=:s AND "
                        f"max_rowid IS NOT NULL AND session_id IN ({names})", params).fetchall():
                    out[str(r[0])] = int(r[1])
        return out

    def marks(self, source_id: str,
              session_ids: Sequence[str] | None = None) -> dict[str, Mark]:
        """The marks of a source, by session id.

        Args:
            source_id: the database's identity.
            session_ids: only these sessions (looked up in batches of 500); all when
                ``None``.
        """
        sql = ("SELECT session_id, storage, time_created, message_id FROM marks "
               "WHERE source_id=:s")
        queries: list[tuple[str, dict[str, Any]]] = []
        if session_ids is None:
            queries.append((sql, {"s": source_id}))
        else:
            ids = list(session_ids)
            for start in range(0, len(ids), 500):
                batch = ids[start:start + 500]
                params: dict[str, Any] = {f"i{k}": v for k, v in enumerate(batch)}
                params["s"] = source_id
                names = ", ".join(f":i{k}" for k in range(len(batch)))
                queries.append((f"{sql} AND session_id IN ({names})", params))
        out: dict[str, Mark] = {}
        with self._file.read() as c:  # one transaction: one consistent snapshot
            for query, query_params in queries:
                for r in c.exec_driver_sql(query, query_params).fetchall():
                    out[str(r[0])] = Mark(str(r[1]), (int(r[2]), str(r[3])))
        return out

    def set_mark(self, source_id: str, session_id: str, mark: Mark, now: str,
                 max_rowid: int | None = None) -> None:
        """Advance a mark (used when a chunk produced nothing to store); a light commit.

        A mark's position and its ``max_rowid`` each only move forward within one storage;
        a mark in another storage than the stored one replaces it.
        """
        with self._file.tx(durable=False) as c:
            self._set_mark(c, source_id, session_id, mark, now, max_rowid)

    def replace_mark(self, source_id: str, session_id: str, mark: Mark | None,
                     now: str) -> None:
        """Set a mark unconditionally, also backwards; ``None`` deletes it (read from the
        start). Used when the rows a mark points at moved or vanished (an OpenCode
        migration re-projected or wiped them). A light commit."""
        with self._file.tx(durable=False) as c:
            self._replace_mark(c, source_id, session_id, mark, now)

    def reset_marks(self) -> int:
        """Delete every high-water mark and queued session, so every session is read again
        from its start (``rebuild``: recorded results are replayed, not extracted again).
        A durable commit. Returns the number of marks deleted."""
        with self._file.tx() as c:
            n = c.exec_driver_sql("DELETE FROM marks").rowcount
            c.exec_driver_sql("DELETE FROM queue")
        return int(n or 0)

    @classmethod
    def _replace_mark(cls, c: Connection, source_id: str, session_id: str,
                      mark: Mark | None, now: str) -> None:
        c.exec_driver_sql("DELETE FROM marks WHERE source_id=:s AND session_id=:sid",
                  {"s": source_id, "sid": session_id})
        if mark is not None:
            cls._set_mark(c, source_id, session_id, mark, now)

    @staticmethod
    def _set_mark(c: Connection, source_id: str, session_id: str, mark: Mark,
                  now: str, max_rowid: int | None = None) -> None:
        c.exec_driver_sql(SET_MARK_SQL,
                          mark_params(source_id, session_id, mark, now, max_rowid))


class OutboxTable:
    """The transactional outbox (``items``): :attr:`~opencode_memoryd.state.db.StateDB.outbox`.
    Completing an item moves its session's mark in the same transaction.

    Times named ``now`` are ISO 8601 UTC strings.

    Args:
        file: the open state file.
    """

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def record_item(self, item: Item, now: str, *, settles: str | None = None) -> None:
        """Durably record an extraction result (status ``extracted``) before storing it.

        Recording the same item id again keeps the first result (idempotent). In the same
        transaction, the session's ``failing`` chunk records that start at or before the
        item's last message are dropped (those turns succeeded), and the record ``settles``
        names is dropped whatever its status (a given-up chunk extracted again).
        """
        with self._file.tx() as c:
            self._record_item(c, item, now, settles)

    @staticmethod
    def _record_item(c: Connection, item: Item, now: str,
                     settles: str | None = None) -> None:
        insert_item(c, item, now)
        c.exec_driver_sql(DROP_FAILING_SQL, drop_failing_params(item))
        if settles is not None:
            c.exec_driver_sql(DROP_FAILURE_SQL, {"id": settles})

    def complete_item(self, item: Item, now: str) -> None:
        """Mark an item stored and advance its session's mark (to ``item.last`` and the
        ``max_rowid`` in its result), in one transaction."""
        with self._file.tx() as c:
            self._complete_item(c, item, now)

    @classmethod
    def _complete_item(cls, c: Connection, item: Item, now: str) -> None:
        c.exec_driver_sql(STORED_SQL, {"id": item.id, "now": now})
        c.exec_driver_sql(SET_MARK_SQL, completed_mark_params(item, now))

    def pending_items(self, source_id: str, session_id: str | None = None) -> list[Item]:
        """Items recorded but not yet stored (crash recovery), oldest first."""
        sql = "SELECT * FROM items WHERE status='extracted' AND source_id=:s"
        params: dict[str, Any] = {"s": source_id}
        if session_id is not None:
            sql += " AND session_id=:sid"
            params["sid"] = session_id
        with self._file.read() as c:
            rows = c.exec_driver_sql(sql + " ORDER BY last_time, last_id",
                                     params).mappings().all()
        return [item_from_row(r) for r in rows]

    def get_item(self, item_id: str) -> Item | None:
        """One outbox row by id."""
        with self._file.read() as c:
            row = c.exec_driver_sql("SELECT * FROM items WHERE id=:id",
                            {"id": item_id}).mappings().fetchone()
        return item_from_row(row) if row else None

    def last_item(self) -> dict[str, Any] | None:
        """The newest outbox row (by ``updated_at``), for ``doctor``, or ``None``.

        Returns:
            ``{"session_id", "project_root", "status", "extractor", "model",
            "memories": number of candidates, "updated_at": ISO 8601 UTC}``.
        """
        with self._file.read() as c:
            row = c.exec_driver_sql("SELECT * FROM items ORDER BY updated_at DESC, id DESC "
                                 "LIMIT 1").mappings().fetchone()
        if row is None:
            return None
        item = item_from_row(row)
        return {"session_id": item.session_id, "project_root": item.project_root,
                "status": item.status, "extractor": item.extractor, "model": item.model,
                "memories": len(item.result.get("candidates") or []),
                "updated_at": row["updated_at"]}

    # -- totals ----------------------------------------------------------------------

    def tokens_since(self, iso: str) -> int:
        """LLM tokens (in + out) spent at or after ``iso`` (UTC): those of the items
        created since, and those of the calls that failed since (``failed_calls``)."""
        with self._file.read() as c:
            n = c.exec_driver_sql("SELECT coalesce(sum(tokens_in + tokens_out), 0) FROM items "
                               "WHERE created_at >= :t", {"t": iso}).scalar_one()
            f = c.exec_driver_sql("SELECT coalesce(sum(tokens_in + tokens_out), 0) "
                               "FROM failed_calls WHERE at >= :t", {"t": iso}).scalar_one()
        return int(n or 0) + int(f or 0)

    def sessions_with_memories(self) -> dict[str, int]:
        """Session id -> memory candidates recorded as stored (items ``stored`` whose result
        has candidates): every such session is in some point's provenance, so one no
        point names is a lost memory (``doctor``'s ``store`` check)."""
        with self._file.read() as c:
            rows = c.exec_driver_sql(
                "SELECT session_id, sum(json_array_length(result, '$.candidates')) FROM items "
                "WHERE status = 'stored' AND json_array_length(result, '$.candidates') > 0 "
                "GROUP BY session_id").fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def counts(self) -> dict[str, int]:
        """Numbers for ``status``: sessions with marks, items by status, tokens spent
        (``tokens_in``/``tokens_out``: of stored results; ``failed_tokens_in``/
        ``failed_tokens_out``: of calls that failed), chunks ``failing`` and
        ``given_up``."""
        with self._file.read() as c:
            sessions = c.exec_driver_sql("SELECT count(*) FROM marks").scalar_one() or 0
            by_status: dict[str, int] = {
                str(row[0]): int(row[1]) for row in c.exec_driver_sql(
                    "SELECT status, count(*) FROM items GROUP BY status").fetchall()}
            tokens = c.exec_driver_sql(
                "SELECT coalesce(sum(tokens_in),0), coalesce(sum(tokens_out),0) FROM items"
            ).fetchone()
            failed = c.exec_driver_sql(
                "SELECT coalesce(sum(tokens_in),0), coalesce(sum(tokens_out),0) "
                "FROM failed_calls").fetchone()
            chunks: dict[str, int] = {
                str(row[0]): int(row[1]) for row in c.exec_driver_sql(
                    "SELECT status, count(*) FROM chunk_failures GROUP BY status").fetchall()}
        return {
            "sessions_tracked": int(sessions),
            "items_stored": int(by_status.get("stored", 0)),
            "items_pending": int(by_status.get("extracted", 0)),
            "tokens_in": int(tokens[0]) if tokens else 0,
            "tokens_out": int(tokens[1]) if tokens else 0,
            "failed_tokens_in": int(failed[0]) if failed else 0,
            "failed_tokens_out": int(failed[1]) if failed else 0,
            "chunks_failing": int(chunks.get("failing", 0)),
            "chunks_given_up": int(chunks.get("given_up", 0)),
        }


def insert_item(c: Connection, item: Item, now: str) -> None:
    """Insert an outbox row (status ``extracted``) in the transaction ``c``; an existing
    row of the same id is kept as it is."""
    c.exec_driver_sql(INSERT_ITEM_SQL, item_params(item, now))


# -- statements and their parameters (also executed many rows at once by
#    :func:`opencode_memoryd.state.apply.apply_ops`) ------------------------------------

_MOVED = ("(excluded.storage != marks.storage OR (excluded.time_created, "
          "excluded.message_id) > (marks.time_created, marks.message_id))")
#: Move a mark forward (position and ``max_rowid`` each only grow within one storage; a
#: mark in another storage replaces both); parameters of :func:`mark_params`.
SET_MARK_SQL = f"""INSERT INTO marks (source_id, session_id, storage, time_created,
                                   message_id, updated_at, max_rowid)
                VALUES (:s, :sid, :st, :t, :m, :now, :rowid)
                ON CONFLICT (source_id, session_id) DO UPDATE SET
                  storage=excluded.storage,
                  time_created=CASE WHEN {_MOVED} THEN excluded.time_created
                               ELSE marks.time_created END,
                  message_id=CASE WHEN {_MOVED} THEN excluded.message_id
                             ELSE marks.message_id END,
                  max_rowid=CASE WHEN excluded.storage != marks.storage
                            THEN excluded.max_rowid
                            ELSE max(coalesce(marks.max_rowid, excluded.max_rowid),
                                     coalesce(excluded.max_rowid, marks.max_rowid)) END,
                  updated_at=excluded.updated_at
                WHERE {_MOVED} OR excluded.max_rowid > coalesce(marks.max_rowid, -1)"""
#: Insert an outbox row unless it exists; parameters of :func:`item_params`.
INSERT_ITEM_SQL = """INSERT OR IGNORE INTO items (id, source_id, session_id, first_time,
                  first_id, last_time, last_id, project_key, project_root, status,
                  extractor, model, result, tokens_in, tokens_out, created_at,
                  updated_at, storage)
                VALUES (:id, :s, :sid, :ft, :fi, :lt, :li, :pk, :pr, 'extracted',
                  :ex, :model, :result, :ti, :to, :now, :now, :st)"""
#: Drop the session's ``failing`` chunk records up to an item's last message.
DROP_FAILING_SQL = """DELETE FROM chunk_failures WHERE source_id=:s AND session_id=:sid
                       AND status='failing' AND storage=:st
                       AND (first_time, first_id) <= (:lt, :li)"""
#: Drop one chunk failure record (``:id``).
DROP_FAILURE_SQL = "DELETE FROM chunk_failures WHERE id=:id"
#: Mark an outbox row stored (``:id``, ``:now``).
STORED_SQL = "UPDATE items SET status='stored', updated_at=:now WHERE id=:id"


def mark_params(source_id: str, session_id: str, mark: Mark, now: str,
                max_rowid: int | None = None) -> dict[str, Any]:
    """The parameters of :data:`SET_MARK_SQL`."""
    return {"s": source_id, "sid": session_id, "st": mark.storage, "t": mark.position[0],
            "m": mark.position[1], "now": now, "rowid": max_rowid}


def completed_mark_params(item: Item, now: str) -> dict[str, Any]:
    """The parameters of :data:`SET_MARK_SQL` for the mark a stored item moves to
    (``item.last`` and the ``max_rowid`` in its result)."""
    rowid = item.result.get("max_rowid")
    return mark_params(item.source_id, item.session_id, Mark(item.storage, item.last), now,
                       None if rowid is None else int(rowid))


def item_params(item: Item, now: str) -> dict[str, Any]:
    """The parameters of :data:`INSERT_ITEM_SQL`."""
    return {"id": item.id, "s": item.source_id, "sid": item.session_id,
            "ft": item.first[0], "fi": item.first[1], "lt": item.last[0],
            "li": item.last[1], "pk": item.project_key, "pr": item.project_root,
            "ex": item.extractor, "model": item.model,
            "result": json.dumps(item.result, sort_keys=True),
            "ti": item.tokens_in, "to": item.tokens_out, "now": now, "st": item.storage}


def drop_failing_params(item: Item) -> dict[str, Any]:
    """The parameters of :data:`DROP_FAILING_SQL` for a recorded item."""
    return {"s": item.source_id, "sid": item.session_id, "st": item.storage,
            "lt": item.last[0], "li": item.last[1]}


def item_from_row(r: RowMapping) -> Item:
    """The :class:`Item` of an ``items`` row (read as a mapping)."""
    return Item(
        id=r["id"], source_id=r["source_id"], session_id=r["session_id"],
        first=(int(r["first_time"]), r["first_id"]), last=(int(r["last_time"]), r["last_id"]),
        project_key=r["project_key"], project_root=r["project_root"], status=r["status"],
        extractor=r["extractor"], model=r["model"], result=json.loads(r["result"]),
        tokens_in=int(r["tokens_in"]), tokens_out=int(r["tokens_out"]),
        storage=str(r["storage"]),
    )
