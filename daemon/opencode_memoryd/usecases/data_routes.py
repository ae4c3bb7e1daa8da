"""The routes that move memories in and out of the store as a whole or for good:
``export``, ``import_memories`` (:mod:`~opencode_memoryd.usecases.transfer`) and ``purge``
(:mod:`~opencode_memoryd.usecases.purge`), as methods :class:`~.service.Service` inherits."""

from __future__ import annotations

from typing import Any

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import RefusedError
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases.maintain import LockFor
from opencode_memoryd.usecases.ports import AppPort


class DataRoutes:
    """``export``, ``import_memories`` and ``purge`` over the service's open resources."""

    app: AppPort
    store: MemoryStore
    journal: DreamJournal
    manual_journal: DreamJournal
    lock_for: LockFor

    def export(self) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.transfer.export_memories`."""
        from opencode_memoryd.usecases.transfer import export_memories

        return export_memories(self.app, self.store)

    def import_memories(self, *, document: object) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.transfer.import_memories`."""
        from opencode_memoryd.usecases.transfer import import_memories

        return import_memories(self.app, self.store, self.manual_journal, document)

    def purge(self, *, memory_id: str, caller: str = "user") -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.purge.purge_memory`; refused
        (:class:`~opencode_memoryd.errors.RefusedError`) to the agent."""
        from opencode_memoryd.usecases.purge import purge_memory

        if caller != "user":
            raise RefusedError("purge: only the user deletes a memory for good; ask the "
                               "user to run `opencode-memoryd forget --purge ID`")

        return purge_memory(self.app, self.store, self.journal, self.manual_journal,
                            memory_id, lock_for=self.lock_for)
