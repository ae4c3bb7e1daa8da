"""Conditions under which the daemon captures nothing, said loudly but not endlessly.

A silent capture failure is the worst failure a memory tool can have: no OpenCode database
found, a database whose schema we cannot read, or rows written to tables we do not read.
Each condition is an :class:`Alert` with a key; raising it logs one warning, and raising it
again logs again only when its message changed or :data:`REPEAT_SECONDS` passed. ``status``
lists the active ones. A condition that is gone is resolved (logged once at info level).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from opencode_memoryd.models import iso_utc

log = structlog.get_logger(__name__)

#: The same alert is logged again at most this often (s).
REPEAT_SECONDS = 3600.0


@dataclass(slots=True)
class Alert:
    """One active condition: ``event`` is the log event name, ``since`` when it began."""

    key: str
    event: str
    message: str
    since: datetime
    logged_at: datetime


class Alerts:
    """The active alerts of one daemon; safe to use from several threads.

    Args:
        clock: the current aware UTC time.
    """

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._active: dict[str, Alert] = {}
        self._guard = threading.Lock()

    def warn(self, key: str, event: str, message: str, **fields: Any) -> None:
        """Raise (or keep) the alert ``key``; log ``event`` as a warning when it is new,
        its message changed, or it was last logged :data:`REPEAT_SECONDS` ago.

        ``fields`` are added to the log event (never to ``status``).
        """
        now = self._clock()
        with self._guard:
            alert = self._active.get(key)
            if (alert is not None and alert.message == message
                    and (now - alert.logged_at).total_seconds() < REPEAT_SECONDS):
                return
            since = alert.since if alert is not None else now
            self._active[key] = Alert(key, event, message, since, now)
        log.warning(event, message=message, **fields)

    def resolve(self, key: str) -> None:
        """End the alert ``key`` when it is active (logged once)."""
        with self._guard:
            alert = self._active.pop(key, None)
        if alert is not None:
            log.info("alert_resolved", alert=alert.event, key=key)

    def resolve_prefix(self, prefix: str, keep: set[str] | None = None) -> None:
        """End every active alert whose key starts with ``prefix`` and is not in ``keep``."""
        with self._guard:
            keys = [k for k in self._active if k.startswith(prefix) and k not in (keep or ())]
        for key in keys:
            self.resolve(key)

    def active(self) -> list[dict[str, str]]:
        """The active alerts for ``status``: ``[{"event", "message", "since"}]``."""
        with self._guard:
            alerts = sorted(self._active.values(), key=lambda a: (a.since, a.key))
        return [{"event": a.event, "message": a.message, "since": iso_utc(a.since)}
                for a in alerts]
