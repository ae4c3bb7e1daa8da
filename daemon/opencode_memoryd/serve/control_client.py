"""The control socket's client: ping the daemon and call its routes (httpx over a Unix
socket; see :mod:`opencode_memoryd.serve.protocol`). Before each request the socket's
folder, file and serving process are checked to be this user's
(:func:`~opencode_memoryd.serve.peer.verify_server`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

from opencode_memoryd.errors import ControlError, DaemonUnreachableError, RemoteError
from opencode_memoryd.serve.peer import verify_server
from opencode_memoryd.serve.protocol import BASE_URL, ROUTE_NAME_RE


class ControlClient:
    """Calls a running daemon through its control socket.

    Args:
        path: the socket file (see :func:`socket_path`).
        timeout_seconds: how long :meth:`call` waits for an answer (handlers such as
            ``maintain`` may run for minutes).

    One client may be shared by threads. The underlying HTTP client is created on first
    use; :meth:`close` (or ``with``) releases it.
    """

    def __init__(self, path: Path, *, timeout_seconds: float = 600) -> None:
        self.path = Path(path)
        self.timeout_seconds = timeout_seconds
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def _http(self) -> httpx.Client:
        with self._client_lock:
            return self._http_locked()

    def _http_locked(self) -> httpx.Client:
        if self._client is None:
            # trust_env=False: proxy variables (HTTP_PROXY, ALL_PROXY) must not reroute a
            # local Unix-socket call.
            self._client = httpx.Client(
                transport=httpx.HTTPTransport(uds=str(self.path)),
                base_url=BASE_URL,
                trust_env=False,
                timeout=httpx.Timeout(self.timeout_seconds,
                                      connect=min(5.0, self.timeout_seconds)),
            )
        return self._client

    def close(self) -> None:
        """Release the HTTP client; the object can still be used afterwards."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self, timeout: float = 1.0) -> int | None:
        """The daemon's pid, or ``None`` when no daemon answers within ``timeout`` seconds.

        ``None`` covers a missing socket file, a refused connection (stale socket), a
        timeout and any answer that is not a valid ping reply. Never raises for those.

        Raises:
            SocketOwnerError: the socket's folder, file or server is not certainly this
                user's.
        """
        if not self.path.exists():
            return None
        verify_server(self.path, min(timeout, 5.0))
        try:
            response = self._http().get("/v1/ping", timeout=timeout)
            if response.status_code != 200:
                return None
            pid = response.json()["result"]["pid"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
        if isinstance(pid, bool) or not isinstance(pid, int):
            return None
        return pid

    def call(self, name: str, payload: dict[str, Any] | None = None) -> Any:
        """Run the daemon's handler ``name`` with ``payload``; return its result.

        Args:
            name: the route name (``[a-z][a-z0-9_-]*``).
            payload: a JSON-serialisable object (default ``{}``).

        Returns:
            The handler's result, decoded from JSON.

        Raises:
            ValueError: ``name`` is not a valid route name.
            SocketOwnerError: the socket's folder, file or server is not certainly this
                user's; nothing was sent.
            RemoteError: the daemon answered with an error (``type``, ``kind``,
                ``message``, ``status``).
            DaemonUnreachableError: no daemon accepted the connection; the request was
                not delivered.
            ControlError: the call timed out, the connection broke, or the answer was
                malformed; the daemon may have run the request.
        """
        if not ROUTE_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid control route name {name!r}")
        verify_server(self.path)
        try:
            response = self._http().post(f"/v1/{name}", json=payload or {})
        except httpx.ConnectError as exc:
            raise DaemonUnreachableError(
                f"no opencode-memoryd daemon answers on {self.path}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ControlError(
                f"the daemon on {self.path} did not answer /v1/{name} in time: {exc}"
            ) from exc
        except httpx.HTTPError as exc:
            raise ControlError(f"calling /v1/{name} on {self.path} failed: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code == 200:
            if not isinstance(data, dict) or "result" not in data:
                raise ControlError(f"malformed answer from the daemon on {self.path}")
            return data["result"]
        error = RemoteError.from_envelope(response.status_code, data)
        if error is None:
            raise ControlError(
                f"unexpected HTTP {response.status_code} from the daemon on {self.path}")
        raise error
