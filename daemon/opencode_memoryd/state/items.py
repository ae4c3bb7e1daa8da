"""The transactional outbox (``items``) and the high-water marks (``marks``).

* ``marks``: the incremental high-water mark per (source database identity, session): the
  largest ``(time_created, id)`` processed, and ``seq``, the largest SQLite ``rowid`` of a
  processed message (``NULL`` in marks written before version 2). Both only ever grow;
  the reader reads what is beyond either (see :mod:`opencode_memoryd.capture.processor`).
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
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, RowMapping

from opencode_memoryd.state.engine import StateFile

__all__ = ["Item", "OutboxTables"]


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


class OutboxTables(StateFile):
    """The ``marks`` and ``items`` operations of :class:`~opencode_memoryd.state.db.StateDB`.

    Times named ``now`` are ISO 8601 UTC strings; marks are ``(time_created_ms, message_id)``.
    """

    # -- marks -----------------------------------------------------------------------

    def get_mark(self, source_id: str, session_id: str) -> tuple[int, str] | None:
        """The session's high-water mark ``(time_created, message_id)``, or ``None``."""
        return self.get_position(source_id, session_id)[0]

    def get_position(self, source_id: str, session_id: str
                     ) -> tuple[tuple[int, str] | None, int | None]:
        """The session's mark ``(time_created, message_id)`` and its ``seq`` (the largest
        rowid processed); each ``None`` when not recorded."""
        with self._engine.begin() as c:
            row = c.execute(
                text("SELECT time_created, message_id, seq FROM marks "
                     "WHERE source_id=:s AND session_id=:sid"),
                {"s": source_id, "sid": session_id},
            ).first()
        if row is None:
            return None, None
        return (int(row[0]), str(row[1])), (None if row[2] is None else int(row[2]))

    def seqs(self, source_id: str, session_ids: Sequence[str]) -> dict[str, int]:
        """The ``seq`` of the marks that have one, by session id."""
        out: dict[str, int] = {}
        ids = list(session_ids)
        with self._engine.begin() as c:
            for start in range(0, len(ids), 500):
                batch = ids[start:start + 500]
                params: dict[str, Any] = {f"i{k}": v for k, v in enumerate(batch)}
                params["s"] = source_id
                names = ", ".join(f":i{k}" for k in range(len(batch)))
                for r in c.execute(text(
                        "SELECT session_id, seq FROM marks WHERE source_id=:s AND seq IS NOT "
                        f"NULL AND session_id IN ({names})"), params).all():
                    out[str(r[0])] = int(r[1])
        return out

    def marks(self, source_id: str,
              session_ids: Sequence[str] | None = None) -> dict[str, tuple[int, str]]:
        """The marks of a source, by session id: ``{session_id: (time_created_ms, id)}``.

        Args:
            source_id: the database's identity.
            session_ids: only these sessions (looked up in batches of 500); all when
                ``None``.
        """
        sql = "SELECT session_id, time_created, message_id FROM marks WHERE source_id=:s"
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
        out: dict[str, tuple[int, str]] = {}
        with self._engine.begin() as c:  # one transaction: one consistent snapshot
            for query, query_params in queries:
                for r in c.execute(text(query), query_params).all():
                    out[str(r[0])] = (int(r[1]), str(r[2]))
        return out

    def set_mark(self, source_id: str, session_id: str, mark: tuple[int, str], now: str,
                 seq: int | None = None) -> None:
        """Advance a mark (used when a chunk produced nothing to store): its
        ``(time_created, id)`` and its ``seq`` each move only forward."""
        with self._engine.begin() as c:
            self._set_mark(c, source_id, session_id, mark, now, seq)

    @staticmethod
    def _set_mark(c: Connection, source_id: str, session_id: str, mark: tuple[int, str],
                  now: str, seq: int | None) -> None:
        ahead = ("(excluded.time_created, excluded.message_id) "
                 "> (marks.time_created, marks.message_id)")
        c.execute(
            text(f"""INSERT INTO marks (source_id, session_id, time_created, message_id,
                                        updated_at, seq)
                     VALUES (:s, :sid, :t, :m, :now, :seq)
                     ON CONFLICT (source_id, session_id) DO UPDATE SET
                       time_created=CASE WHEN {ahead} THEN excluded.time_created
                                    ELSE marks.time_created END,
                       message_id=CASE WHEN {ahead} THEN excluded.message_id
                                  ELSE marks.message_id END,
                       seq=max(coalesce(marks.seq, excluded.seq),
                               coalesce(excluded.seq, marks.seq)),
                       updated_at=excluded.updated_at
                     WHERE {ahead} OR excluded.seq > coalesce(marks.seq, -1)"""),
            {"s": source_id, "sid": session_id, "t": mark[0], "m": mark[1], "now": now,
             "seq": seq},
        )

    # -- outbox ----------------------------------------------------------------------

    def record_item(self, item: Item, now: str) -> None:
        """Durably record an extraction result (status ``extracted``) before storing it.

        Recording the same item id again keeps the first result (idempotent).
        """
        with self._engine.begin() as c:
            c.execute(
                text("""INSERT OR IGNORE INTO items (id, source_id, session_id, first_time,
                          first_id, last_time, last_id, project_key, project_root, status,
                          extractor, model, result, tokens_in, tokens_out, created_at,
                          updated_at)
                        VALUES (:id, :s, :sid, :ft, :fi, :lt, :li, :pk, :pr, 'extracted',
                          :ex, :model, :result, :ti, :to, :now, :now)"""),
                {"id": item.id, "s": item.source_id, "sid": item.session_id,
                 "ft": item.first[0], "fi": item.first[1], "lt": item.last[0],
                 "li": item.last[1], "pk": item.project_key, "pr": item.project_root,
                 "ex": item.extractor, "model": item.model,
                 "result": json.dumps(item.result, sort_keys=True),
                 "ti": item.tokens_in, "to": item.tokens_out, "now": now},
            )

    def complete_item(self, item: Item, now: str) -> None:
        """Mark an item stored and advance its session's mark (to ``item.last`` and the
        ``seq`` in its result), in one transaction."""
        seq = item.result.get("seq")
        with self._engine.begin() as c:
            c.execute(text("UPDATE items SET status='stored', updated_at=:now WHERE id=:id"),
                      {"id": item.id, "now": now})
            self._set_mark(c, item.source_id, item.session_id, item.last, now,
                           None if seq is None else int(seq))

    def pending_items(self, source_id: str, session_id: str | None = None) -> list[Item]:
        """Items recorded but not yet stored (crash recovery), oldest first."""
        sql = "SELECT * FROM items WHERE status='extracted' AND source_id=:s"
        params: dict[str, Any] = {"s": source_id}
        if session_id is not None:
            sql += " AND session_id=:sid"
            params["sid"] = session_id
        with self._engine.begin() as c:
            rows = c.execute(text(sql + " ORDER BY last_time, last_id"), params).mappings().all()
        return [_item(r) for r in rows]

    def get_item(self, item_id: str) -> Item | None:
        """One outbox row by id."""
        with self._engine.begin() as c:
            row = c.execute(text("SELECT * FROM items WHERE id=:id"),
                            {"id": item_id}).mappings().first()
        return _item(row) if row else None

    # -- totals ----------------------------------------------------------------------

    def tokens_since(self, iso: str) -> int:
        """LLM tokens (in + out) recorded by items created at or after ``iso`` (UTC)."""
        with self._engine.begin() as c:
            n = c.execute(text("SELECT coalesce(sum(tokens_in + tokens_out), 0) FROM items "
                               "WHERE created_at >= :t"), {"t": iso}).scalar()
        return int(n or 0)

    def counts(self) -> dict[str, int]:
        """Numbers for ``status``: sessions with marks, items by status, tokens spent."""
        with self._engine.begin() as c:
            sessions = c.exec_driver_sql("SELECT count(*) FROM marks").scalar() or 0
            by_status: dict[str, int] = {
                str(row[0]): int(row[1]) for row in c.exec_driver_sql(
                    "SELECT status, count(*) FROM items GROUP BY status").all()}
            tokens = c.exec_driver_sql(
                "SELECT coalesce(sum(tokens_in),0), coalesce(sum(tokens_out),0) FROM items"
            ).first()
        return {
            "sessions_tracked": int(sessions),
            "items_stored": int(by_status.get("stored", 0)),
            "items_pending": int(by_status.get("extracted", 0)),
            "tokens_in": int(tokens[0]) if tokens else 0,
            "tokens_out": int(tokens[1]) if tokens else 0,
        }


def _item(r: RowMapping) -> Item:
    return Item(
        id=r["id"], source_id=r["source_id"], session_id=r["session_id"],
        first=(int(r["first_time"]), r["first_id"]), last=(int(r["last_time"]), r["last_id"]),
        project_key=r["project_key"], project_root=r["project_root"], status=r["status"],
        extractor=r["extractor"], model=r["model"], result=json.loads(r["result"]),
        tokens_in=int(r["tokens_in"]), tokens_out=int(r["tokens_out"]),
    )
