"""Group the writes of many sessions: one store flush and one state commit per group.

Processing a session writes to the store (memories) and to the state file (its mark, its
outbox item, its queue row). :class:`WriteGroup` holds the state writes in a
:class:`~opencode_memoryd.state.batch.StateBatch` and the store writes in a
:meth:`~opencode_memoryd.store.api.MemoryStore.batch`, and commits them in this order: flush
the store, then commit the state. A mark is therefore never durable before the memories it
covers, and a crash before the commit only means reading those turns again (see
:mod:`opencode_memoryd.state.batch`).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Self

from opencode_memoryd.state.batch import StateBatch

if TYPE_CHECKING:
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.api import MemoryStore

__all__ = ["WriteGroup"]

#: A group is committed once it holds this many state writes ...
MAX_WRITES = 2000
#: ... or is this old (seconds), whichever comes first.
MAX_SECONDS = 0.5


class WriteGroup:
    """A state batch and a store batch, committed together (store first).

    Use as a context manager; the writes are committed on exit (also when the block
    raised: what was done is valid progress) and by :meth:`commit` /
    :meth:`commit_if_due` in between. One group belongs to one thread.

    Args:
        state: the state file.
        store: the memory store.
        max_writes: :meth:`commit_if_due` commits at this many state writes ...
        max_seconds: ... or when the oldest uncommitted write is this old.
    """

    def __init__(self, state: StateDB, store: MemoryStore, *, max_writes: int = MAX_WRITES,
                 max_seconds: float = MAX_SECONDS) -> None:
        self.state = state
        self.store = store
        self.batch = StateBatch(state)
        self.max_writes = max_writes
        self.max_seconds = max_seconds
        self._stack: ExitStack | None = None
        self._opened = time.monotonic()
        #: commits made (non-empty ones)
        self.commits = 0

    def _open(self) -> None:
        self._stack = ExitStack()
        self._stack.enter_context(self.store.batch())
        self._opened = time.monotonic()

    def __enter__(self) -> Self:
        self._open()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_and_commit()

    def _close_and_commit(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()  # flushes the store when the group wrote to it
        if self.batch.commit():
            self.commits += 1

    def commit(self) -> None:
        """Flush the store, commit the state writes, and go on with an empty group.

        Raises:
            StoreError: the store flush failed (the state writes are then not committed).
        """
        self._close_and_commit()
        self._open()

    def commit_if_due(self) -> None:
        """:meth:`commit` when the group holds ``max_writes`` writes or is
        ``max_seconds`` old."""
        if len(self.batch) >= self.max_writes or (
                len(self.batch) and time.monotonic() - self._opened >= self.max_seconds):
            self.commit()
