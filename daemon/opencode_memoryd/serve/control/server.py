"""The control socket's server: binds the Unix socket privately, serves in a thread, and
closes gracefully (see :mod:`opencode_memoryd.serve.control.protocol` for the wire protocol).

The serving thread sleeps in ``select`` until a connection arrives or :meth:`ControlServer.close`
wakes it through a pipe: an idle daemon's control socket costs no wake-ups.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import selectors
import socket
import socketserver
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.errors import ControlError
from opencode_memoryd.serve.control.http import ControlHTTPServer
from opencode_memoryd.serve.control.protocol import (
    CONNECTION_TIMEOUT_SECONDS,
    MAX_BODY_BYTES,
    MAX_SOCKET_PATH_BYTES,
    ROUTE_NAME_RE,
)
from opencode_memoryd.serve.runtime.priority import Foreground

log = structlog.get_logger(__name__)


class ControlServer:
    """Serves named handlers on a Unix socket in a background thread.

    Each handler receives the request's JSON object and returns a JSON-serialisable value.
    Handlers run concurrently, one thread per connection, so they must be thread-safe.
    ``ping`` is built in and cannot be overridden. :attr:`foreground` knows the open
    connections: background work waits on it (:meth:`~.priority.Foreground.step_aside`).

    Args:
        path: the socket file (see :func:`socket_path`); at most 107 bytes long.
        handlers: route name (``[a-z][a-z0-9_-]*``) to handler.
        max_body_bytes: larger request bodies are refused with 413.
        connection_timeout_seconds: socket timeout for reading a request and writing its
            response (not for running the handler).
        get_routes: handlers also served on ``GET``, their payload taken from the query
            string (each parameter once; an empty value counts as absent).

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
        get_routes: frozenset[str] = frozenset(),
    ) -> None:
        unknown = sorted(get_routes - set(handlers))
        if unknown:
            raise ValueError(f"GET route(s) without a handler: {unknown}")
        for name in handlers:
            if not ROUTE_NAME_RE.fullmatch(name):
                raise ValueError(f"invalid control route name {name!r}")
            if name == "ping":
                raise ValueError("the control route 'ping' is built in")
        self.path = Path(path)
        self.handlers = dict(handlers)
        self.get_routes = get_routes
        self.max_body_bytes = max_body_bytes
        self.connection_timeout_seconds = connection_timeout_seconds
        self._server: ControlHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        self._socket_id: tuple[int, int] | None = None
        self._closing = False
        self._active = 0
        self._cond = threading.Condition()
        self._wake: tuple[int, int] | None = None  # (read end, write end) of the stop pipe
        self.foreground = Foreground()

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
        if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
            raise ControlError(
                f"control socket path {path} is longer than {MAX_SOCKET_PATH_BYTES} bytes; "
                "set XDG_RUNTIME_DIR or a shorter state folder")
        _private_dir(path.parent)
        self._lock_fd = _acquire_lock(self.lock_path, path)
        try:
            _remove_stale_socket(path)
            server = ControlHTTPServer(self)
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
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._serve, args=(server, self._wake[0]),
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
        if thread is not None and self._wake is not None:
            os.write(self._wake[1], b"x")
            thread.join()
        if self._wake is not None:
            for fd in self._wake:
                os.close(fd)
            self._wake = None
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

    @staticmethod
    def _serve(server: ControlHTTPServer, wake_fd: int) -> None:
        """Accept connections until ``wake_fd`` is readable; each request is handled on
        its own thread (``ThreadingMixIn``), as ``serve_forever`` would, without its
        periodic wake-ups."""
        with selectors.DefaultSelector() as sel:
            sel.register(server, selectors.EVENT_READ)
            sel.register(wake_fd, selectors.EVENT_READ)
            while True:
                ready = sel.select()
                if any(key.fd == wake_fd for key, _ in ready):
                    return
                try:
                    request, address = server.get_request()
                except OSError:
                    continue
                try:
                    server.process_request(request, address)
                except Exception:
                    server.handle_error(request, address)
                    server.shutdown_request(request)
                except BaseException:
                    server.shutdown_request(request)
                    raise

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
    """Make ``directory`` a folder of this user's, mode 0700, or refuse.

    Its parents are created as needed (0700); the folder itself is created alone, then
    opened with ``O_NOFOLLOW``: a symbolic link in its place is refused, never followed
    (nor is its target chmod-ed), and a folder of another user's (one who created it
    first in a shared ``$XDG_RUNTIME_DIR`` or ``$TMPDIR``) is refused with what to do.
    An existing folder of ours is tightened to 0700 through the opened descriptor.

    Raises:
        ControlError: a link, not a folder, another user's folder, or it cannot be made.
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(directory):
            raise ControlError(
                f"the control socket folder {directory} is a symbolic link: not following "
                "it (another user may have made it); remove it, or set XDG_RUNTIME_DIR to "
                "a folder of your own") from exc
        raise ControlError(f"cannot make the control socket folder {directory}: {exc}"
                           ) from exc
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise ControlError(
                f"the control socket folder {directory} belongs to uid {st.st_uid}, not to "
                f"this user (uid {os.getuid()}): another user made it first; remove it (as "
                "that user or root), or set XDG_RUNTIME_DIR to a folder of your own")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


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
