"""The daemon's command host: the control socket and the MCP host, and the order of the
start that lets them answer first.

The daemon serves commands as soon as its state file and store are open; what only the
capture needs (the extraction code, the extractor, the first pass, the worker, the
scheduler, the MCP SDK) comes after, each step letting a command being served go first
(:meth:`~opencode_memoryd.serve.runtime.shared.DaemonState.step_aside`, see
:mod:`opencode_memoryd.serve.runtime.priority`). The routes that run the capture code
(:data:`CAPTURE_ROUTES`) wait until the start has loaded it: one thread loads it, since two
threads importing one graph of modules at once can see a module half-initialised.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.compose import DAEMON_INFO_FILE
from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.models import iso_utc
from opencode_memoryd.serve.control.protocol import mcp_socket_path, socket_path
from opencode_memoryd.serve.control.server import ControlServer
from opencode_memoryd.serve.mcp.host import MCPHost, start_host
from opencode_memoryd.serve.runtime.own_writes import queued_of_project
from opencode_memoryd.usecases.service import GET_ROUTES, ROUTES, call

if TYPE_CHECKING:
    from opencode_memoryd.serve.runtime.shared import DaemonState

log = structlog.get_logger(__name__)

#: The MCP SDK is imported this long (s) after the start, or at the first MCP connection
#: if sooner: its import (most of a second of CPU) would slow the first commands.
MCP_PRELOAD_SECONDS = 3.0
#: The routes that run the capture code, which the daemon loads once commands are served:
#: they wait for it (at most :data:`CAPTURE_WAIT_SECONDS`); the others are served at once.
CAPTURE_ROUTES = frozenset({"maintain", "capture_now", "dream", "undo", "add", "edit",
                            "forget", "restore", "confirm", "pending"})
CAPTURE_WAIT_SECONDS = 60.0


class CommandHost:
    """Serves the use cases on the control socket and the MCP socket.

    Args:
        shared: what the daemon's collaborators share (the service, once opened).
        wake_worker: tells the worker the queue changed.
    """

    def __init__(self, shared: DaemonState, *, wake_worker: Callable[[], None]) -> None:
        self.shared, self._wake_worker = shared, wake_worker
        self.control: ControlServer | None = None
        #: the hosted MCP server
        self.mcp: MCPHost | None = None

    def start(self, started_at: datetime | None = None) -> None:
        """Serve the use cases to other processes (the daemon owns the store); then write
        ``daemon.json`` (pid, sockets), which is how commands find the daemon."""
        app = self.shared.app
        handlers = {route: functools.partial(self.route, route) for route in ROUTES}
        path = socket_path(app.state_dir, app.env)
        self.control = ControlServer(path, handlers, get_routes=GET_ROUTES)
        self.control.start()
        # the background work steps aside for the connections this socket serves
        self.shared.foreground = self.control.foreground
        info = {"pid": os.getpid(), "socket": str(path),
                "started_at": iso_utc(started_at or self.shared.clock())}
        # the MCP server OpenCode talks to through `opencode-memoryd mcp` (a relay)
        self.mcp = start_host(mcp_socket_path(path), self.route,
                              preload_after=MCP_PRELOAD_SECONDS,
                              before_preload=self.shared.step_aside)
        if self.mcp is not None:
            info["mcp_socket"] = str(self.mcp.path)
        tmp = app.state_dir / (DAEMON_INFO_FILE + ".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, app.state_dir / DAEMON_INFO_FILE)

    def close(self) -> None:
        """Stop serving: the MCP host, then the control socket (its commands in progress
        get 2 s) and ``daemon.json``."""
        if self.mcp is not None:
            self.mcp.close()
        if self.control is not None:
            self.control.close(wait_seconds=2)
            (self.shared.app.state_dir / DAEMON_INFO_FILE).unlink(missing_ok=True)

    def route(self, route: str, payload: dict[str, Any]) -> Any:
        """Run a use case for the control socket or the MCP host; one of
        :data:`CAPTURE_ROUTES` first waits for the start to load the capture code. A
        session's first ``context`` request first lets the worker capture what its project
        said last (:mod:`opencode_memoryd.serve.runtime.own_writes`)."""
        if route in CAPTURE_ROUTES:
            self.shared.capture_loaded.wait(CAPTURE_WAIT_SECONDS)
        if (route == "context" and self.shared.capture_loaded.is_set()
                and self.shared.app.config.context.capture_first_seconds > 0
                and isinstance(payload.get("directory"), str)
                and self.shared.own_writes.first_ask(payload.get("session"))):
            self._capture_first(payload["directory"], payload.get("session"))
        return call(self.shared.service, route, payload)

    def _capture_first(self, directory: str, session: str | None) -> None:
        """Make the queued sessions of ``directory``'s project due now and wait for the
        worker to go through them, at most ``[context] capture_first_seconds``."""
        shared = self.shared
        keys = queued_of_project(shared.sources, shared.state.queue.queue(),
                                 normalize_dir(directory), skip=session)
        if not keys:
            return
        now_ms = int(self.shared.clock().timestamp() * 1000)

        def start() -> None:
            self.shared.state.queue.queue_expedite(keys, now_ms)
            self._wake_worker()

        asked, done = self.shared.own_writes.wait_for(
            keys, start, self.shared.app.config.context.capture_first_seconds)
        log.info("capture_first", sessions=asked, done=done)
