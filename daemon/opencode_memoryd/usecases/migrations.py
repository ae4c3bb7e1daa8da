"""The store's data migrations: numbered steps, each run once and recorded in the store.

The steps a store has had are recorded in its metadata
(:meth:`~opencode_memoryd.store.api.MemoryStore.record_migration`, the ``migrations`` list
of :mod:`opencode_memoryd.store.meta`), in the manner of the state file's steps
(:mod:`opencode_memoryd.state.migrations`). When a :class:`~opencode_memoryd.usecases.
service.Service` opens, :func:`migrate_store_data` runs the steps not recorded; when every
step is recorded it reads the metadata and does nothing more. A store written before the
steps were recorded has none recorded: each step runs once on it (each is idempotent: it
finds what it has to change with one filtered count).

A step that fails logs the store error instead of raising it and is not recorded (the next
open runs it again), so a command still runs over a store that could not be migrated yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from opencode_memoryd.errors import MemorydError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases import identity, section_migration
from opencode_memoryd.usecases.maintain import LockFor

log = structlog.get_logger(__name__)


def _user_scope(store: MemoryStore, user_id: str, lock_for: LockFor) -> int:
    with lock_for("user"):
        return identity.migrate_user_scope(store, user_id)


@dataclass(frozen=True)
class StoreStep:
    """One numbered data migration of the store.

    Attributes:
        version: its number (the order the steps run in).
        name: what it does, recorded with it.
        event: the log event of its failure.
        run: the step, given the store, this user's id and the per-scope lock factory;
            returns the number of memories it changed.
    """

    version: int
    name: str
    event: str
    run: Callable[[MemoryStore, str, LockFor], int]


#: Every step, in order.
STORE_STEPS: tuple[StoreStep, ...] = (
    StoreStep(1, "user-scope memories without a user identity become this user's",
              "user_scope_migration_failed", _user_scope),
    StoreStep(2, "a section for every memory", "section_migration_failed",
              lambda store, _user, _lock: section_migration.migrate_sections(store)),
)


def migrate_store_data(store: MemoryStore, user_id: str, lock_for: LockFor, *,
                       clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                       ) -> dict[int, int]:
    """Run the data migrations ``store`` has not had, in order, recording each that
    completes (``applied_at``: ``clock()`` as ISO-8601 UTC).

    Returns:
        ``{version: memories changed}`` of the steps run and recorded (empty when the
        store was current). A step that failed is logged (its ``event``) and left out.
    """
    try:
        done = {m["version"] for m in store.migrations()}
    except MemorydError as exc:
        log.warning("store_migrations_unreadable", error=str(exc))
        return {}
    ran: dict[int, int] = {}
    for step in STORE_STEPS:
        if step.version in done:
            continue
        try:
            changed = step.run(store, user_id, lock_for)
            store.record_migration(step.version, step.name, iso_utc(clock()))
        except MemorydError as exc:
            log.warning(step.event, error=str(exc))
            continue
        ran[step.version] = changed
    return ran


def migrate_user_scope(store: MemoryStore, user_id: str, lock_for: LockFor) -> int:
    """Give user-scope memories written before user identities existed this user's
    identity (:func:`opencode_memoryd.usecases.identity.migrate_user_scope`), under the
    user scope's lock (``lock_for("user")``).

    Returns:
        The number of memories migrated (0 on a store error, which is logged as
        ``user_scope_migration_failed``).
    """
    try:
        return _user_scope(store, user_id, lock_for)
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
