"""Read your own writes: what was just said reaches the next session's block.

A session is extracted once it has been quiet for the debounce period
(``[daemon] quiet_period_seconds``), so a fact said in one session would miss the block of
a session opened right after it. When a session asks for its block for the first time, the
daemon first makes the queued sessions of the same project due now, wakes the worker and
waits for them, at most ``[context] capture_first_seconds`` (0.3 s by default); what does
not fit (an LLM call, a turn still running) goes on in the background at its new due
time, and the block is built with what is there. Nothing here reads a turn that is not
finished: the worker's finished-turn rule still decides.

The worker goes first for these sessions (no stepping aside for the command that waits for
them, :meth:`OwnWrites.wanted`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opencode_memoryd.errors import SourceError

if TYPE_CHECKING:
    from opencode_memoryd.serve.runtime.sources import TrackedSource


#: Sessions remembered as having had their first block (the oldest are forgotten).
MAX_SERVED = 4096

Key = tuple[str, str]  # (source id, session id)


class OwnWrites:
    """The sessions a command waits for, shared by the command threads and the worker.

    Thread-safe. The worker calls :meth:`wanted` before a session (to skip stepping aside)
    and :meth:`done` after it, whatever the outcome (extracted, rescheduled, failed).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[Key, int] = {}  # key -> how many waiters want it
        self._served: OrderedDict[str, None] = OrderedDict()

    def first_ask(self, session_id: str | None) -> bool:
        """Whether this is the first block request of ``session_id`` (``None``, a request
        of no session, always counts as a first one); records it."""
        if not session_id:
            return True
        with self._cond:
            if session_id in self._served:
                self._served.move_to_end(session_id)
                return False
            self._served[session_id] = None
            while len(self._served) > MAX_SERVED:
                self._served.popitem(last=False)
        return True

    def wanted(self, key: Key) -> bool:
        """Whether a command waits for the session ``key``."""
        return key in self._pending

    def done(self, key: Key) -> None:
        """The worker finished a round of the session ``key``."""
        with self._cond:
            if self._pending.pop(key, None) is not None:
                self._cond.notify_all()

    def wait_for(self, keys: Iterable[Key], start: Callable[[], None], seconds: float
                 ) -> tuple[int, int]:
        """Register ``keys``, call ``start`` (which makes them due and wakes the worker),
        and wait until the worker has been through each of them, at most ``seconds``.

        Returns:
            ``(asked, done)``: how many sessions were waited for, and how many the worker
            went through in time.
        """
        wanted = set(keys)
        if not wanted:
            return 0, 0
        with self._cond:
            for key in wanted:
                self._pending[key] = self._pending.get(key, 0) + 1
        start()
        deadline = time.monotonic() + seconds
        with self._cond:
            while True:
                left = [k for k in wanted if k in self._pending]
                remaining = deadline - time.monotonic()
                if not left or remaining <= 0:
                    break
                self._cond.wait(remaining)
            for key in left:  # given up on: the worker takes it in the background
                n = self._pending.get(key, 0) - 1
                if n <= 0:
                    self._pending.pop(key, None)
                else:
                    self._pending[key] = n
        return len(wanted), len(wanted) - len(left)


def queued_of_project(sources: Mapping[str, TrackedSource], queue: Sequence[Mapping[str, Any]],
                      directory: str, *, skip: str | None = None) -> list[Key]:
    """The queued sessions of ``directory``'s OpenCode project(s).

    Args:
        sources: the databases the daemon follows, by source id.
        queue: the queue's rows (``source_id``, ``session_id``, ...).
        directory: a normalised absolute folder (the asking session's).
        skip: a session id left out (the one asking: its own turn is running).

    Returns:
        ``(source_id, session_id)`` of each queued session whose project is one of the
        folder's; empty when the folder has no known project. A database that cannot be
        read is left out (its sessions are captured at their own time).
    """
    if not queue:
        return []
    projects: set[str] = set()
    for tracked in list(sources.values()):
        try:
            projects.update(s.project_key for s in tracked.db.sessions(
                directory=directory, include_subagents=True))
        except SourceError:
            continue
    keys: list[Key] = []
    for row in queue:
        source_id, session_id = str(row["source_id"]), str(row["session_id"])
        src = sources.get(source_id)
        if src is None or session_id == skip:
            continue
        try:
            found = src.db.session(session_id)
        except SourceError:
            continue
        if found is not None and found.project_key in projects:
            keys.append((source_id, session_id))
    return keys
