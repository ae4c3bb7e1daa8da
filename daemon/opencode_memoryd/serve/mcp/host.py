"""The MCP server hosted by the daemon: one SDK session per ``opencode-memoryd mcp`` relay.

OpenCode starts ``opencode-memoryd mcp`` for every directory it opens and waits for the
``initialize`` answer; importing the ``mcp`` SDK takes most of a second, so the SDK's
server (:func:`opencode_memoryd.serve.mcp.server.serve`) runs here, in the daemon, which
imports it once, and the ``mcp`` process is a small relay
(:mod:`opencode_memoryd.serve.mcp.relay`) between OpenCode's stdio and this socket.

Wire: the relay connects to
:func:`~opencode_memoryd.serve.control.protocol.mcp_socket_path` (next to the control socket, mode
0600 in a 0700 folder, recorded as ``mcp_socket`` in ``daemon.json``) and sends one JSON
line, ``{"cwd": "<the relay's working directory>"}``; then the connection carries MCP's
newline-delimited JSON-RPC both ways until the relay closes its end. The tool calls run
the daemon's use cases directly (no control-socket round trip); an error a use case
raises reaches the tool as a :class:`~opencode_memoryd.errors.RemoteError`, exactly as
it would over the control socket.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import selectors
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.errors import MemorydError, RemoteError, describe

log = structlog.get_logger(__name__)

#: How long (s) a relay has to send its first line.
HELLO_SECONDS = 10.0
#: The longest first line accepted, in bytes.
MAX_HELLO_BYTES = 65536
#: The routes that change memories: an MCP session calls them as the agent, always.
AGENT_ROUTES = frozenset({"add", "forget", "edit", "restore", "confirm", "dream", "undo"})


def as_agent(call: Callable[[str, dict[str, Any]], Any]
             ) -> Callable[[str, dict[str, Any]], Any]:
    """Wrap ``call`` so every route of :data:`AGENT_ROUTES` runs with ``caller`` ``agent``
    whatever the tool sent: everything an MCP session asks for is the agent's."""
    def agent_call(route: str, payload: dict[str, Any]) -> Any:
        if route in AGENT_ROUTES:
            payload = {**payload, "caller": "agent"}
        return call(route, payload)

    return agent_call


def in_process_caller(run: Callable[[str, dict[str, Any]], Any]
                      ) -> Callable[[str, dict[str, Any]], Any]:
    """Wrap ``run(route, payload)`` (the daemon's use cases) so its errors look as they do
    through the control socket.

    Raises (from the returned function):
        RemoteError: the use case failed (``type`` = its error class, or
            ``InternalError`` for a bug, whose details stay in the log).
    """
    def call(route: str, payload: dict[str, Any]) -> Any:
        try:
            return run(route, payload)
        except Exception as exc:
            if not isinstance(exc, MemorydError):
                log.exception("mcp.handler_crashed", route=route)
            status, type_name, message, kind = describe(exc)
            raise RemoteError(message, type=type_name, kind=kind, status=status) from exc

    return call


class MCPHost:
    """Accepts relays on a Unix socket and serves each an MCP session on its own thread.

    Args:
        path: the socket file (its folder exists and is private: the control server's).
        call: runs a use case (:func:`in_process_caller`).
        preload_after: seconds after :meth:`start` at which the SDK is imported, unless a
            relay connects sooner (then at once, before its session).
        before_preload: called on the accepting thread just before the SDK's import when
            no relay waits for it.

    The SDK is imported on the accepting thread before the first session is served, so the
    daemon's start is not delayed by it and a relay that connects meanwhile waits.
    """

    def __init__(self, path: Path, call: Callable[[str, dict[str, Any]], Any], *,
                 preload_after: float = 0.0,
                 before_preload: Callable[[], None] | None = None) -> None:
        self.path = path
        self._call = call
        self._preload_after = preload_after
        self._before_preload = before_preload
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()

    def start(self) -> None:
        """Bind the socket (a leftover file is replaced: the caller holds the daemon's
        lock) and start accepting.

        Raises:
            OSError: the socket cannot be bound.
        """
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            listener.bind(str(self.path))
        except OSError:
            listener.close()
            raise
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        listener.listen(32)
        self._listener = listener
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._accept, name="memoryd-mcp", daemon=True)
        self._thread.start()
        log.info("mcp.listening", path=str(self.path))

    def close(self) -> None:
        """Stop accepting, end the open sessions and remove the socket file."""
        if self._listener is None or self._wake is None:
            return
        os.write(self._wake[1], b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in self._wake:
            os.close(fd)
        self._listener.close()
        self._listener = self._wake = None
        self.path.unlink(missing_ok=True)
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _preload(self, *, waited_for: bool) -> bool:
        """Import the SDK (``waited_for``: a relay waits for it, so at once); ``False``
        (logged) when it is not installed."""
        if self._before_preload is not None and not waited_for:
            self._before_preload()
        try:
            from opencode_memoryd.serve.mcp.server import preload

            preload()
        except ImportError:
            log.exception("mcp.sdk_unavailable")
            return False
        return True

    def _accept(self) -> None:
        assert self._listener is not None and self._wake is not None
        loaded = False
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake[0], selectors.EVENT_READ)
            while True:
                ready = sel.select(None if loaded else self._preload_after)
                if any(key.fd == self._wake[0] for key, _ in ready):
                    return
                if not loaded:
                    if not self._preload(waited_for=bool(ready)):
                        return
                    loaded = True
                if not ready:
                    continue
                try:
                    conn, _ = self._listener.accept()
                except OSError:
                    continue
                threading.Thread(target=self._session, args=(conn,), name="memoryd-mcp-session",
                                 daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        from opencode_memoryd.serve.mcp.server import serve

        with self._lock:
            self._open.add(conn)
        files: list[io.IOBase] = []
        try:
            conn.settimeout(HELLO_SECONDS)
            reader = conn.makefile("rb")
            files.append(reader)
            hello = json.loads(reader.readline(MAX_HELLO_BYTES))
            cwd = hello.get("cwd") if isinstance(hello, dict) else None
            if not isinstance(cwd, str) or not os.path.isabs(cwd):
                log.warning("mcp.bad_hello")
                return
            conn.settimeout(None)
            text_in = io.TextIOWrapper(reader, encoding="utf-8", errors="replace")
            text_out = io.TextIOWrapper(conn.makefile("wb"), encoding="utf-8")
            files += [text_in, text_out]
            serve(as_agent(self._call), cwd, (text_in, text_out))
        except (OSError, ValueError) as exc:
            log.info("mcp.session_ended", error=str(exc))
        except Exception:
            log.exception("mcp.session_crashed")
        finally:
            with self._lock:
                self._open.discard(conn)
            # The relay waits for this end to close. A session ended with a call in flight
            # leaves references to its files behind (until the garbage collector runs), and
            # the socket stays open as long as one of its files does: shut it down first.
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            for f in reversed(files):
                with contextlib.suppress(OSError, ValueError):
                    f.close()
            conn.close()


def start_host(path: Path, run: Callable[[str, dict[str, Any]], Any], *,
               preload_after: float = 0.0,
               before_preload: Callable[[], None] | None = None) -> MCPHost | None:
    """Serve MCP on ``path`` with the use cases ``run(route, payload)``; ``None`` (logged)
    when the socket cannot be bound: the relays then answer without a daemon's server.
    ``preload_after``, ``before_preload``: as :class:`MCPHost` takes them."""
    host = MCPHost(path, in_process_caller(run), preload_after=preload_after,
                   before_preload=before_preload)
    try:
        host.start()
    except OSError as exc:
        log.warning("mcp_socket_unavailable", error=str(exc))
        return None
    return host
