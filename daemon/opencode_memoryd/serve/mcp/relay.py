"""``opencode-memoryd mcp``: relays OpenCode's stdio to the MCP server the daemon hosts.

OpenCode spawns this process per directory and waits for the ``initialize`` answer, so it
imports only the standard library and the tool's texts (:mod:`~opencode_memoryd.serve.
mcp_tool`): no SDK, no config schema. The SDK's server runs in the daemon
(:mod:`~opencode_memoryd.serve.mcp.host`); this process connects to its socket, sends
``{"cwd": ...}`` (the project resolves from this directory, as before), and copies
newline-delimited JSON-RPC both ways.

Without a daemon it answers by itself, by hand-written JSON-RPC for the tool's fixed
surface: ``initialize`` (the same answer as the SDK's), ``ping``, ``tools/list``, and
``tools/call`` with the tool's own answer (``help``, an argument error, or "the daemon is
not running; start it with ..."), the other methods "method not found". Importing the SDK
for that case would cost most of a second on every OpenCode start with no daemon. A
daemon that starts later, or restarts, is used from the next tool call on: the relay
connects and replays the client's ``initialize`` (its answer is dropped). A daemon that
accepts but does not answer within :data:`ANSWER_SECONDS` (stopped, stuck) is reported as
such in seconds.

Daemon or not, the relay answers a line that is no JSON-RPC request itself (-32700 "Parse
error" for what is not JSON, -32600 "Invalid Request" for JSON that is not an object, a
batch included; -32602 "Invalid params" for a request whose ``params`` is not an object):
the SDK's server would drop such a line without an answer, and the client would wait.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from opencode_memoryd import __version__
from opencode_memoryd.errors import (
    ControlError,
    DaemonUnreachableError,
    MemorydError,
    SocketOwnerError,
)
from opencode_memoryd.serve.control.peer import check_path, check_peer
from opencode_memoryd.serve.mcp.tool import (
    DESCRIPTION,
    INPUT_SCHEMA,
    INSTRUCTIONS,
    TOOL_NAME,
    dispatch,
    to_text,
)

#: How long (s) the daemon has to answer ``initialize`` or a ping before a tool call.
ANSWER_SECONDS = 3.0
#: Protocol versions answered as asked; any other gets the newest (as the SDK does).
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[-1]
_REPLAY_ID = "opencode-memoryd-relay-"
#: The answer to a line that is not JSON (answered here, daemon or not: its server would
#: drop the line unanswered).
PARSE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
#: The answer to JSON that is not a request object (an array, a number, ...).
INVALID_REQUEST = {"jsonrpc": "2.0", "id": None,
                   "error": {"code": -32600, "message": "Invalid Request"}}


def _key(msg_id: Any) -> str:
    return json.dumps(msg_id)


class Relay:
    """One relay session.

    Args:
        find: the daemon's MCP socket, or ``None`` when no daemon runs (read on each try).
        directory: the client's working directory (sent to the daemon).
        out: where answers are written (stdout's binary buffer).
    """

    def __init__(self, find: Callable[[], Path | None], directory: str, out: BinaryIO) -> None:
        self._find = find
        self._dir = directory
        self._out = out
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        self._reader: threading.Thread | None = None
        self._pending: dict[str, tuple[dict[str, Any], threading.Event]] = {}
        self._swallow: set[str] = set()
        self._init: dict[str, Any] | None = None
        self._initialized = False
        self._down: MemorydError = DaemonUnreachableError("no daemon")
        self._replays = 0

    # -- the client's side --------------------------------------------------------------

    def run(self, stdin: BinaryIO) -> None:
        """Relay until the client closes stdin, then until the daemon's last answer."""
        self._connect(replay=False)
        for line in stdin:
            if line.strip():
                self.handle(line)
        with self._lock:
            conn, reader = self._conn, self._reader
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)
        if reader is not None:
            reader.join(timeout=130)

    def handle(self, line: bytes) -> None:
        """Relay (or answer) one line from the client."""
        msg = self._message(line)
        if msg is None:
            return
        method = msg.get("method")
        if "id" in msg and method is not None and not isinstance(msg.get("params", {}),
                                                                 dict):
            # the SDK's server drops such a request unanswered: answer it here
            self._write(self.local_answer(msg))
            return
        if method == "initialize":
            self._init = msg
        elif method == "notifications/initialized":
            self._initialized = True
        if "id" not in msg or method is None:  # a notification, or an answer to the server
            self._send(line)
            return
        if method == "tools/call":
            self._reach_daemon()
        waiter = threading.Event()
        with self._lock:
            self._pending[_key(msg["id"])] = (msg, waiter)
        if not self._send(line):
            self._answer_pending()
        elif method == "initialize" and not waiter.wait(ANSWER_SECONDS):
            self._drop(ControlError("the daemon did not answer initialize"))

    def _message(self, line: bytes) -> dict[str, Any] | None:
        """The JSON-RPC message of ``line``; ``None`` when it is not one (the client was
        answered with a parse error or an invalid request)."""
        try:
            msg = json.loads(line)
        except ValueError:  # UnicodeDecodeError too
            self._write(PARSE_ERROR)
            return None
        if not isinstance(msg, dict):  # a batch (MCP has none since 2025-06-18), a number
            self._write(INVALID_REQUEST)
            return None
        return msg

    def _reach_daemon(self) -> None:
        """Before a tool call: connect (replaying the handshake) if not connected, and
        drop a connection whose daemon no longer answers (the call is then answered
        locally)."""
        if self._conn is None:
            self._connect(replay=True)
        if self._conn is not None and not self._alive():
            self._drop(ControlError(
                f"the daemon on {self._find()} accepts connections but did not answer "
                f"within {ANSWER_SECONDS:g} s (stuck or stopped?)"))

    # -- the daemon's side --------------------------------------------------------------

    def _connect(self, *, replay: bool) -> None:
        path = self._find()
        if path is None:
            return
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            check_path(path)
            conn.settimeout(ANSWER_SECONDS)
            conn.connect(str(path))
            check_peer(conn, path)
            conn.settimeout(None)
            hello = json.dumps({"cwd": self._dir}) + "\n"
            conn.sendall(hello.encode())
        except SocketOwnerError as exc:  # another user's socket: it gets nothing
            conn.close()
            self._down = exc
            return
        except OSError:
            conn.close()
            return
        self._down = DaemonUnreachableError("no daemon")
        reader = threading.Thread(target=self._read, args=(conn,), daemon=True)
        with self._lock:
            self._conn, self._reader = conn, reader
        reader.start()
        if replay and self._init is not None:
            self._replays += 1
            replayed = {**self._init, "id": f"{_REPLAY_ID}{self._replays}"}
            with self._lock:
                self._swallow.add(_key(replayed["id"]))
            self._send(json.dumps(replayed).encode() + b"\n")
            if self._initialized:
                self._send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def _alive(self) -> bool:
        """Ping the daemon's session; ``False`` when no answer comes in time."""
        self._replays += 1
        ping_id = f"{_REPLAY_ID}{self._replays}"
        waiter = threading.Event()
        with self._lock:
            self._swallow.add(_key(ping_id))
            self._pending[_key(ping_id)] = ({"id": ping_id, "method": "ping"}, waiter)
        ping = {"jsonrpc": "2.0", "id": ping_id, "method": "ping"}
        return self._send(json.dumps(ping).encode() + b"\n") and waiter.wait(ANSWER_SECONDS)

    def _send(self, line: bytes) -> bool:
        with self._lock:
            conn = self._conn
        if conn is None:
            return False
        try:
            conn.sendall(line if line.endswith(b"\n") else line + b"\n")
        except OSError:
            self._drop(DaemonUnreachableError("the daemon went away"))
            return False
        return True

    def _read(self, conn: socket.socket) -> None:
        """The daemon's answers, copied to the client (replayed ones dropped)."""
        try:
            for line in conn.makefile("rb"):
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                key = _key(msg.get("id"))
                answer = "method" not in msg
                with self._lock:
                    hidden = key in self._swallow
                    self._swallow.discard(key)
                    waiting = self._pending.pop(key, None) if answer else None
                if waiting is not None:
                    waiting[1].set()
                # an answer to nothing pending was given here already (a timeout)
                late = answer and waiting is None and msg.get("id") is not None
                if not hidden and not late:
                    self._write_line(line)
        except OSError:
            pass
        with self._lock:
            mine = self._conn is conn
        if mine:
            self._drop(DaemonUnreachableError("the daemon went away"))

    def _drop(self, reason: MemorydError) -> None:
        """Forget the daemon's connection and answer what it left unanswered."""
        with self._lock:
            conn, self._conn = self._conn, None
        self._down = reason
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._answer_pending()

    def _answer_pending(self) -> None:
        with self._lock:
            pending, self._pending = list(self._pending.items()), {}
            hidden, self._swallow = self._swallow, set()
        for key, (msg, waiter) in pending:
            waiter.set()
            if key not in hidden:
                self._write(self.local_answer(msg))

    # -- answers without a daemon -------------------------------------------------------

    def local_answer(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The answer to request ``msg`` when the daemon cannot give it."""
        method, params = msg.get("method"), msg.get("params") or {}
        out: dict[str, Any] = {"jsonrpc": "2.0", "id": msg.get("id")}
        if not isinstance(params, dict):
            return {**out, "error": {"code": -32602, "message": "Invalid params"}}
        if method == "initialize":
            asked = params.get("protocolVersion")
            version = asked if asked in PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
            return {**out, "result": {
                "capabilities": {"tools": {"listChanged": False}},
                "instructions": INSTRUCTIONS, "protocolVersion": version,
                "serverInfo": {"name": "opencode-memoryd", "version": __version__}}}
        if method == "ping":
            return {**out, "result": {}}
        if method == "tools/list":
            return {**out, "result": {"tools": [{"name": TOOL_NAME, "description": DESCRIPTION,
                                                 "inputSchema": INPUT_SCHEMA}]}}
        if method == "tools/call":
            args = params.get("arguments") or {}
            if not isinstance(args, dict):
                return {**out, "error": {"code": -32602, "message": "Invalid params"}}
            if params.get("name") != TOOL_NAME:
                result: dict[str, Any] = {
                    "success": False, "error": f"unknown tool {params.get('name')!r}; use memory"}
            else:
                result = dispatch(args, self._unavailable, self._dir)
            return {**out, "result": {"content": [{"type": "text", "text": to_text(result)}],
                                      "isError": not result.get("success")}}
        return {**out, "error": {"code": -32601, "message": "Method not found", "data": method}}

    def _unavailable(self, route: str, payload: dict[str, Any]) -> Any:
        raise self._down

    def _write(self, obj: dict[str, Any]) -> None:
        self._write_line(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
                         + b"\n")

    def _write_line(self, line: bytes) -> None:
        with self._lock:
            try:
                self._out.write(line if line.endswith(b"\n") else line + b"\n")
                self._out.flush()
            except (OSError, ValueError):  # the client is gone
                pass


def run(find: Callable[[], Path | None]) -> int:
    """Relay stdin/stdout for the current working directory; returns the exit code."""
    Relay(find, os.getcwd(), sys.stdout.buffer).run(sys.stdin.buffer)
    return 0
