"""The page's sessions: what a login gives a browser tab instead of the access token.

A login (``POST /api/session`` with a one-time code, or with the access token) opens a
session and answers a fresh random session token and the session's own CSRF token. The
session token is the tab's bearer token from then on; it is replaced (rotated) once it is
older than ``rotate_seconds``: the answer to the first request after that carries the new
one in the :data:`ROTATED_HEADER` header, and the old one stays good for
:data:`GRACE_SECONDS` more (requests already under way), then never again. A session ends
after ``idle_seconds`` without a request, and ``max_seconds`` after its login whatever
the activity: the tab then needs ``opencode-memoryd web`` again.

Sessions live in the daemon's memory only (a restart ends them all) and are timed on the
monotonic clock (a wall clock set back or forward changes nothing).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The answer header that carries a rotated session token.
ROTATED_HEADER = "X-Session-Token"
#: How long (s) a session token stays good once it has been replaced.
GRACE_SECONDS = 30.0
#: The most sessions kept; a login beyond it ends the least recently used one.
MAX_SESSIONS = 64


@dataclass
class Session:
    """One login: ``csrf`` its CSRF token, the times in monotonic seconds."""

    csrf: str
    logged_in: float
    last_used: float
    issued: float  # when the current token was given out


@dataclass(frozen=True)
class Verdict:
    """What :meth:`Sessions.check` decided: ``session`` when the token is good (with
    ``rotated``, a replacement token to hand back, or ``None``), else ``reason``."""

    session: Session | None
    rotated: str | None = None
    reason: str = ""


class Sessions:
    """The open sessions, safe to share between threads.

    Args:
        idle_seconds: a session ends this long after its last request.
        max_seconds: a session ends this long after its login.
        rotate_seconds: a session token is replaced once it is this old.
        clock: monotonic seconds (``time.monotonic``; tests pass their own).
    """

    def __init__(self, *, idle_seconds: float, max_seconds: float, rotate_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.rotate_seconds = rotate_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._by_token: dict[str, Session] = {}
        self._retired: dict[str, tuple[Session, float]] = {}  # token -> (session, until)

    def login(self) -> tuple[str, Session]:
        """Open a session: ``(its token, the session)`` (both random, 32 bytes)."""
        now = self._clock()
        session = Session(csrf=secrets.token_urlsafe(32), logged_in=now, last_used=now,
                          issued=now)
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._prune(now)
            if len(self._by_token) >= MAX_SESSIONS:
                oldest = min(self._by_token, key=lambda t: self._by_token[t].last_used)
                del self._by_token[oldest]
            self._by_token[token] = session
        return token, session

    def check(self, token: str) -> Verdict:
        """Whether ``token`` is a good session token now; a good one counts as activity,
        and one due for rotation is replaced (the verdict carries the new token)."""
        now = self._clock()
        with self._lock:
            session = self._by_token.get(token)
            self._prune(now)
            if session is None:
                retired = self._retired.get(token)
                if retired is None:
                    return Verdict(None, reason="unknown")
                session = retired[0]
                session.last_used = now
                return Verdict(session)
            if now - session.logged_in > self.max_seconds:
                return Verdict(None, reason="max")
            if now - session.last_used > self.idle_seconds:
                return Verdict(None, reason="idle")
            session.last_used = now
            if now - session.issued < self.rotate_seconds:
                return Verdict(session)
            new = secrets.token_urlsafe(32)
            del self._by_token[token]
            self._by_token[new] = session
            session.issued = now
            self._retired[token] = (session, now + GRACE_SECONDS)
            return Verdict(session, rotated=new)

    def _prune(self, now: float) -> None:
        """Forget ended sessions and replaced tokens past their grace (lock held)."""
        self._retired = {t: (s, until) for t, (s, until) in self._retired.items()
                         if until >= now and self._alive(s, now)}
        self._by_token = {t: s for t, s in self._by_token.items() if self._alive(s, now)}

    def _alive(self, session: Session, now: float) -> bool:
        return (now - session.logged_in <= self.max_seconds
                and now - session.last_used <= self.idle_seconds)
