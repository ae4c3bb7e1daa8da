"""User-scope memories written before user identities existed become this user's."""

from __future__ import annotations

import structlog

from opencode_memoryd.store.api import MemoryFilter, MemoryStore

log = structlog.get_logger(__name__)

#: Memories rewritten per upsert by :func:`migrate_user_scope`.
MIGRATION_BATCH = 64


def migrate_user_scope(store: MemoryStore, user_id: str, *,
                       batch_size: int = MIGRATION_BATCH) -> int:
    """Give every user-scope memory without a ``user_id`` (tombstones too) this one.

    Idempotent: once done, one filtered count finds nothing to do. The point ids stay as
    they were (the dream journal and the state file refer to them); a fact written again
    later reaches the migrated memory through the writer's near-duplicate search. On a
    store shared by several people, the first daemon that runs this claims every such
    memory: before identities existed nobody could tell whose they were.

    Returns:
        The number of memories migrated.

    Raises:
        ValueError: ``batch_size`` is not positive, or ``user_id`` is empty.
        StoreError, UpstreamError: from the store (a partial run is finished by the next).
    """
    if batch_size <= 0:
        raise ValueError("batch_size must be positive")
    if not user_id:
        raise ValueError("user_id must not be empty")
    flt = MemoryFilter(scope="user", without_user_id=True, include_retired=True)
    if store.count(flt) == 0:
        return 0
    todo = list(store.scroll(flt))
    for m in todo:
        m.user_id = user_id
    for i in range(0, len(todo), batch_size):
        store.upsert(todo[i:i + batch_size])
    log.info("user_scope_migrated", memories=len(todo), user_id=user_id)
    return len(todo)
