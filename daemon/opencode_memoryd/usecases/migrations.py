"""The store's one-time payload migrations run when a :class:`~opencode_memoryd.usecases.
service.Service` opens: each logs a store error instead of raising it (the next open
retries), so a command still runs over a store that could not be migrated yet."""

from __future__ import annotations

import structlog

from opencode_memoryd.errors import MemorydError
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases import identity, section_migration
from opencode_memoryd.usecases.maintain import LockFor

log = structlog.get_logger(__name__)


def migrate_user_scope(store: MemoryStore, user_id: str, lock_for: LockFor) -> int:
    """Give user-scope memories written before user identities existed this user's
    identity (:func:`opencode_memoryd.usecases.identity.migrate_user_scope`), under the
    user scope's lock (``lock_for("user")``).

    Returns:
        The number of memories migrated (0 on a store error, which is logged as
        ``user_scope_migration_failed``).
    """
    try:
        with lock_for("user"):
            return identity.migrate_user_scope(store, user_id)
    except MemorydError as exc:
        log.warning("user_scope_migration_failed", error=str(exc))
        return 0


def migrate_sections(store: MemoryStore) -> int:
    """Give memories written before sections existed a section
    (:func:`opencode_memoryd.usecases.section_migration.migrate_sections`).

    Returns:
        The number of memories given a section (0 on a store error, which is logged as
        ``section_migration_failed``).
    """
    try:
        return section_migration.migrate_sections(store)
    except MemorydError as exc:
        log.warning("section_migration_failed", error=str(exc))
        return 0
