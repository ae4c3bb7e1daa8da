"""``profile``: this user's user-scope memories, grouped by type."""

from __future__ import annotations

from typing import Any

from opencode_memoryd.models import MEMORY_TYPES, Memory, iso_utc
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.ports import AppPort


def _newest_first(ms: list[Memory]) -> list[Memory]:
    return sorted(ms, key=lambda m: (m.updated_at, m.id), reverse=True)


def user_profile(app: AppPort, store: MemoryStore) -> dict[str, Any]:
    """The active user-scope memories of ``app.user_id``, grouped by type; the agent's
    pending notes are not the user's profile and are left out.

    Returns:
        ``{"user_id", "total": int, "updated_at": ISO time of the newest change | None,
        "types": {type: {"count": int, "updated_at": ISO time, "memories": [payloads,
        newest change first]}}}`` with the types that have memories, in the order
        ``user``, ``feedback``, ``project``, ``reference``. JSON-safe; the same store gives
        the same result.
    """
    mine = [m for m in store.scroll(MemoryFilter(scope="user", user_id=app.user_id))
            if not m.pending]
    types: dict[str, dict[str, Any]] = {}
    for t in MEMORY_TYPES:
        group = _newest_first([m for m in mine if m.type == t])
        if group:
            types[t] = {"count": len(group), "updated_at": iso_utc(group[0].updated_at),
                        "memories": [m.to_payload() for m in group]}
    newest = max((m.updated_at for m in mine), default=None)
    return {"user_id": app.user_id, "total": len(mine),
            "updated_at": iso_utc(newest) if newest else None, "types": types}
