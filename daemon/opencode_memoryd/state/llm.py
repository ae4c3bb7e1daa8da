"""The structured-output mode negotiated per LLM endpoint and model (``llm_modes``).

The chat client (:class:`~opencode_memoryd.llm.chat.ChatClient`) asks here which
mode works with an endpoint and model, and records the mode it fell back to (or found
working), so a later run does not pay the refused requests again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opencode_memoryd.models import NegotiatedMode
from opencode_memoryd.state.engine import StateFile

if TYPE_CHECKING:
    from sqlalchemy.engine import RowMapping

__all__ = ["LlmModeTable"]


class LlmModeTable:
    """The ``llm_modes`` repository (``StateDB.llm``)
    (implements :class:`~opencode_memoryd.llm.modes.ModeMemory`)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def llm_mode(self, base_url: str, model: str) -> NegotiatedMode | None:
        """The mode remembered for ``(base_url, model)``, or ``None``."""
        with self._file.read() as c:
            row = c.exec_driver_sql("SELECT * FROM llm_modes WHERE base_url=:u AND model=:m",
                            {"u": base_url, "m": model}).mappings().fetchone()
        return _mode(row) if row else None

    def remember_llm_mode(self, mode: NegotiatedMode) -> None:
        """Remember ``mode`` for its ``(base_url, model)``, replacing what was there."""
        with self._file.tx() as c:
            c.exec_driver_sql("""INSERT INTO llm_modes (base_url, model, json_mode, start, detail,
                                                     updated_at)
                              VALUES (:u, :m, :j, :s, :d, :t)
                              ON CONFLICT (base_url, model) DO UPDATE SET
                                json_mode=excluded.json_mode, start=excluded.start,
                                detail=excluded.detail, updated_at=excluded.updated_at""",
                      {"u": mode.base_url, "m": mode.model, "j": mode.json_mode,
                       "s": mode.start, "d": mode.detail[:300], "t": mode.updated_at})

    def llm_modes(self) -> list[NegotiatedMode]:
        """Every remembered mode, newest first."""
        with self._file.read() as c:
            rows = c.exec_driver_sql("SELECT * FROM llm_modes ORDER BY updated_at DESC, "
                                  "base_url, model").mappings().all()
        return [_mode(r) for r in rows]

    def forget_llm_modes(self) -> int:
        """Forget every remembered mode (the next call negotiates again); returns how
        many were forgotten."""
        with self._file.tx() as c:
            n = c.exec_driver_sql("DELETE FROM llm_modes").rowcount
        return int(n or 0)


def _mode(r: RowMapping) -> NegotiatedMode:
    return NegotiatedMode(base_url=r["base_url"], model=r["model"], json_mode=r["json_mode"],
                          start=r["start"], detail=r["detail"], updated_at=r["updated_at"])
