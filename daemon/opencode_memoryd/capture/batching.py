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
#: ... or is this old (seconds) ...
MAX_SECONDS = 0.5
#: ... or, once it wrote to the store, as soon as the previous flush is this long ago: a store
#: flush costs tens of milliseconds (and holds the interpreter), so while sessions keep
#: coming their store writes are made durable together, at most this often.
FLUSH_SECONDS = 1.0


class WriteGroup:
    """A state batch and a store batch, committed together (store first).

    Use as a context manager; the writes are committed on exit (also when the block
    raised: what was done is valid progress) and by :meth:`commit` /
    :meth:`commit_if_due` in between. One group belongs to one thread.

    Args:
        state: the state file.
        store: the memory store.
        max_writes: a group is due at this many state writes ...
        max_seconds: ... or this old (seconds) ...
        flush_seconds: ... or, when it wrote to the store, once the previous flush is this
            long ago.
    """

    def __init__(self, state: StateDB, store: MemoryStore, *, max_writes: int = MAX_WRITES,
                 max_seconds: float = MAX_SECONDS,
                 flush_seconds: float = FLUSH_SECONDS) -> None:
        self.state = state
        self.store = store
        self.batch = StateBatch(state)
        self.max_writes = max_writes
        self.max_seconds = max_seconds
        self.flush_seconds = flush_seconds
        self._stack: ExitStack | None = None
        self._opened = time.monotonic()
        self._last_flush = time.monotonic()
        #: sessions noted since the last commit: ``(source id, session id)``
        self.sessions: set[tuple[str, str]] = set()
        #: commits made (non-empty ones)
        self.commits = 0

    def _open(self) -> None:
        self._stack = ExitStack()
        self._stack.enter_context(self.store.batch())
        self._opened = time.monotonic()
        self.sessions = set()

    def __enter__(self) -> Self:
        self._open()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_and_commit()

    def _close_and_commit(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            flushed = self.wrote_store
            stack.close()  # flushes the store when the group wrote to it
            if flushed:
                self._last_flush = time.monotonic()
        if self.batch.commit():
            self.commits += 1

    def note(self, source_id: str, session_id: str) -> None:
        """Note a session done in this group (until the group commits, the caller does not
        take it again)."""
        self.sessions.add((source_id, session_id))

    @property
    def wrote_store(self) -> bool:
        """Whether this group wrote to the store (its commit flushes it)."""
        return self.store.pending_flush()

    def commit(self) -> None:
        """Flush the store, commit the state writes, and go on with an empty group.

        Raises:
            StoreError: the store flush failed (the state writes are then not committed).
        """
        self._close_and_commit()
        self._open()

    def seconds_until_due(self, *, idle: bool = False,
                          flush_seconds: float | None = None) -> float | None:
        """Seconds until the group is due for a commit (0: now), or ``None`` when it
        holds nothing.

        Args:
            idle: the caller has nothing else to do: a group that did not write to the
                store is due at once (its commit costs no flush).
            flush_seconds: instead of the group's ``flush_seconds`` (a caller with a
                backlog flushes less often).
        """
        flush = self.flush_seconds if flush_seconds is None else flush_seconds
        if not len(self.batch):
            return None
        now = time.monotonic()
        if len(self.batch) >= self.max_writes:
            return 0.0
        if self.wrote_store:
            return max(0.0, self._last_flush + flush - now)
        if idle:
            return 0.0
        return max(0.0, self._opened + self.max_seconds - now)

    def commit_if_due(self, *, idle: bool = False, flush_seconds: float | None = None
                      ) -> None:
        """:meth:`commit` when :meth:`seconds_until_due` is 0."""
        if self.seconds_until_due(idle=idle, flush_seconds=flush_seconds) == 0.0:
            self.commit()
