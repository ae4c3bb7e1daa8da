"""The recall parts offered to sessions, and those that reached them (``recall_parts``).

A user message's recall part (:mod:`opencode_memoryd.usecases.recall`) is offered when the
daemon answers the plugin, and counts as given to the session only once the plugin says it
added the part to the message (:meth:`RecallTable.confirm_recall_part`, with the hash of the
part's closing line). What was given is left out of the session's later parts, across
restarts of the daemon too: OpenCode keeps the part in the session's history. Offers that
were never confirmed are dropped after :data:`UNCONFIRMED_TTL_MS`.

The notes added to tool calls' output (:mod:`opencode_memoryd.usecases.action`) are kept
here too once the plugin confirms them (:meth:`RecallTable.record_given`), as rows whose
message id is :data:`NOTE_KEY_PREFIX` and the note's digest: what a note gave is not given
again after a restart either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from opencode_memoryd.state.engine import StateFile

__all__ = ["NOTE_KEY_PREFIX", "UNCONFIRMED_TTL_MS", "RecallTable"]

#: How long an offer waits for its confirmation (ms): a day.
UNCONFIRMED_TTL_MS = 24 * 3600 * 1000
#: The message id of a confirmed note at a tool call is this and the note's digest (a
#: message id of OpenCode starts with ``msg_``).
NOTE_KEY_PREFIX = "note:"


class RecallTable:
    """The ``recall_parts`` repository (``StateDB.recall``)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def offer_recall_part(self, session_id: str, message_id: str, digest: str,
                          ids: Sequence[str], now_ms: int) -> None:
        """Record the part answered for ``message_id`` of ``session_id``: the 16 hex
        digits of its closing line (``digest``) and the memory ids it shows. A message
        already answered keeps its first offer. Light commit: an offer lost to a power
        cut only means its memories may come again."""
        with self._file.tx(durable=False, outbox=False) as c:
            c.exec_driver_sql("DELETE FROM recall_parts WHERE given=0 AND created_ms<:t",
                              {"t": now_ms - UNCONFIRMED_TTL_MS})
            c.exec_driver_sql(
                "INSERT OR IGNORE INTO recall_parts "
                "(session_id, message_id, digest, ids, given, created_ms) "
                "VALUES (:s, :m, :d, :i, 0, :t)",
                {"s": session_id, "m": message_id, "d": digest, "i": json.dumps(list(ids)),
                 "t": now_ms})

    def confirm_recall_part(self, session_id: str, message_id: str, digest: str
                            ) -> list[str] | None:
        """Mark the part of ``message_id`` given when ``digest`` is the one offered.

        Returns:
            The ids it showed, or ``None`` when no such part was offered (another digest,
            an unknown message, an offer dropped after a day).
        """
        with self._file.tx(outbox=False) as c:
            row = c.exec_driver_sql(
                "SELECT ids FROM recall_parts WHERE session_id=:s AND message_id=:m "
                "AND digest=:d", {"s": session_id, "m": message_id, "d": digest}).fetchone()
            if row is None:
                return None
            c.exec_driver_sql(
                "UPDATE recall_parts SET given=1 WHERE session_id=:s AND message_id=:m",
                {"s": session_id, "m": message_id})
        return [str(i) for i in json.loads(row[0])]

    def record_given(self, session_id: str, digest: str, ids: Sequence[str], now_ms: int
                     ) -> None:
        """Record that a note at a tool call of ``session_id`` (the 16 hex digits of its
        closing line: ``digest``) reached the session with the memory ids ``ids``: they are
        among :meth:`given_recall_ids` from now on. Two notes of the same lines (their
        memories alike, their ids not) share one row holding both notes' ids. Light
        commit, as an offer: a note lost to a power cut only means its memories may come
        again."""
        key = NOTE_KEY_PREFIX + digest
        with self._file.tx(durable=False, outbox=False) as c:
            row = c.exec_driver_sql(
                "SELECT ids FROM recall_parts WHERE session_id=:s AND message_id=:m",
                {"s": session_id, "m": key}).fetchone()
            held = [str(i) for i in json.loads(row[0])] if row is not None else []
            merged = held + [i for i in ids if i not in held]
            c.exec_driver_sql(
                "INSERT INTO recall_parts "
                "(session_id, message_id, digest, ids, given, created_ms) "
                "VALUES (:s, :m, :d, :i, 1, :t) "
                "ON CONFLICT (session_id, message_id) DO UPDATE SET ids=excluded.ids, given=1",
                {"s": session_id, "m": key, "d": digest, "i": json.dumps(merged),
                 "t": now_ms})

    def given_recall_ids(self, session_id: str) -> set[str]:
        """The memory ids of every confirmed part and note of ``session_id``."""
        with self._file.read() as c:
            rows = c.exec_driver_sql(
                "SELECT ids FROM recall_parts WHERE session_id=:s AND given=1",
                {"s": session_id}).fetchall()
        return {str(i) for r in rows for i in json.loads(r[0])}
