"""The LLM gate: whether the daemon's LLM work (extractions, dreams) may run now.

A pure policy object: it holds the pause (401/403/404 from the endpoint, an open circuit
breaker, the daily token budget), the count of consecutive failures, and the sessions
held back while the disk is full; it reads the time from an injected clock and does no
I/O. What is worth a log line is queued as an :class:`Event` that the caller drains
(:meth:`LlmGate.drain`) and logs, in the manner of a sans-I/O protocol object.

The policy, in words:

- a **pause** holds all LLM work until its end: set by an endpoint that refused our key or
  model (``auth``/``not_found``, for ``auth_pause_seconds``), by the **circuit breaker**
  after ``circuit_failure_threshold`` retryable failures in a row (for
  ``circuit_cooldown_seconds``), or by the **daily token budget** once the tokens spent
  since UTC midnight reach it (until the next UTC midnight);
- a retryable failure is retried after the exponential backoff of its attempt
  (:func:`~opencode_memoryd.debounce.backoff_seconds`, honouring ``Retry-After``), and no
  sooner than a pause ends; a success closes the breaker's count;
- a session that found the **disk full** is held (nothing written, not even its failure)
  for :data:`DISK_FULL_RETRY` seconds.

In rules mode (``enabled`` false) nothing is paused: rules extraction costs no tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from opencode_memoryd.debounce import backoff_seconds
from opencode_memoryd.models import iso_utc

#: Seconds between two tries of a session that found the disk full.
DISK_FULL_RETRY = 60.0

#: A session of one database: ``(source_id, session_id)``.
SessionKey = tuple[str, str]


@dataclass(frozen=True)
class Pause:
    """Why LLM work is paused, and until when (aware UTC)."""

    reason: str
    until: datetime


@dataclass(frozen=True)
class Event:
    """A change of the gate worth a log line.

    ``level`` is ``info``, ``warning`` or ``error``; ``name`` the event's name
    (``llm_paused``, ``circuit_open``, ``token_budget_reached``, ``llm_pause_over``);
    ``fields`` its key-value pairs (JSON-safe).
    """

    level: str
    name: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateSettings:
    """The gate's limits (``[daemon]``; see :class:`~opencode_memoryd.config.daemon.DaemonConfig`).

    ``daily_token_budget``: tokens a UTC day (0: no budget); the others in seconds, and
    ``circuit_failure_threshold`` in consecutive failures.
    """

    daily_token_budget: int
    auth_pause_seconds: float
    circuit_failure_threshold: int
    circuit_cooldown_seconds: float


class LlmGate:
    """When LLM work may run, and how long a failed session waits.

    Args:
        settings: the budget, pause and breaker limits.
        enabled: whether the work is LLM work (``extraction mode = llm``); when not, the
            pause and the budget never hold anything back.
        clock: the current aware UTC time (injected: tests drive it).
    """

    def __init__(self, settings: GateSettings, *, enabled: bool,
                 clock: Callable[[], datetime]) -> None:
        self.settings, self.enabled, self.clock = settings, enabled, clock
        #: the pause in force (``None``: none)
        self.pause: Pause | None = None
        #: retryable failures in a row (the circuit breaker opens at the threshold)
        self.failures = 0
        #: sessions held back while the disk is full -> until (wall ms)
        self._held: dict[SessionKey, int] = {}
        self._events: list[Event] = []

    # -- the pause ----------------------------------------------------------------------

    def wait(self, tokens_since: Callable[[datetime], int]) -> float | None:
        """Seconds to wait before LLM work may run, or ``None`` when it may run now.

        Args:
            tokens_since: the tokens spent since an aware UTC time (called only when a
                budget is set and no pause is in force).
        """
        if not self.enabled:
            return None
        now = self.clock()
        if self.pause is not None:
            if now < self.pause.until:
                return (self.pause.until - now).total_seconds()
            self._events.append(Event("info", "llm_pause_over", {"reason": self.pause.reason}))
            self.pause = None
        budget = self.settings.daily_token_budget
        if budget:
            midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
            if tokens_since(midnight) >= budget:
                until = midnight + timedelta(days=1)
                self.pause = Pause(f"daily token budget of {budget} reached", until)
                self._events.append(Event("warning", "token_budget_reached",
                                          {"budget": budget, "until": iso_utc(until)}))
                return (until - now).total_seconds()
        return None

    @property
    def reason(self) -> str:
        """Why LLM work is paused (``""`` when it is not)."""
        return self.pause.reason if self.pause is not None else ""

    def status(self) -> dict[str, str] | None:
        """The pause as ``status`` shows it: ``{"reason", "until"}`` (ISO UTC), or ``None``."""
        if self.pause is None:
            return None
        return {"reason": self.pause.reason, "until": iso_utc(self.pause.until)}

    # -- outcomes -----------------------------------------------------------------------

    def succeeded(self) -> None:
        """A session's work succeeded: the breaker's count starts over."""
        self.failures = 0

    def refused(self, error: str) -> float:
        """The endpoint refused our key or model (401/403/404): pause LLM work for
        ``auth_pause_seconds``; returns that delay (s) for the session."""
        delay = self.settings.auth_pause_seconds
        self.pause = Pause(f"LLM endpoint refused the request ({error}); fix the key or "
                           "model in the config", self.clock() + timedelta(seconds=delay))
        self._events.append(Event("error", "llm_paused", {
            "reason": self.pause.reason, "until": iso_utc(self.pause.until)}))
        return delay

    def failed(self, error: str, *, attempts: int, retry_after: float | None = None) -> float:
        """A retryable failure (a timeout, a 5xx, a refused answer); returns the session's
        delay (s): the backoff of its ``attempts`` (``retry_after``: the server's
        ``Retry-After``), and no sooner than the pause's end. The breaker opens after
        ``circuit_failure_threshold`` failures in a row."""
        now = self.clock()
        self.failures += 1
        s = self.settings
        if self.failures >= s.circuit_failure_threshold:
            self.pause = Pause(f"circuit open after {self.failures} consecutive failures "
                               f"(last: {error})",
                               now + timedelta(seconds=s.circuit_cooldown_seconds))
            self._events.append(Event("warning", "circuit_open", {
                "reason": self.pause.reason, "until": iso_utc(self.pause.until)}))
        delay = backoff_seconds(attempts, retry_after=retry_after)
        if self.pause is not None:
            delay = max(delay, (self.pause.until - now).total_seconds())
        return delay

    # -- the disk-full hold -------------------------------------------------------------

    def hold(self, key: SessionKey) -> None:
        """Hold ``key`` back for :data:`DISK_FULL_RETRY` seconds (the disk is full)."""
        until = self.clock() + timedelta(seconds=DISK_FULL_RETRY)
        self._held[key] = int(until.timestamp() * 1000)

    def release_due(self) -> None:
        """Let go the sessions whose hold has ended."""
        now_ms = int(self.clock().timestamp() * 1000)
        for key, until in list(self._held.items()):
            if until <= now_ms:
                del self._held[key]

    def is_held(self, key: SessionKey) -> bool:
        """Whether ``key`` is held back (the disk was full)."""
        return key in self._held

    @property
    def held_count(self) -> int:
        """How many sessions are held back."""
        return len(self._held)

    def next_release_ms(self) -> int | None:
        """When (wall ms) the first hold ends, or ``None`` when nothing is held."""
        return min(self._held.values()) if self._held else None

    # -- events -------------------------------------------------------------------------

    def drain(self) -> list[Event]:
        """The events since the last call, oldest first (the caller logs them)."""
        out, self._events = self._events, []
        return out
