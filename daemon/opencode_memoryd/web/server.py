"""Serving the web page from the daemon: uvicorn on a loopback socket, in a thread of its
own, started when ``[web] enabled`` is true and stopped with the daemon."""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import structlog
import uvicorn

from opencode_memoryd.config.web import WebConfig
from opencode_memoryd.errors import ControlError, MemorydError
from opencode_memoryd.usecases.service import Service
from opencode_memoryd.web.app import build_app
from opencode_memoryd.web.token import WEB_INFO_FILE, load_or_create_token, page_url

log = structlog.get_logger(__name__)

#: How long :meth:`WebServer.stop` waits for the server thread, in seconds.
STOP_WAIT_SECONDS = 3.0


class WebServer:
    """The page and the API on ``cfg.host:cfg.port``.

    Args:
        service: the daemon's use cases.
        cfg: the ``[web]`` section.
        state_dir: where the token file and ``web.json`` live.

    Attributes:
        url: the page's address once started (without the token), else ``None``.
    """

    def __init__(self, service: Service, cfg: WebConfig, state_dir: Path) -> None:
        self.service = service
        self.cfg = cfg
        self.state_dir = Path(state_dir)
        self.url: str | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Create the token if needed, bind the socket, serve in a thread, write
        ``web.json`` (when the address cannot be bound: the error, with ``port_taken``).

        Raises:
            ControlError: the address cannot be bound (the port is taken).
            StateError: the token file cannot be read or created.
        """
        token = load_or_create_token(self.state_dir)
        family = socket.AF_INET6 if ":" in self.cfg.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.cfg.host, self.cfg.port))
            sock.listen(64)
        except OSError as exc:
            sock.close()
            taken = exc.errno == errno.EADDRINUSE
            self._write_info({"host": self.cfg.host, "port": self.cfg.port,
                              "pid": os.getpid(), "error": str(exc), "port_taken": taken})
            raise ControlError(f"cannot serve the web page on {self.cfg.host}:"
                               f"{self.cfg.port}: {exc}; choose another [web] port") from exc
        port = int(sock.getsockname()[1])
        config = uvicorn.Config(build_app(self.service, token, self.cfg), lifespan="off",
                                log_config=None, access_log=False, server_header=False,
                                proxy_headers=False, timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        server = self._server
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]),
                                        name="web", daemon=True)
        self._thread.start()
        self.url = page_url(self.cfg.host, port)
        info: dict[str, Any] = {"url": self.url, "host": self.cfg.host, "port": port,
                                "pid": os.getpid()}
        self._write_info(info)
        log.info("web_started", url=self.url)

    def _write_info(self, info: dict[str, Any]) -> None:
        """Replace ``web.json``: where the page is served, or (``error``, ``port_taken``)
        why it is not, for ``opencode-memoryd web`` to say."""
        tmp = self.state_dir / (WEB_INFO_FILE + ".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, self.state_dir / WEB_INFO_FILE)

    def stop(self) -> None:
        """Stop serving (open requests get :data:`STOP_WAIT_SECONDS`); remove
        ``web.json``."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_SECONDS)
        (self.state_dir / WEB_INFO_FILE).unlink(missing_ok=True)
        self.url = None


def start_web(service: Service, cfg: WebConfig, state_dir: Path) -> WebServer | None:
    """Start the web page when ``cfg.enabled``; a failure is logged, not raised (the
    daemon's other work goes on).

    Returns:
        The running server, or ``None`` (disabled, or it could not start).
    """
    if not cfg.enabled:
        return None
    web = WebServer(service, cfg, state_dir)
    try:
        web.start()
    except MemorydError as exc:
        log.error("web_failed", error=str(exc))
        return None
    return web
