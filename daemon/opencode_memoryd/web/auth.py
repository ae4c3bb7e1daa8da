"""The guard in front of every request: a loopback ``Host`` (no DNS rebinding), a token
for ``/api/`` in ``Authorization: Bearer`` (a page session's, see
:mod:`opencode_memoryd.web.sessions`, or the access token of the ``web-token`` file; the
login itself may instead carry a one-time code in ``X-Login-Code``), and for requests that
change something the credential's CSRF token in ``X-CSRF-Token`` and a same-origin
``Origin``.

No cookie carries the token: a browser sends a host's cookies to every port of it, so
one would reach any other server on this machine's loopback address. The page keeps the
token in its tab (``sessionStorage``, which is per origin, port included).

Refusals use the API's envelope: a foreign ``Host`` 400, no or a wrong token 401, a
missing CSRF token or a cross-site request 403. No CORS header is ever sent, and every
answer forbids framing and sniffing.
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from opencode_memoryd.config.web import LOOPBACK_NAMES
from opencode_memoryd.errors import error_body, status_type
from opencode_memoryd.web.sessions import ROTATED_HEADER, Sessions
from opencode_memoryd.web.token import (
    LOGIN_CODE_SECONDS,
    csrf_token,
    login_code_ok,
)

#: Methods that change something: they need the CSRF token.
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The login route: a POST that proves itself with the bearer token or a one-time login
#: code (either opens a page session).
LOGIN_PATH = "/api/session"
#: The header of a one-time login code (``opencode-memoryd web`` gives one; see
#: :func:`~opencode_memoryd.web.token.login_code`).
LOGIN_CODE_HEADER = "x-login-code"
#: The headers of every answer.
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; img-src 'self' data:; "
                                "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def split_host(value: str) -> tuple[str, str]:
    """``(host, port)`` of a ``Host`` header value (``[::1]:4747`` → ``("::1", "4747")``;
    port ``""`` when absent); lower-cased."""
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        return host, rest.removeprefix(":")
    host, _, port = value.partition(":")
    return host, port


def loopback_host(value: str) -> bool:
    """Whether a ``Host`` header names this machine: ``localhost`` or a loopback address
    literal (``127.0.0.1``, any ``127.x.y.z``, ``[::1]`` in any spelling: the addresses
    ``[web] host`` accepts), with an optional numeric port. A name that merely resolves
    to one (DNS rebinding) does not."""
    host, port = split_host(value)
    if not (port == "" or port.isdigit()):
        return False
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def same_origin(origin: str, host_header: str) -> bool:
    """Whether an ``Origin`` header is this page's own: ``http://`` + the request's loopback
    ``Host``."""
    if not origin.startswith("http://"):
        return False
    return loopback_host(origin[7:]) and split_host(origin[7:]) == split_host(host_header)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error envelope (:func:`~opencode_memoryd.errors.error_body`), its ``type`` the
    status's (``Unauthorized``, ``Forbidden``, ...)."""
    return JSONResponse(error_body(status_type(status), message), status_code=status,
                        headers=headers)


class Guard(BaseHTTPMiddleware):
    """Host, token and CSRF checks (see the module docstring).

    Args:
        app: the wrapped application.
        token: the access token (the ``web-token`` file's).
        sessions: the page's sessions (their tokens are good bearer tokens too).
        started: when the application was built (Unix seconds): older login codes are
            refused.
    """

    def __init__(self, app: ASGIApp, token: str, sessions: Sessions, started: float) -> None:
        super().__init__(app)
        self._token = token
        self._sessions = sessions
        self._csrf = csrf_token(token)
        self._started = int(started)
        self._codes_lock = threading.Lock()
        self._used_codes: dict[str, float] = {}

    def _refusal(self, request: Request) -> Response | None:
        """The refusal of a request that may not pass, else ``None``. An ``/api/``
        request that passes gets ``request.state.csrf`` (the CSRF token of its
        credential) and ``request.state.rotated`` (a replacement session token, or
        ``None``); a ``POST /api/session`` that passes proved itself (a session is
        opened)."""
        request.state.rotated = None
        host = request.headers.get("host", "")
        if not loopback_host(host):
            return error(400, "the Host header must be 127.0.0.1, localhost or [::1] (a "
                              "loopback address): this page is served to this machine only")
        if not request.url.path.startswith("/api/"):
            return None
        bearer = request.headers.get("authorization", "")
        given = bearer[7:].strip() if bearer.lower().startswith("bearer ") else None
        code = request.headers.get(LOGIN_CODE_HEADER)
        login = request.method == "POST" and request.url.path == LOGIN_PATH
        if code is not None and login:
            return self._code_refusal(request, code, host)
        if not given:
            return error(401, "a token is needed: open the page with `opencode-memoryd web`, "
                              "or send `Authorization: Bearer TOKEN`",
                         {"WWW-Authenticate": "Bearer"})
        if hmac.compare_digest(given.encode(), self._token.encode()):
            request.state.csrf = self._csrf
        else:
            verdict = self._sessions.check(given)
            if verdict.session is None:
                return error(401, self._ended(verdict.reason), {"WWW-Authenticate": "Bearer"})
            request.state.csrf = verdict.session.csrf
            request.state.rotated = verdict.rotated
        if request.method not in UNSAFE_METHODS:
            return None
        return _unsafe_refusal(request, host, login=login)

    def _ended(self, reason: str) -> str:
        """The 401 message of a session token :class:`Sessions` refused for ``reason``."""
        again = "open the page again with `opencode-memoryd web`"
        if reason == "idle":
            return (f"this page session ended after {self._sessions.idle_seconds:g} s "
                    f"without a request ([web] session_idle_seconds): {again}")
        if reason == "max":
            return (f"this page session ended {self._sessions.max_seconds:g} s after its "
                    f"login ([web] session_max_seconds): {again}")
        return f"wrong or expired token: {again}"

    def _code_refusal(self, request: Request, code: str, host: str) -> Response | None:
        """The login with a one-time code (:func:`~opencode_memoryd.web.token.login_code`):
        a same-origin ``POST /api/session``; each code is taken once, and none made
        before this server started (the codes taken before a restart are not known)."""
        if not same_origin(request.headers.get("origin") or f"http://{host}", host) or (
                request.headers.get("sec-fetch-site") not in (None, "same-origin", "none")):
            return error(403, "cross-site login refused")
        now = time.time()
        with self._codes_lock:
            self._used_codes = {c: t for c, t in self._used_codes.items()
                                if now - t <= LOGIN_CODE_SECONDS}
            stamp = code.partition(".")[0]
            if (code in self._used_codes or not login_code_ok(self._token, code, now)
                    or int(stamp) < self._started):
                return error(401, "this login code is used or expired: run "
                                  "`opencode-memoryd web` again")
            self._used_codes[code] = now
        return None

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Refuse, or pass the request on; add the security headers either way."""
        response = self._refusal(request) or await call_next(request)
        if getattr(request.state, "rotated", None):
            response.headers[ROTATED_HEADER] = request.state.rotated
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        if request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response


def _unsafe_refusal(request: Request, host: str, *, login: bool) -> Response | None:
    """The refusal of an authenticated request with an unsafe method (``POST``, …),
    else ``None``: a cross-site ``Origin`` or ``Sec-Fetch-Site`` is refused; a request
    other than the ``login`` must carry the credential's CSRF token
    (``request.state.csrf``) in ``X-CSRF-Token``."""
    origin = request.headers.get("origin")
    if origin is not None and not same_origin(origin, host):
        return error(403, f"cross-site request from {origin} refused")
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return error(403, f"cross-site request ({site}) refused")
    if login:  # the bearer token proved itself
        return None
    sent = request.headers.get("x-csrf-token", "")
    if not hmac.compare_digest(sent.encode(), request.state.csrf.encode()):
        return error(403, "missing or wrong X-CSRF-Token header (GET /api/session gives "
                          "it)")
    return None
