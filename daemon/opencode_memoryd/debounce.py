"""The debounce policy: when a changed session is due for extraction. Pure, no I/O.

A session is due when nothing in it changed for ``quiet`` seconds, or, for a session that
never goes quiet, ``max_wait`` seconds after its oldest unread change, whichever is first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pending:
    """A changed session waiting for extraction. Times are ms since the epoch."""

    first_change_ms: int
    last_change_ms: int

    def due_ms(self, *, quiet_seconds: float, max_wait_seconds: float) -> int:
        """``min(last change + quiet, first change + max wait)``, in ms."""
        return min(self.last_change_ms + int(quiet_seconds * 1000),
                   self.first_change_ms + int(max_wait_seconds * 1000))

    def touched(self, now_ms: int) -> Pending:
        """The same pending session after another change at ``now_ms``."""
        return Pending(self.first_change_ms, max(self.last_change_ms, now_ms))


def backoff_seconds(attempt: int, *, base: float = 5.0, cap: float = 900.0,
                    retry_after: float | None = None) -> float:
    """Delay before retry number ``attempt`` (1-based): exponential, capped, honouring
    the server's ``Retry-After`` when it asks for longer.

    ``base * 2**(attempt-1)`` seconds, at most ``cap``; never less than ``retry_after``.
    """
    delay = min(cap, base * (2.0 ** max(attempt - 1, 0)))
    if retry_after is not None and retry_after > delay:
        delay = min(retry_after, 3600.0)
    return delay
