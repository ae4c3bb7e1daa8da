"""A minimal client of the control socket for one-shot commands: one HTTP/1.1 request per
connection written by hand over the Unix socket (the daemon closes each connection after
its answer), so a command the daemon serves imports no HTTP library. Same errors as
:class:`~opencode_memoryd.serve.control_client.ControlClient`.

The socket is :mod:`_socket`'s, the C type :class:`socket.socket` extends: the
:mod:`socket` module's import (its ``IntEnum`` constants, :mod:`selectors`) would cost more
than the whole exchange."""

from __future__ import annotations

import _socket
import json

from opencode_memoryd.errors import (
    ControlError,
    DaemonUnreachableError,
    RemoteError,
    SocketOwnerError,
)
from opencode_memoryd.serve.peer import check_path, check_peer

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
            this user's (:mod:`opencode_memoryd.serve.peer`); nothing was sent.
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
