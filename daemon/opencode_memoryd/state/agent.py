"""The agent's forgets, counted against a rate limit (``agent_forgets``).

One row per memory the agent forgot (through the MCP tool, or the CLI run from its shell),
kept for the limit's window; the count of rows in the window decides whether the next one
is allowed. The table lives in the state file, so the limit holds across the daemon's
restarts and across CLI processes. Times are ISO 8601 UTC strings (ordered as text).
"""

from __future__ import annotations

from opencode_memoryd.state.engine import StateFile

__all__ = ["AgentTable"]


class AgentTable:
    """The ``agent_forgets`` repository (``StateDB.agent``)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def spend_agent_forget(self, memory_id: str, *, now: str, since: str,
                           limit: int) -> int | None:
        """Count one agent forget of ``memory_id`` at ``now`` unless ``limit`` forgets
        were counted since ``since`` already (one transaction: two callers never both
        take the last one). Rows older than ``since`` are dropped.

        Returns:
            The forgets in the window including this one, or ``None`` (nothing recorded)
            when the limit is reached.
        """
        with self._file.tx(outbox=False) as c:
            c.exec_driver_sql("DELETE FROM agent_forgets WHERE at < :s", {"s": since})
            used = int(c.exec_driver_sql("SELECT COUNT(*) FROM agent_forgets").scalar() or 0)
            if used >= limit:
                return None
            c.exec_driver_sql("INSERT INTO agent_forgets (at, memory_id) VALUES (:a, :m)",
                              {"a": now, "m": memory_id})
        return used + 1

    def agent_forgets_since(self, since: str) -> int:
        """The agent forgets counted at or after ``since``."""
        with self._file.read() as c:
            return int(c.exec_driver_sql("SELECT COUNT(*) FROM agent_forgets WHERE at >= :s",
                                         {"s": since}).scalar() or 0)
