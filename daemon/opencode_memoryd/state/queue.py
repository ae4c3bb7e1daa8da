"""The daemon's work queue (``queue``): sessions that changed and wait to be extracted.

One row per (source database identity, session) with its debounce times, so a restart
loses no pending work. Times are ms since the epoch; the due time follows
:class:`opencode_memoryd.debounce.Pending`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from opencode_memoryd.debounce import Pending
from opencode_memoryd.state.engine import StateFile

__all__ = ["QueueTable"]


class QueueTable(StateFile):
    """The ``queue`` operations of :class:`~opencode_memoryd.state.db.StateDB`."""

    def queue_touch_many(self, source_id: str, session_ids: Sequence[str], now_ms: int,
                         quiet_seconds: float, max_wait_seconds: float) -> dict[str, int]:
        """Record a change of each session at ``now_ms``, in one transaction (one fsync);
        return each session's new due time (ms).

        The first change of a pending session starts its max-wait clock; later changes
        only push the quiet period (see :mod:`opencode_memoryd.debounce`).
        """
        out: dict[str, int] = {}
        with self._engine.begin() as c:
            for session_id in session_ids:
                row = c.execute(text("SELECT first_change_ms, last_change_ms FROM queue "
                                     "WHERE source_id=:s AND session_id=:sid"),
                                {"s": source_id, "sid": session_id}).first()
                pending = (Pending(int(row[0]), int(row[1])).touched(now_ms) if row
                           else Pending(now_ms, now_ms))
                due = pending.due_ms(quiet_seconds=quiet_seconds,
                                     max_wait_seconds=max_wait_seconds)
                c.execute(text("""INSERT INTO queue (source_id, session_id, first_change_ms,
                                    last_change_ms, due_ms) VALUES (:s, :sid, :f, :l, :d)
                                  ON CONFLICT (source_id, session_id) DO UPDATE SET
                                    last_change_ms=excluded.last_change_ms,
                                    due_ms=excluded.due_ms"""),
                          {"s": source_id, "sid": session_id, "f": pending.first_change_ms,
                           "l": pending.last_change_ms, "d": due})
                out[session_id] = due
        return out

    def queue_reschedule(self, source_id: str, session_id: str, due_ms: int, note: str) -> None:
        """Move a queued session's due time (a wait, not a failure)."""
        with self._engine.begin() as c:
            c.execute(text("UPDATE queue SET due_ms=:d, last_error=:e "
                           "WHERE source_id=:s AND session_id=:sid"),
                      {"s": source_id, "sid": session_id, "d": due_ms, "e": note[:500] or None})

    def queue_defer(self, source_id: str, session_id: str, due_ms: int, now_ms: int,
                    max_wait_seconds: float, note: str) -> int:
        """Keep a session queued until ``due_ms`` for work that waits on time rather than on
        a change (its summary, once it has been idle long enough).

        Its max-wait clock is set to end at ``due_ms`` (``first_change_ms = due_ms -
        max_wait``), so it counts as waiting too long only once ``due_ms`` has passed, and
        a change before then is still extracted after the quiet period (``last_change_ms``
        is ``now_ms``). A session that is not queued is queued; one that changed after
        ``now_ms`` (the start of the run that asks) is left as it is: it is due sooner.

        Returns:
            The session's due time now (ms): ``due_ms``, or the sooner one it kept.
        """
        first = due_ms - int(max_wait_seconds * 1000)
        with self._engine.begin() as c:
            c.execute(text("""INSERT INTO queue (source_id, session_id, first_change_ms,
                                last_change_ms, due_ms, last_error)
                              VALUES (:s, :sid, :f, :l, :d, :e)
                              ON CONFLICT (source_id, session_id) DO UPDATE SET
                                first_change_ms=excluded.first_change_ms,
                                last_change_ms=excluded.last_change_ms,
                                due_ms=excluded.due_ms, last_error=excluded.last_error,
                                attempts=0
                              WHERE queue.last_change_ms <= excluded.last_change_ms"""),
                      {"s": source_id, "sid": session_id, "f": first, "l": now_ms,
                       "d": due_ms, "e": note[:500] or None})
            due = c.execute(text("SELECT due_ms FROM queue WHERE source_id=:s AND "
                                 "session_id=:sid"), {"s": source_id, "sid": session_id}
                            ).scalar()
        return int(due if due is not None else due_ms)

    def queue_failed(self, source_id: str, session_id: str, error: str) -> int:
        """Count a failed attempt of a queued session; return its attempt count."""
        with self._engine.begin() as c:
            c.execute(text("UPDATE queue SET attempts=attempts+1, last_error=:e "
                           "WHERE source_id=:s AND session_id=:sid"),
                      {"s": source_id, "sid": session_id, "e": error[:500]})
            n = c.execute(text("SELECT attempts FROM queue WHERE source_id=:s AND "
                               "session_id=:sid"), {"s": source_id, "sid": session_id}).scalar()
        return int(n or 1)

    def queue_done(self, source_id: str, session_id: str, started_ms: int) -> None:
        """Remove a session from the queue unless it changed again after ``started_ms``."""
        with self._engine.begin() as c:
            c.execute(text("DELETE FROM queue WHERE source_id=:s AND session_id=:sid "
                           "AND last_change_ms <= :t"),
                      {"s": source_id, "sid": session_id, "t": started_ms})

    def queue(self) -> list[dict[str, Any]]:
        """Every queued session, soonest first: the row as a dict (``source_id``,
        ``session_id``, ``first_change_ms``, ``last_change_ms``, ``due_ms``, ``attempts``,
        ``last_error``)."""
        with self._engine.begin() as c:
            rows = c.execute(text("SELECT * FROM queue ORDER BY due_ms")).mappings().all()
        return [dict(r) for r in rows]
