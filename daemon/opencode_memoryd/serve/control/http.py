"""HTTP over the control socket: the threading Unix-socket server and the request handler
(routing, body limits, JSON errors; see :mod:`opencode_memoryd.serve.control.protocol`)."""

from __future__ import annotations

import json
import os
import socketserver
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import structlog

from opencode_memoryd import __version__
from opencode_memoryd.errors import (
    MemorydError,
    error_body,
    error_envelope,
    result_body,
    status_type,
)
from opencode_memoryd.serve.control.protocol import DRAIN_LIMIT_BYTES

if TYPE_CHECKING:
    from opencode_memoryd.serve.control.server import ControlServer

log = structlog.get_logger(__name__)


class ControlHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False  # ControlServer.close() does its own bounded wait
    request_queue_size = 64

    def __init__(self, control: ControlServer) -> None:
        self.control = control
        super().__init__(str(control.path), ControlRequestHandler, bind_and_activate=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("control.connection_failed")

    def process_request(self, request: Any, client_address: Any) -> None:
        # from the accept on, the connection goes before the daemon's background work
        self.control.foreground.arrived(id(request))
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.control.foreground.left(id(request))
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.control.foreground.left(id(request))


class ControlRequestHandler(BaseHTTPRequestHandler):
    server: ControlHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = f"opencode-memoryd/{__version__}"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # per server, not per class (``StreamRequestHandler.timeout`` is a class attribute)
        self.connection.settimeout(self.server.control.connection_timeout_seconds)

    # -- routing ---------------------------------------------------------------------

    def do_GET(self) -> None:
        name = self._route()
        if name is None:
            return
        if name == "ping":
            self._send_json(200, {"result": {"pid": os.getpid()}})
            return
        control = self.server.control
        if name not in control.get_routes:
            self._send_error_json(405, f"use POST for /v1/{name}",
                                  headers={"Allow": "POST"})
            return
        query = self.path.partition("?")[2]
        self._serve(name, {k: v for k, v in parse_qsl(query, keep_blank_values=True) if v})

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
        self._serve(name, body)

    def _serve(self, name: str, payload: dict[str, Any]) -> None:
        """Run the handler unless the server is closing (then 503)."""
        control = self.server.control
        if not control._begin():
            self._send_error_json(503, "the daemon is shutting down")
            return
        try:
            self._run(name, control.handlers[name], payload)
        finally:
            control._end()

    def _route(self) -> str | None:
        control = self.server.control
        path = self.path.split("?", 1)[0]
        name = path.removeprefix("/v1/") if path.startswith("/v1/") else None
        if name is None or (name != "ping" and name not in control.handlers):
            self._send_error_json(404, f"no such route: {path}")
            return None
        if control._closing:
            self._send_error_json(503, "the daemon is shutting down")
            return None
        return name

    def _read_body(self) -> dict[str, Any] | None:
        if self.headers.get("Transfer-Encoding"):
            self._send_error_json(411, "send the body with a Content-Length")
            return None
        raw_length = self.headers.get("Content-Length", "0").strip()
        if not raw_length.isdigit():
            self._send_error_json(400, "invalid Content-Length")
            return None
        length = int(raw_length)
        limit = self.server.control.max_body_bytes
        if length > limit:
            self._send_error_json(413, f"request body of {length} bytes exceeds {limit} bytes")
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
            self._send_error_json(400, "the request body is not valid JSON")
            return None
        if not isinstance(body, dict):
            self._send_error_json(400, "the request body must be a JSON object")
            return None
        return body

    def _drain(self, length: int) -> None:
        if length > DRAIN_LIMIT_BYTES:
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
            payload = json.dumps(result_body(result), ensure_ascii=False).encode("utf-8")
        except Exception as exc:
            status, envelope = error_envelope(exc)
            if isinstance(exc, MemorydError):
                log.warning("control.handler_error", route=name, type=exc.wire_type,
                            status=status)
            else:
                log.exception("control.handler_crashed", route=name)
            self._send_json(status, envelope)
            return
        log.debug("control.handled", route=name,
                  ms=round((time.monotonic() - started) * 1000, 1))
        self._send_bytes(200, payload)

    # -- responses -------------------------------------------------------------------

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"))

    def _send_error_json(self, status: int, message: str, *, type_name: str | None = None,
                         kind: Any = None, headers: Mapping[str, str] | None = None) -> None:
        """Send the error envelope of ``status``; its type is ``type_name`` or the status's
        own (:func:`~opencode_memoryd.errors.status_type`)."""
        body = error_body(type_name or status_type(status), message, kind)
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
        self._send_error_json(code, message or phrase)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("control.request", method=self.command, path=getattr(self, "path", None),
                  status=code)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control.http", message=format % args)
