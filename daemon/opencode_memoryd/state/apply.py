"""The deferred writes of a :class:`~opencode_memoryd.state.batch.StateBatch`, applied in
one transaction with one ``executemany`` per statement.

A batch holds, in order, writes of the kinds ``record`` (insert an outbox row, drop the
failure records it settles), ``complete`` (mark a row stored, move the mark), ``mark`` (move
a mark), ``replace_mark`` (set or delete a mark, also backwards) and ``queue_done``
(unqueue a session). Between two ``replace_mark`` writes the rows are grouped by statement
and each statement runs once over its rows, in this order: inserts, dropped failures,
stored rows, mark moves (in the batch's order), unqueued sessions. The outcome is that of
the writes one by one: an insert precedes the update of its row, a mark move only moves a
mark forward (or into another storage, kept in the batch's order), and the other
statements touch rows no other statement of the group does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opencode_memoryd.state.items import (
    DROP_FAILING_SQL,
    DROP_FAILURE_SQL,
    INSERT_ITEM_SQL,
    SET_MARK_SQL,
    STORED_SQL,
    MarkTable,
    completed_mark_params,
    drop_failing_params,
    item_params,
    mark_params,
)
from opencode_memoryd.state.queue import QUEUE_DONE_SQL

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["KINDS", "apply_ops"]

#: The kinds of deferred writes.
KINDS = frozenset({"record", "complete", "mark", "replace_mark", "queue_done"})


def apply_ops(c: Connection, ops: Sequence[tuple[Any, ...]]) -> None:
    """Apply deferred writes in the transaction ``c`` (see the module docstring).

    Raises:
        ValueError: an unknown kind of write (checked before anything is written).
    """
    for op in ops:
        if op[0] not in KINDS:
            raise ValueError(f"unknown batched state write {op[0]!r}")
    group: list[tuple[Any, ...]] = []
    for op in ops:
        if op[0] == "replace_mark":
            _apply_group(c, group)
            group = []
            MarkTable._replace_mark(c, *op[1:])
        else:
            group.append(op)
    _apply_group(c, group)


def _apply_group(c: Connection, ops: Sequence[tuple[Any, ...]]) -> None:
    inserts: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    settled: list[dict[str, Any]] = []
    stored: list[dict[str, Any]] = []
    marks: list[dict[str, Any]] = []
    unqueued: list[dict[str, Any]] = []
    for op in ops:
        kind = op[0]
        if kind == "record":
            item, now, settles = op[1], op[2], op[3] if len(op) > 3 else None
            inserts.append(item_params(item, now))
            failing.append(drop_failing_params(item))
            if settles is not None:
                settled.append({"id": settles})
        elif kind == "complete":
            item, now = op[1], op[2]
            stored.append({"id": item.id, "now": now})
            marks.append(completed_mark_params(item, now))
        elif kind == "mark":
            marks.append(mark_params(*op[1:]))
        else:  # queue_done
            unqueued.append({"s": op[1], "sid": op[2], "t": op[3]})
    for sql, rows in ((INSERT_ITEM_SQL, inserts), (DROP_FAILING_SQL, failing),
                      (DROP_FAILURE_SQL, settled), (STORED_SQL, stored),
                      (SET_MARK_SQL, marks), (QUEUE_DONE_SQL, unqueued)):
        if rows:
            c.exec_driver_sql(sql, rows)
