"""The daemon's local control endpoint: JSON over HTTP on a Unix-domain socket.

While ``opencode-memoryd run`` is up it owns the embedded memory store, so commands started
from another process (``maintain``, ``search``, ``list``, ``status``) ask the daemon to do
the work through this endpoint instead of opening the store themselves.

Where the socket lives (:func:`socket_path`)::

    $XDG_RUNTIME_DIR/opencode-memoryd/control.sock   when XDG_RUNTIME_DIR is set
    <state_dir>/control.sock                         otherwise

The socket file is mode 0600 and its folder 0700, so only the owning user can connect
(Linux checks write permission on the socket file at ``connect``). A lock file
``control.sock.lock`` next to it, held with ``flock`` for the server's lifetime, keeps two
daemons that start at the same moment from replacing each other's socket.

Protocol (every body is JSON, UTF-8; each connection carries one request)::

    GET  /v1/ping        -> 200 {"result": {"pid": <daemon pid>}}
    POST /v1/<name>      body: a JSON object (an empty body counts as {})
                         -> 200 {"result": <whatever the handler returned>}
    any failure          -> 4xx/5xx {"error": {"type": str, "message": str,
                                                "kind": str | null}}

Status codes:

======  ==========================================================================
400     ``BadRequest`` (body is not a JSON object, bad Content-Length),
        :class:`RequestError` raised by a handler, or :class:`~.errors.ConfigError`
404     ``NotFound``: no such route
405     ``MethodNotAllowed``: e.g. ``GET`` on a handler route
409     :class:`~.errors.EmbedderMismatchError`
411     ``LengthRequired``: chunked bodies are not accepted
413     ``RequestTooLarge``: the body exceeds ``max_body_bytes`` (1 MiB by default)
500     any other :class:`~.errors.MemorydError` (its own type and message), or
        ``InternalError`` for any other exception: a fixed generic message, while the
        traceback goes to the log only
501     ``NotImplemented``: an HTTP method other than GET/POST
502     :class:`~.errors.UpstreamError` and :class:`~.errors.ExtractionError`
503     ``ServiceUnavailable``: the server is shutting down
======  ==========================================================================

For a :class:`~.errors.MemorydError` the ``type`` is the exception's class name and
``kind`` its ``kind`` attribute (e.g. ``UpstreamError.kind``), else ``null``.

The server is the standard library's :class:`http.server.BaseHTTPRequestHandler` on
:class:`socketserver.ThreadingUnixStreamServer`: the endpoint serves a handful of requests
from the same user, so a maintained, dependency-free server is enough; it is hardened here
with a body size cap, a per-connection socket timeout, JSON-only error bodies and no
keep-alive. The client uses ``httpx`` with a Unix-socket transport.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import socketserver
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import structlog

from opencode_memoryd import __version__
from opencode_memoryd.errors import (
    ConfigError,
    ControlError,
    DaemonUnreachableError,
    EmbedderMismatchError,
    ExtractionError,
    MemorydError,
    RemoteError,
    RequestError,
    UpstreamError,
)

log = structlog.get_logger(__name__)

SOCKET_NAME = "control.sock"
RUNTIME_SUBDIR = "opencode-memoryd"
BASE_URL = "http://opencode-memoryd"
MAX_BODY_BYTES = 1024 * 1024
CONNECTION_TIMEOUT_SECONDS = 30.0

# Linux's sun_path holds 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH_BYTES = 107
# After a 413 the server reads and discards up to this much of the rejected body, so the
# client finishes sending and sees the 413 instead of a broken pipe.
_DRAIN_LIMIT_BYTES = 16 * 1024 * 1024
_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_GENERIC_MESSAGE = "internal error in the daemon; see its log for details"

# Checked in order; the first class the exception is an instance of decides the status.
_STATUS_BY_ERROR: tuple[tuple[type[BaseException], int], ...] = (
    (EmbedderMismatchError, 409),
    (ConfigError, 400),
    (UpstreamError, 502),
    (ExtractionError, 502),
)










def socket_path(state_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where the control socket lives.

    Args:
        state_dir: the daemon's state folder, used when no runtime folder is set.
        env: the environment to read (default ``os.environ``).

    Returns:
        ``$XDG_RUNTIME_DIR/opencode-memoryd/control.sock`` when ``XDG_RUNTIME_DIR`` is set
        to an absolute path, else ``<state_dir>/control.sock``. A path too long for an
        ``AF_UNIX`` address (over 100 bytes) is replaced by
        ``<tmp>/opencode-memoryd-<uid>/<hash of the state dir>.sock`` (its folder is 0700).
        The daemon records the path it used in ``daemon.json``, so clients never guess.
    """
    environ = os.environ if env is None else env
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        path = Path(runtime) / RUNTIME_SUBDIR / SOCKET_NAME
    else:
        path = Path(state_dir) / SOCKET_NAME
    if len(os.fsencode(str(path))) > 100:
        digest = hashlib.sha256(os.fsencode(str(Path(state_dir).resolve()))).hexdigest()[:16]
        path = (Path(tempfile.gettempdir()) / f"opencode-memoryd-{os.getuid()}"
                / f"{digest}.sock")
    return path


def error_status(exc: BaseException) -> int:
    """The HTTP status the server answers with when a handler raises ``exc``."""
    if isinstance(exc, RequestError):
        return 400
    for cls, status in _STATUS_BY_ERROR:
        if isinstance(exc, cls):
            return status
    return 500


# --------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------


class ControlServer:
    """Serves named handlers on a Unix socket in a background thread.

    Each handler receives the request's JSON object and returns a JSON-serialisable value.
    Handlers run concurrently, one thread per connection, so they must be thread-safe.
    ``ping`` is built in and cannot be overridden.

    Args:
        path: the socket file (see :func:`socket_path`); at most 107 bytes long.
        handlers: route name (``[a-z][a-z0-9_-]*``) to handler.
        max_body_bytes: larger request bodies are refused with 413.
        connection_timeout_seconds: socket timeout for reading a request and writing its
            response (not for running the handler).

    Raises:
        ValueError: a handler name is invalid or is ``ping``.
    """

    def __init__(
        self,
        path: Path,
        handlers: Mapping[str, Callable[[dict[str, Any]], Any]],
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        connection_timeout_seconds: float = CONNECTION_TIMEOUT_SECONDS,
    ) -> None:
        for name in handlers:
            if not _NAME_RE.fullmatch(name):
                raise ValueError(f"invalid control route name {name!r}")
            if name == "ping":
                raise ValueError("the control route 'ping' is built in")
        self.path = Path(path)
        self.handlers = dict(handlers)
        self.max_body_bytes = max_body_bytes
        self.connection_timeout_seconds = connection_timeout_seconds
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        self._socket_id: tuple[int, int] | None = None
        self._closing = False
        self._active = 0
        self._cond = threading.Condition()

    @property
    def lock_path(self) -> Path:
        """The lock file held while serving (``<socket>.lock``)."""
        return self.path.with_name(self.path.name + ".lock")

    def start(self) -> None:
        """Create the socket and serve in a daemon thread.

        Creates the socket's folder (mode 0700; an existing folder of ours is tightened to
        0700), removes a stale socket file that nothing answers on, binds, and sets the
        socket file to mode 0600.

        Raises:
            ControlError: the path is too long for a Unix socket, the folder is not ours,
                a non-socket file is in the way, or another live server answers on the
                path (the message names the path). Nothing is changed in that case.
        """
        if self._server is not None:
            raise ControlError(f"control server on {self.path} already started")
        path = self.path
        if len(os.fsencode(path)) > _MAX_SOCKET_PATH_BYTES:
            raise ControlError(
                f"control socket path {path} is longer than {_MAX_SOCKET_PATH_BYTES} bytes; "
                "set XDG_RUNTIME_DIR or a shorter state folder")
        _private_dir(path.parent)
        self._lock_fd = _acquire_lock(self.lock_path, path)
        try:
            _remove_stale_socket(path)
            server = _Server(self)
            try:
                _bind_private(server, path)
                server.server_activate()
            except BaseException:
                server.server_close()
                raise
            st = os.stat(path)
            self._socket_id = (st.st_dev, st.st_ino)
        except OSError as exc:
            self._release_lock()
            raise ControlError(f"cannot serve the control socket {path}: {exc}") from exc
        except BaseException:
            self._release_lock()
            raise
        self._server = server
        self._closing = False
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2},
            name="memoryd-control", daemon=True)
        self._thread.start()
        log.info("control.listening", path=str(path))

    def close(self, wait_seconds: float = 10.0) -> None:
        """Stop serving and remove the socket file; safe to call more than once.

        New connections fail at once (the socket file is gone); requests that arrive on
        already-accepted connections get 503. Waits up to ``wait_seconds`` for handlers
        still running, so the caller can then release what they use.
        """
        server, thread = self._server, self._thread
        if server is None:
            return
        with self._cond:
            self._closing = True
        if thread is not None:
            server.shutdown()
            thread.join()
        self._unlink_own_socket()
        server.server_close()
        deadline = time.monotonic() + wait_seconds
        with self._cond:
            while self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("control.close_with_active_requests", active=self._active)
                    break
                self._cond.wait(left)
        self._release_lock()
        self._server = None
        self._thread = None
        log.info("control.closed", path=str(self.path))

    def __enter__(self) -> ControlServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------

    def _unlink_own_socket(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if (st.st_dev, st.st_ino) == self._socket_id:
            self.path.unlink(missing_ok=True)

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _begin(self) -> bool:
        with self._cond:
            if self._closing:
                return False
            self._active += 1
            return True

    def _end(self) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify_all()


def _private_dir(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.stat(directory)
    if st.st_uid != os.getuid():
        raise ControlError(f"the control socket folder {directory} belongs to another user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(directory, 0o700)


def _acquire_lock(lock_path: Path, path: Path) -> int:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise ControlError(
                f"another opencode-memoryd is already serving the control socket {path}"
            ) from exc
        raise ControlError(f"cannot lock {lock_path}: {exc}") from exc
    return fd


def _remove_stale_socket(path: Path) -> None:
    """Remove ``path`` if it is a socket nothing answers on; refuse if one does."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(f"{path} exists and is not a socket; not replacing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        log.info("control.stale_socket_removed", path=str(path))
        path.unlink(missing_ok=True)
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ControlError(f"cannot tell whether {path} is in use: {exc}") from exc
    finally:
        probe.close()
    raise ControlError(f"another process is already serving the control socket {path}")


def _bind_private(server: socketserver.UnixStreamServer, path: Path) -> None:
    # umask is process-wide: 0o077 (not 0o177) so that a directory another thread happens
    # to create during the bind stays traversable for its owner. The socket is born 0700
    # at most (its folder is 0700 anyway) and is then set to 0600.
    old = os.umask(0o077)
    try:
        server.server_bind()
    finally:
        os.umask(old)
    os.chmod(path, 0o600)


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False  # ControlServer.close() does its own bounded wait
    request_queue_size = 64

    def __init__(self, control: ControlServer) -> None:
        self.control = control
        super().__init__(str(control.path), _Handler, bind_and_activate=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("control.connection_failed")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = f"opencode-memoryd/{__version__}"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.server.control.connection_timeout_seconds
        super().setup()

    # -- routing ---------------------------------------------------------------------

    def do_GET(self) -> None:
        name = self._route()
        if name is None:
            return
        if name == "ping":
            self._send_json(200, {"result": {"pid": os.getpid()}})
        else:
            self._send_error_json(405, "MethodNotAllowed", f"use POST for /v1/{name}",
                                  headers={"Allow": "POST"})

    def do_POST(self) -> None:
        name = self._route()
        if name is None:
            return
        body = self._read_body()
        if body is None:
            return
        if name == "ping":
            self._send_json(200, {"result": {"pid": os.getpid()}})
            return
        control = self.server.control
        if not control._begin():
            self._send_error_json(503, "ServiceUnavailable", "the daemon is shutting down")
            return
        try:
            self._run(name, control.handlers[name], body)
        finally:
            control._end()

    def _route(self) -> str | None:
        control = self.server.control
        path = self.path.split("?", 1)[0]
        name = path.removeprefix("/v1/") if path.startswith("/v1/") else None
        if name is None or (name != "ping" and name not in control.handlers):
            self._send_error_json(404, "NotFound", f"no such route: {path}")
            return None
        if control._closing:
            self._send_error_json(503, "ServiceUnavailable", "the daemon is shutting down")
            return None
        return name

    def _read_body(self) -> dict[str, Any] | None:
        if self.headers.get("Transfer-Encoding"):
            self._send_error_json(411, "LengthRequired", "send the body with a Content-Length")
            return None
        raw_length = self.headers.get("Content-Length", "0").strip()
        if not raw_length.isdigit():
            self._send_error_json(400, "BadRequest", "invalid Content-Length")
            return None
        length = int(raw_length)
        limit = self.server.control.max_body_bytes
        if length > limit:
            self._send_error_json(413, "RequestTooLarge",
                                  f"request body of {length} bytes exceeds {limit} bytes")
            self._drain(length)
            return None
        try:
            raw = self.rfile.read(length) if length else b""
        except OSError as exc:  # includes the socket timeout
            log.warning("control.read_failed", error=str(exc))
            self.close_connection = True
            return None
        if len(raw) < length:
            self.close_connection = True  # the client went away mid-body
            return None
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            self._send_error_json(400, "BadRequest", "the request body is not valid JSON")
            return None
        if not isinstance(body, dict):
            self._send_error_json(400, "BadRequest", "the request body must be a JSON object")
            return None
        return body

    def _drain(self, length: int) -> None:
        if length > _DRAIN_LIMIT_BYTES:
            return
        try:
            while length > 0:
                chunk = self.rfile.read(min(length, 64 * 1024))
                if not chunk:
                    return
                length -= len(chunk)
        except OSError:
            return

    def _run(self, name: str, handler: Callable[[dict[str, Any]], Any],
             body: dict[str, Any]) -> None:
        started = time.monotonic()
        try:
            result = handler(body)
            payload = json.dumps({"result": result}, ensure_ascii=False).encode("utf-8")
        except MemorydError as exc:
            status = error_status(exc)
            log.warning("control.handler_error", route=name, type=type(exc).__name__,
                        status=status)
            self._send_error_json(status, type(exc).__name__, str(exc),
                                  kind=getattr(exc, "kind", None))
            return
        except Exception:
            log.exception("control.handler_crashed", route=name)
            self._send_error_json(500, "InternalError", _GENERIC_MESSAGE)
            return
        log.debug("control.handled", route=name,
                  ms=round((time.monotonic() - started) * 1000, 1))
        self._send_bytes(200, payload)

    # -- responses -------------------------------------------------------------------

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"))

    def _send_error_json(self, status: int, type_name: str, message: str, *,
                         kind: Any = None, headers: Mapping[str, str] | None = None) -> None:
        if not isinstance(kind, str | None):
            kind = str(kind)
        body = {"error": {"type": type_name, "message": message, "kind": kind}}
        self._send_bytes(status, json.dumps(body, ensure_ascii=False).encode("utf-8"),
                         headers=headers)

    def _send_bytes(self, status: int, data: bytes, *,
                    headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Connection", "close")  # one request per connection
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:
            log.debug("control.write_failed", error=str(exc))
        self.close_connection = True

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Protocol errors found by ``http.server`` itself, as JSON like every other error."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "Error"
        type_name = "".join(part.capitalize() for part in phrase.replace("-", " ").split())
        self._send_error_json(code, type_name or "Error", message or phrase)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("control.request", method=self.command, path=getattr(self, "path", None),
                  status=code)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control.http", message=format % args)


# --------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------


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
        """
        if not self.path.exists():
            return None
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
            RemoteError: the daemon answered with an error (``type``, ``kind``,
                ``message``, ``status``).
            DaemonUnreachableError: no daemon accepted the connection; the request was
                not delivered.
            ControlError: the call timed out, the connection broke, or the answer was
                malformed; the daemon may have run the request.
        """
        if not _NAME_RE.fullmatch(name):
            raise ValueError(f"invalid control route name {name!r}")
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
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("type"), str):
            raise ControlError(
                f"unexpected HTTP {response.status_code} from the daemon on {self.path}")
        kind = error.get("kind")
        raise RemoteError(
            str(error.get("message", "")),
            type=error["type"],
            kind=kind if isinstance(kind, str) else None,
            status=response.status_code,
        )
