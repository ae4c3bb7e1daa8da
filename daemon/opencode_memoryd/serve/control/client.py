"""The control socket's client: ping the daemon and call its routes (see
:mod:`opencode_memoryd.serve.control.protocol`), for the CLI (its fast path included), the stdio
MCP server and the tests alike.

One HTTP/1.1 request per connection, written by hand over the Unix socket (the daemon
closes each connection after its answer), so a command the daemon serves imports no HTTP
library. The socket is :mod:`_socket`'s, the C type :class:`socket.socket` extends: the
:mod:`socket` module's import (its ``IntEnum`` constants, :mod:`selectors`) would cost more
than the whole exchange. Before anything is sent, the socket's folder and file and the
process serving it are checked to be this user's (:mod:`opencode_memoryd.serve.control.peer`).

:func:`ping` and :func:`call` take the socket's path; :class:`ControlClient` binds a path
and a timeout."""

from __future__ import annotations

import _socket
import json

from opencode_memoryd.errors import (
    ControlError,
    DaemonUnreachableError,
    RemoteError,
    SocketOwnerError,
)
from opencode_memoryd.serve.control.peer import check_path, check_peer

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any

    #: The socket's path.
    SocketPath = str | PathLike[str]


def _exchange(path: SocketPath, method: str, route: str, body: bytes, timeout: float
              ) -> tuple[int, Any]:
    """Send one request; return ``(status, decoded JSON body or None)``.

    Raises:
        SocketOwnerError: the socket's folder or file, or the process serving it, is not
            this user's (:mod:`opencode_memoryd.serve.control.peer`); nothing was sent.
        DaemonUnreachableError: nothing accepts connections on ``path``.
        ControlError: no (complete) answer within ``timeout`` seconds.
    """
    head = (f"{method} /v1/{route} HTTP/1.1\r\nHost: opencode-memoryd\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    check_path(path)
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(min(5.0, timeout))
        try:
            s.connect(str(path))
        except OSError as exc:
            raise DaemonUnreachableError(
                f"no opencode-memoryd daemon answers on {path}: {exc}") from exc
        check_peer(s, path)
        s.settimeout(timeout)
        chunks = []
        try:
            s.sendall(head + body)
            while True:
                got = s.recv(65536)
                if not got:
                    break
                chunks.append(got)
        except TimeoutError as exc:
            raise ControlError(
                f"the daemon on {path} did not answer /v1/{route} in time") from exc
        except OSError as exc:
            raise ControlError(f"calling /v1/{route} on {path} failed: {exc}") from exc
    finally:
        s.close()
    raw = b"".join(chunks)
    top, _, rest = raw.partition(b"\r\n\r\n")
    try:
        status = int(top.split(b" ", 2)[1])
    except (IndexError, ValueError) as exc:
        raise ControlError(f"malformed answer from the daemon on {path}") from exc
    try:
        data = json.loads(rest) if rest else None
    except ValueError:
        data = None
    return status, data


def ping(path: SocketPath, timeout: float = 1.0) -> int | None:
    """The daemon's pid, or ``None`` when no daemon answers within ``timeout`` seconds
    (never raises for that).

    Raises:
        SocketOwnerError: the socket is not certainly this user's (nothing was sent).
    """
    try:
        status, data = _exchange(path, "GET", "ping", b"", timeout)
        pid = data["result"]["pid"] if status == 200 else None
    except SocketOwnerError:
        raise
    except (ControlError, DaemonUnreachableError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


def call(path: SocketPath, route: str, payload: dict[str, Any], *, timeout: float = 600) -> Any:
    """Run the daemon's route ``route`` with ``payload``; return its result.

    Raises:
        RemoteError: the daemon answered with an error.
        SocketOwnerError: the socket is not certainly this user's (nothing was sent).
        DaemonUnreachableError: no daemon accepted the connection.
        ControlError: a timeout, a broken connection or a malformed answer.
    """
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    status, data = _exchange(path, "POST", route, body, timeout)
    if status == 200:
        if not isinstance(data, dict) or "result" not in data:
            raise ControlError(f"malformed answer from the daemon on {path}")
        return data["result"]
    error = RemoteError.from_envelope(status, data)
    if error is None:
        raise ControlError(f"unexpected HTTP {status} from the daemon on {path}")
    raise error


class ControlClient:
    """Calls a running daemon through its control socket (:func:`ping`, :func:`call`).

    Args:
        path: the socket file (see :func:`~opencode_memoryd.config.paths.socket_path`).
        timeout_seconds: how long :meth:`call` waits for an answer (handlers such as
            ``maintain`` may run for minutes).

    Holds no connection (one per request), so one client may be shared by threads;
    :meth:`close` and ``with`` are kept for callers that scope it.
    """

    def __init__(self, path: SocketPath, *, timeout_seconds: float = 600) -> None:
        from pathlib import Path

        self.path = Path(path)
        self.timeout_seconds = timeout_seconds

    def close(self) -> None:
        """Nothing to release (each request has its own connection)."""

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self, timeout: float = 1.0) -> int | None:
        """:func:`ping`: the daemon's pid, or ``None`` when no daemon answers within
        ``timeout`` seconds (a missing socket file, a refused connection, a timeout, an
        answer that is no valid ping reply).

        Raises:
            SocketOwnerError: the socket's folder, file or server is not certainly this
                user's.
        """
        return ping(self.path, timeout)

    def call(self, name: str, payload: dict[str, Any] | None = None) -> Any:
        """:func:`call`: run the daemon's handler ``name`` with ``payload`` (default
        ``{}``); return its result, decoded from JSON.

        Raises:
            ValueError: ``name`` is not a valid route name (``[a-z][a-z0-9_-]*``).
            SocketOwnerError: the socket is not certainly this user's; nothing was sent.
            RemoteError: the daemon answered with an error (``type``, ``kind``,
                ``message``, ``status``).
            DaemonUnreachableError: no daemon accepted the connection; the request was
                not delivered.
            ControlError: the call timed out, the connection broke, or the answer was
                malformed; the daemon may have run the request.
        """
        from opencode_memoryd.serve.control.protocol import ROUTE_NAME_RE

        if not ROUTE_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid control route name {name!r}")
        return call(self.path, name, payload or {}, timeout=self.timeout_seconds)
