"""Commands first: the daemon's background work steps aside while a command is served.

A backfill (the first pass over a big database, the worker extracting what it queued) and
the imports the daemon defers until commands are served (the MCP SDK, the scheduler) are
Python code holding the interpreter lock most of the time; a command that arrives meanwhile
would get a share of it only, and answer several times slower. The control server notes
each connection from its accept to its last byte written (:meth:`Foreground.arrived`,
:meth:`Foreground.left`); background threads call :meth:`Foreground.step_aside` between
small steps (a session, a batch of queued sessions), which waits while a connection younger
than :data:`PRIORITY_SECONDS` is open. The wait is bounded twice: a long command (a
``maintain`` or ``dream`` asked over the socket) stops having priority after
:data:`PRIORITY_SECONDS`, and one call waits :data:`MAX_STEP_ASIDE_SECONDS` at most, so a
command waiting for the background work (a lock it holds) is never blocked by it for long.
"""

from __future__ import annotations

import threading
import time

#: A connection this young (s) goes before the background work.
PRIORITY_SECONDS = 1.0
#: The longest one :meth:`Foreground.step_aside` waits (s).
MAX_STEP_ASIDE_SECONDS = 0.5


class Foreground:
    """The open connections of the control socket, for the background work to wait on.

    Thread-safe: the control server's threads call :meth:`arrived` and :meth:`left`, any
    other thread :meth:`step_aside`.
    """

    def __init__(self) -> None:
        self._open: dict[int, float] = {}  # connection key -> monotonic arrival time (s)
        self._cond = threading.Condition()

    def arrived(self, key: int) -> None:
        """A connection was accepted (``key``: any value unique among open connections)."""
        with self._cond:
            self._open[key] = time.monotonic()

    def left(self, key: int) -> None:
        """The connection ``key`` was answered and closed (unknown keys are ignored)."""
        with self._cond:
            if self._open.pop(key, None) is not None:
                self._cond.notify_all()

    def busy(self) -> bool:
        """Whether a connection younger than :data:`PRIORITY_SECONDS` is open."""
        now = time.monotonic()
        with self._cond:
            return any(now - t < PRIORITY_SECONDS for t in self._open.values())

    def step_aside(self, max_seconds: float = MAX_STEP_ASIDE_SECONDS) -> float:
        """Wait while a connection younger than :data:`PRIORITY_SECONDS` is open, at most
        ``max_seconds``; return the seconds waited (0.0 at once when none is)."""
        if not self._open:  # the common case, without the lock
            return 0.0
        start = time.monotonic()
        deadline = start + max_seconds
        with self._cond:
            while True:
                now = time.monotonic()
                fresh = [t for t in self._open.values() if now - t < PRIORITY_SECONDS]
                if not fresh or now >= deadline:
                    break
                self._cond.wait(min(deadline, min(fresh) + PRIORITY_SECONDS) - now)
        return time.monotonic() - start
