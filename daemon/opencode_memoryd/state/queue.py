"""The daemon's work queue (``queue``): sessions that changed and wait to be extracted.

One row per (source database identity, session) with its debounce times, so a restart
loses no pending work. Times are ms since the epoch; the due time follows
:class:`opencode_memoryd.debounce.Pending`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opencode_memoryd.debounce import Pending
from opencode_memoryd.state.engine import StateFile

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["GIVE_UP_ATTEMPTS", "QUEUE_DONE_SQL", "QueueTable"]

#: Failed attempts in a row after which a session is given up: it is looked at again only
#: after a long wait, or when it changes (and is given up again at its next failure).
GIVE_UP_ATTEMPTS = 5

#: Remove a session from the queue unless it changed after ``:t`` (ms).
QUEUE_DONE_SQL = ("DELETE FROM queue WHERE source_id=:s AND session_id=:sid "
                  "AND last_change_ms <= :t")


class QueueTable:
    """The ``queue`` repository (``StateDB.queue``)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def queue_touch_many(self, source_id: str, session_ids: Sequence[str], now_ms: int,
                         quiet_seconds: float, max_wait_seconds: float, *,
                         changed_ms: Mapping[str, int] | None = None) -> None:
        """Record a change of each session, in one light transaction.

        The first change of a pending session starts its max-wait clock; later changes
        only push the quiet period (see :mod:`opencode_memoryd.debounce`: the due time is
        ``min(last change + quiet, first change + max wait)``). A light commit: after a
        power loss the start-up pass queues again every session read short of its newest
        message.

        Args:
            now_ms: when the changes were seen (ms).
            changed_ms: for some sessions, when they last changed, if earlier than
                ``now_ms`` (a session found quiet already is due sooner); the others
                changed at ``now_ms``.
        """
        if not session_ids:
            return
        quiet_ms, wait_ms = int(quiet_seconds * 1000), int(max_wait_seconds * 1000)
        rows = []
        for sid in session_ids:
            at = min(now_ms, (changed_ms or {}).get(sid, now_ms))
            due = Pending(at, at).due_ms(quiet_seconds=quiet_seconds,
                                         max_wait_seconds=max_wait_seconds)
            rows.append({"s": source_id, "sid": sid, "n": at, "d": due, "q": quiet_ms,
                         "w": wait_ms})
        with self._file.tx(durable=False, outbox=False) as c:
            c.exec_driver_sql("""INSERT INTO queue (source_id, session_id, first_change_ms,
                                last_change_ms, due_ms) VALUES (:s, :sid, :n, :n, :d)
                              ON CONFLICT (source_id, session_id) DO UPDATE SET
                                last_change_ms=max(last_change_ms, excluded.last_change_ms),
                                due_ms=min(max(last_change_ms, excluded.last_change_ms) + :q,
                                           first_change_ms + :w)""", rows)

    def queue_reschedule(self, source_id: str, session_id: str, due_ms: int, note: str) -> None:
        """Move a queued session's due time (a wait, not a failure); a light commit."""
        with self._file.tx(durable=False, outbox=False) as c:
            c.exec_driver_sql("UPDATE queue SET due_ms=:d, last_error=:e "
                      "WHERE source_id=:s AND session_id=:sid",
                      {"s": source_id, "sid": session_id, "d": due_ms, "e": note[:500] or None})

    def queue_defer(self, source_id: str, session_id: str, due_ms: int, now_ms: int,
                    max_wait_seconds: float, note: str) -> int:
        """Keep a session queued until ``due_ms`` for work that waits on time rather than on
        a change (its summary, once it has been idle long enough); a light commit.

        Its max-wait clock is set to end at ``due_ms`` (``first_change_ms = due_ms -
        max_wait``), so it counts as waiting too long only once ``due_ms`` has passed, and
        a change before then is still extracted after the quiet period (``last_change_ms``
        is ``now_ms``). A session that is not queued is queued; one that changed after
        ``now_ms`` (the start of the run that asks) is left as it is: it is due sooner.

        Returns:
            The session's due time now (ms): ``due_ms``, or the sooner one it kept.
        """
        first = due_ms - int(max_wait_seconds * 1000)
        with self._file.tx(durable=False, outbox=False) as c:
            c.exec_driver_sql("""INSERT INTO queue (source_id, session_id, first_change_ms,
                           last_change_ms, due_ms, last_error)
                         VALUES (:s, :sid, :f, :l, :d, :e)
                         ON CONFLICT (source_id, session_id) DO UPDATE SET
                           first_change_ms=excluded.first_change_ms,
                           last_change_ms=excluded.last_change_ms,
                           due_ms=excluded.due_ms, last_error=excluded.last_error,
                           attempts=0
                         WHERE queue.last_change_ms <= excluded.last_change_ms""",
                      {"s": source_id, "sid": session_id, "f": first, "l": now_ms,
                       "d": due_ms, "e": note[:500] or None})
            row = c.exec_driver_sql("SELECT due_ms FROM queue WHERE source_id=:s AND "
                            "session_id=:sid", {"s": source_id, "sid": session_id}
                            ).fetchone()
        return int(row[0]) if row and row[0] is not None else due_ms

    def queue_expedite(self, keys: Sequence[tuple[str, str]], now_ms: int) -> None:
        """Make these queued sessions (``(source_id, session_id)``) due at ``now_ms``
        unless they are due sooner; sessions not queued are left alone. A light commit."""
        if not keys:
            return
        with self._file.tx(durable=False, outbox=False) as c:
            c.exec_driver_sql("UPDATE queue SET due_ms=:n WHERE source_id=:s AND "
                              "session_id=:sid AND due_ms > :n",
                              [{"s": s, "sid": sid, "n": now_ms} for s, sid in keys])

    def queue_failed(self, source_id: str, session_id: str, error: str) -> int:
        """Count a failed attempt of a queued session; return its attempt count."""
        with self._file.tx(durable=False, outbox=False) as c:
            c.exec_driver_sql("UPDATE queue SET attempts=attempts+1, last_error=:e "
                      "WHERE source_id=:s AND session_id=:sid",
                      {"s": source_id, "sid": session_id, "e": error[:500]})
            row = c.exec_driver_sql("SELECT attempts FROM queue WHERE source_id=:s AND "
                            "session_id=:sid", {"s": source_id, "sid": session_id}).fetchone()
        return int(row[0]) if row and row[0] else 1

    def queue_failing(self, limit: int = 10) -> tuple[int, list[dict[str, Any]]]:
        """Queued sessions whose last attempt failed (``attempts > 0``), the most failed
        first: ``(how many, the first limit rows as dicts)`` (see :meth:`queue`)."""
        with self._file.read() as c:
            n = c.exec_driver_sql("SELECT count(*) FROM queue WHERE attempts > 0").scalar_one()
            rows = c.exec_driver_sql("SELECT * FROM queue WHERE attempts > 0 ORDER BY "
                                     "attempts DESC, due_ms LIMIT ?", (limit,)
                                     ).mappings().all()
        return int(n), [dict(r) for r in rows]

    def queue_done(self, source_id: str, session_id: str, started_ms: int) -> None:
        """Remove a session from the queue unless it changed again after ``started_ms``;
        a light commit."""
        with self._file.tx(durable=False, outbox=False) as c:
            self._queue_done(c, source_id, session_id, started_ms)

    @staticmethod
    def _queue_done(c: Connection, source_id: str, session_id: str,
                    started_ms: int) -> None:
        c.exec_driver_sql(QUEUE_DONE_SQL, {"s": source_id, "sid": session_id, "t": started_ms})

    def queue_head(self, limit: int) -> list[tuple[str, str, int]]:
        """The first ``limit`` queued sessions, soonest due first:
        ``(source_id, session_id, due_ms)``."""
        with self._file.read() as c:
            rows = c.exec_driver_sql("SELECT source_id, session_id, due_ms FROM queue "
                             "ORDER BY due_ms LIMIT ?", (limit,)).fetchall()
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def queue_size(self) -> int:
        """How many sessions are queued."""
        with self._file.read() as c:
            n = c.exec_driver_sql("SELECT count(*) FROM queue").scalar_one()
        return int(n)

    def queue(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Queued sessions, soonest first (all, or the first ``limit``): the row as a dict
        (``source_id``, ``session_id``, ``first_change_ms``, ``last_change_ms``, ``due_ms``,
        ``attempts``, ``last_error``)."""
        sql = "SELECT * FROM queue ORDER BY due_ms"
        params: dict[str, Any] = {}
        if limit is not None:
            sql += " LIMIT :l"
            params["l"] = int(limit)
        with self._file.read() as c:
            rows = c.exec_driver_sql(sql, params).mappings().all()
        return [dict(r) for r in rows]
