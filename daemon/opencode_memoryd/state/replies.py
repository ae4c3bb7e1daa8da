"""Answers of the model kept until the work they were asked for is done (``llm_replies``).

A dream asks the model for one plan per group of memories and applies the plans at the end;
killed half-way, the next dream would ask, and pay, again for every plan it had; a session
summary whose answer could not be used would be asked for again at the next pass. So each
answer is recorded as it arrives, under a key derived from the exact request
(:mod:`opencode_memoryd.llm.recorded`), and the same request later gets the recorded
answer.
Times named ``now``/``before`` are ISO 8601 UTC strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from opencode_memoryd.state.engine import StateFile

__all__ = ["ReplyTable"]


class ReplyTable:
    """The ``llm_replies`` repository (``StateDB.replies``)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def recorded_reply(self, key: str) -> dict[str, Any] | None:
        """The answer recorded under ``key`` (the dict given to :meth:`record_reply`), or
        ``None``."""
        with self._file.read() as c:
            row = c.exec_driver_sql("SELECT reply FROM llm_replies WHERE key=:k",
                                    {"k": key}).fetchone()
        return dict(json.loads(row[0])) if row is not None else None

    def record_reply(self, key: str, reply: Mapping[str, Any], now: str) -> None:
        """Durably record an answer (a JSON-safe mapping) under ``key``, replacing any."""
        with self._file.tx() as c:
            c.exec_driver_sql("INSERT OR REPLACE INTO llm_replies (key, reply, created_at) "
                      "VALUES (:k, :r, :n)",
                      {"k": key, "r": json.dumps(dict(reply), sort_keys=True), "n": now})

    def forget_replies(self, keys: Sequence[str] = (), *, before: str | None = None) -> int:
        """Delete the answers under ``keys``, and every answer recorded before ``before``;
        return how many were deleted."""
        deleted = 0
        with self._file.tx() as c:
            for key in dict.fromkeys(keys):
                deleted += c.exec_driver_sql("DELETE FROM llm_replies WHERE key=:k",
                                     {"k": key}).rowcount
            if before is not None:
                deleted += c.exec_driver_sql("DELETE FROM llm_replies WHERE created_at < :b",
                                     {"b": before}).rowcount
        return deleted
