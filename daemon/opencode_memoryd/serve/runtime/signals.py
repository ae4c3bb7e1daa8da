"""Stop signals (SIGTERM, SIGINT) served by a thread of their own.

A Python signal handler runs in the main thread only, between two of its bytecodes. The
kernel hands a signal sent to the process to any thread that does not block it (after a
SIGSTOP/SIGCONT often not the main one: signal(7), "a process-directed signal may be
delivered to any one of the threads"); the main thread asleep in a timed wait then runs
the handler only when its wait ends, seconds later, or never if it waits without a
timeout. A handler that takes a lock the interrupted main thread holds (an ``Event``'s
condition, a logging handler's lock) never returns either. So the C-level handler only
writes the signal's number to a pipe (:func:`signal.set_wakeup_fd`), the Python-level
handler does nothing, and a thread blocked on the pipe's read end does the work at once,
whatever the main thread is doing.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

__all__ = ["StopSignals"]


def _noted(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler: nothing (the signal thread serves the signal)."""


class StopSignals:
    """Call ``on_stop(signal name)`` from a thread of its own for each stop signal.

    Args:
        on_stop: what a stop signal does (it may take locks and log).
        signals: the signals served (SIGTERM and SIGINT by default).

    Use as a context manager around the daemon's life, in the main thread (Python sets
    signal handlers and the wakeup fd from the main thread only; :class:`ValueError`
    otherwise). Leaving it restores the former handlers and wakeup fd.
    """

    def __init__(self, on_stop: Callable[[str], None],
                 signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self._on_stop = on_stop
        self._signals = tuple(signals)
        self._previous: dict[signal.Signals, Any] = {}
        self._previous_fd = -1
        self._read_fd = self._write_fd = -1

    def __enter__(self) -> StopSignals:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)  # the C handler must never block
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, _noted)
        # a signal blocked across a restart in place (see reload.restart_in_place) and
        # still pending is served now
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self._signals)
        threading.Thread(target=self._serve, args=(self._read_fd,), name="signals",
                         daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._write_fd)  # the thread reads the end of the pipe and ends

    def _serve(self, read_fd: int) -> None:
        wanted = {int(s) for s in self._signals}
        try:
            while data := os.read(read_fd, 64):
                for number in data:
                    if number in wanted:
                        self._on_stop(signal.Signals(number).name)
        finally:
            os.close(read_fd)
