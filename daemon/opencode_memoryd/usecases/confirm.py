"""The user's answer to the agent's user-scope notes: confirm one (it becomes the user's and
reaches every project's context block) or reject it (forgotten: a tombstone).

The agent may add a user-scope memory only as a *pending* note
(:mod:`~opencode_memoryd.usecases.agent_limits`); only the user answers it, from the CLI
(``opencode-memoryd confirm``) or the memory page, never the agent.
"""

from __future__ import annotations

from typing import Any

import structlog

from opencode_memoryd.errors import RefusedError
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.curate import scope_lock_key, visible
from opencode_memoryd.usecases.maintain import LockFor, no_lock
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)

#: ``retired_reason`` of a pending note the user rejected.
REJECTED = "rejected"


def pending_memories(app: AppPort, store: MemoryStore) -> list[dict[str, Any]]:
    """This user's pending notes (payloads), oldest first."""
    found = [m for m in store.scroll(MemoryFilter(user_id=app.user_id)) if m.pending]
    return [m.to_payload() for m in sorted(found, key=lambda m: (m.created_at, m.id))]


def confirm_memory(app: AppPort, store: MemoryStore, memory_id: object, *,
                   reject: bool = False, agent: bool = False,
                   lock_for: LockFor = no_lock) -> dict[str, Any]:
    """Confirm (``provenance`` ``user``, no longer pending) or reject (retired, reason
    ``rejected``) a pending note, under its scope's lock.

    Returns:
        ``{"memory": payload, "status": "confirmed" | "rejected"}``.

    Raises:
        RequestError: ``memory_id`` is not a non-empty string.
        NotFoundError: no such memory (or another user's).
        RefusedError: the agent asked (only the user answers), or the memory is not
            pending (or is retired); nothing was changed.
    """
    verb = "reject" if reject else "confirm"
    if agent:
        raise RefusedError(f"{verb}: only the user confirms or rejects the agent's notes; "
                           "ask the user to run `opencode-memoryd confirm` or to use the "
                           "memory page")
    m = visible(app, store, memory_id, verb)
    with lock_for(scope_lock_key(m)):
        m = visible(app, store, memory_id, verb)
        if not m.pending or not m.is_active:
            raise RefusedError(f"{verb}: memory {m.id} is not a pending note of the agent; "
                               "`opencode-memoryd confirm` lists the pending ones")
        m.pending = False
        if reject:
            m.status, m.retired_reason = "retired", REJECTED
        else:
            m.provenance = "user"
        m.updated_at = app.clock()
        store.upsert([m])
    status = "rejected" if reject else "confirmed"
    log.info("memory_" + status, id=m.id, scope=m.scope, project=m.project_id)
    return {"memory": m.to_payload(), "status": status}
