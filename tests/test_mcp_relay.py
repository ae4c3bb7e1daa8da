"""The MCP relay (``serve/mcp/relay.py``) and the daemon's MCP host (``serve/mcp/host.py``)
in one process, over a real Unix socket and the real SDK server: the JSON-RPC the relay
answers itself, a session ended with a call in flight, a daemon replaced mid-session,
large answers, a folder name of newlines and non-ASCII letters, two relays at once.

The use cases behind the host are a stand-in (``search`` answers what the test sets), so
each test is about the wire alone; ``tests/test_mcp.py`` runs the real daemon."""

from __future__ import annotations

import gc
import io
import json
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from opencode_memoryd.serve.mcp.host import MCPHost, in_process_caller
from opencode_memoryd.serve.mcp.relay import Relay

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def search(msg_id: Any, query: str = "pnpm") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
            "params": {"name": "memory", "arguments": {"mode": "search", "query": query}}}


class Backend:
    """The use cases behind the host: ``search`` answers ``hits`` (after ``gate`` opens),
    every call is recorded."""

    def __init__(self) -> None:
        self.hits: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.gate = threading.Event()
        self.gate.set()

    def run(self, route: str, payload: dict[str, Any]) -> Any:
        self.calls.append((route, payload))
        self.gate.wait(30)
        return self.hits


class Out(io.RawIOBase):
    """The relay's stdout: the lines it wrote, parsed."""

    def __init__(self) -> None:
        super().__init__()
        self.raw = b""
        self.lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        with self.lock:
            self.raw += bytes(b)
        return len(b)

    def messages(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(x) for x in self.raw.splitlines()]

    def answer(self, msg_id: Any, timeout: float = 20) -> dict[str, Any]:
        """The answer to ``msg_id``, waited for."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for m in self.messages():
                if "method" not in m and m.get("id") == msg_id:
                    return m
            time.sleep(0.01)
        raise AssertionError(f"no answer to {msg_id!r}: {self.messages()}")


@pytest.fixture
def sock_path() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="relay-", dir="/tmp"))  # the socket path limit
    try:
        yield d / "mcp.sock"
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


@pytest.fixture
def backend() -> Backend:
    return Backend()


@pytest.fixture
def host(sock_path: Path, backend: Backend) -> Iterator[MCPHost]:
    h = MCPHost(sock_path, in_process_caller(backend.run))
    h.start()
    try:
        yield h
    finally:
        backend.gate.set()
        h.close()


def relay(find: Callable[[], Path | None], directory: str = "/work/project"
          ) -> tuple[Relay, Out]:
    out = Out()
    return Relay(find, directory, cast(Any, out)), out


def started(r: Relay, out: Out) -> None:
    """Connect and initialize as OpenCode does."""
    r._connect(replay=False)
    r.handle(line(INIT))
    r.handle(line(INITIALIZED))
    assert "result" in out.answer(1)


def test_a_session_ended_with_a_call_in_flight_is_closed_at_once(
        host: MCPHost, sock_path: Path, backend: Backend) -> None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(sock_path))
    conn.settimeout(10)
    reader = conn.makefile("rb")
    conn.sendall(line({"cwd": "/work/project"}) + line(INIT) + line(INITIALIZED))
    assert json.loads(reader.readline())["id"] == 1
    backend.gate.clear()
    conn.sendall(line(search(2)))
    assert wait(lambda: backend.calls)
    gc.disable()  # the connection must not wait for the collector
    try:
        conn.shutdown(socket.SHUT_WR)  # the client is gone: its stdin closed
        backend.gate.set()
        rest = reader.read()  # returns once the host closes its end
    finally:
        gc.enable()
        conn.close()
    assert all(json.loads(x).get("id") in (2, None) for x in rest.splitlines())


def wait(cond: Callable[[], Any], timeout: float = 10) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("with_daemon", [True, False])
def test_lines_that_are_no_request_get_the_json_rpc_errors(
        host: MCPHost, sock_path: Path, with_daemon: bool) -> None:
    r, out = relay(lambda: sock_path if with_daemon else None)
    started(r, out)
    for bad in (b"{not json\n", b"\xff\xfe\n", b"[]\n", b"5\n",
                line([{"jsonrpc": "2.0", "id": 7, "method": "ping"}])):
        r.handle(bad)
    r.handle(line({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": [1]}))
    r.handle(line({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
    assert out.answer(9)["result"] == {}
    assert out.answer(8)["error"]["code"] == -32602  # not held until the session ends
    errors = [m["error"]["code"] for m in out.messages() if m.get("id") is None]
    assert errors == [-32700, -32700, -32600, -32600, -32600]


def test_notifications_get_no_answer_and_unknown_methods_minus_32601(
        host: MCPHost, sock_path: Path) -> None:
    for find in (lambda: sock_path, lambda: None):
        r, out = relay(find)
        started(r, out)
        r.handle(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 99}}))
        r.handle(line({"jsonrpc": "2.0", "id": "x", "method": "bogus/method"}))
        r.handle(line({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        assert out.answer("x")["error"]["code"] == -32601
        assert out.answer(3) == {"jsonrpc": "2.0", "id": 3, "result": {}}
        assert [m.get("id") for m in out.messages()] == [1, "x", 3]


def test_a_replaced_daemon_answers_the_next_call_after_a_replayed_initialize(
        host: MCPHost, sock_path: Path, backend: Backend) -> None:
    backend.hits = [{"id": "m1", "content": "Always use pnpm.", "type": "feedback",
                     "scope": "project", "score": 1.0}]
    r, out = relay(lambda: sock_path)
    started(r, out)
    host.close()
    assert wait(lambda: r._conn is None)
    r.handle(line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))  # answered here
    assert out.answer(2)["result"]["tools"][0]["name"] == "memory"
    second = MCPHost(sock_path, in_process_caller(backend.run))
    second.start()
    try:
        r.handle(line(search(3)))
        got = json.loads(out.answer(3)["result"]["content"][0]["text"])
        assert got["success"] is True and got["results"][0]["content"] == "Always use pnpm."
        assert [m["id"] for m in out.messages()] == [1, 2, 3]  # the replay stays hidden
    finally:
        second.close()


def test_large_answers_and_an_odd_folder_name_cross_intact(
        host: MCPHost, sock_path: Path, backend: Backend) -> None:
    big = "x" * 100_000 + " ü ✓ \u2028 end"
    backend.hits = [{"id": "m1", "content": big, "type": "project", "scope": "project",
                     "score": 1.0}]
    folder = "/work/proj\nwith newline/ünïcødé ✓"
    r, out = relay(lambda: sock_path, folder)
    started(r, out)
    r.handle(line(search(2, "q" * 50_000)))
    got = json.loads(out.answer(2)["result"]["content"][0]["text"])
    assert got["results"][0]["content"] == big
    assert backend.calls == [("search", {"query": "q" * 50_000, "directory": folder,
                                         "limit": 10})]


def test_two_relays_at_once_get_their_own_answers(
        host: MCPHost, sock_path: Path, backend: Backend) -> None:
    pairs = [relay(lambda: sock_path, f"/work/p{i}") for i in range(2)]
    for r, out in pairs:
        started(r, out)

    def calls(r: Relay, n: int) -> None:
        for k in range(5):
            r.handle(line(search(f"{n}-{k}")))

    threads = [threading.Thread(target=calls, args=(r, n)) for n, (r, _) in enumerate(pairs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, (_, out) in enumerate(pairs):
        assert "result" in out.answer(f"{n}-4")
        assert sorted(str(m["id"]) for m in out.messages()) == sorted(
            ["1", *(f"{n}-{k}" for k in range(5))])
    assert {p["directory"] for _, p in backend.calls} == {"/work/p0", "/work/p1"}


def test_the_relay_ends_soon_after_stdin_closes_with_a_call_in_flight(
        host: MCPHost, sock_path: Path, backend: Backend) -> None:
    r, out = relay(lambda: sock_path)
    backend.gate.clear()
    stdin = io.BytesIO(line(INIT) + line(INITIALIZED) + line(search(2)))
    t = threading.Thread(target=r.run, args=(stdin,), daemon=True)
    gc.disable()
    try:
        t.start()
        assert wait(lambda: backend.calls)
        backend.gate.set()
        t.join(timeout=10)
    finally:
        gc.enable()
    assert not t.is_alive()
    assert out.answer(1)


def test_a_request_answered_here_is_not_answered_again_by_a_late_daemon(
        sock_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(1)
    try:
        r, out = relay(lambda: sock_path)
        r._connect(replay=False)
        daemon, _ = listener.accept()
        with daemon, daemon.makefile("rb") as seen:
            assert json.loads(seen.readline()) == {"cwd": "/work/project"}
            r.handle(line({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
            assert json.loads(seen.readline())["id"] == 5
            r._answer_pending()  # what a timeout does: the relay answers it itself
            daemon.sendall(line({"jsonrpc": "2.0", "id": 5, "result": {}}))  # too late
            daemon.sendall(line({"jsonrpc": "2.0", "method": "notifications/message",
                                 "params": {"level": "info", "data": "x"}}))
            assert wait(lambda: len(out.messages()) == 2)
            time.sleep(0.2)
        assert [m.get("id") for m in out.messages()] == [5, None]  # one answer to 5
    finally:
        listener.close()


def test_a_relay_before_the_deferred_import_is_served_at_once(
        sock_path: Path, backend: Backend) -> None:
    """The daemon defers the SDK's import (``preload_after``); a relay that connects
    before that gets its session without waiting for the delay, and the hook meant for
    the deferred import (it lets commands go first) is not called for it."""
    hooked: list[str] = []
    h = MCPHost(sock_path, in_process_caller(backend.run), preload_after=3600,
                before_preload=lambda: hooked.append("deferred"))
    h.start()
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(sock_path))
        conn.settimeout(30)
        with conn, conn.makefile("rb") as reader:
            conn.sendall(line({"cwd": "/work/project"}) + line(INIT) + line(INITIALIZED)
                         + line(search(2)))
            answers = {json.loads(reader.readline())["id"] for _ in range(2)}
        assert answers == {1, 2}
        assert backend.calls and backend.calls[0][0] == "search"
        assert hooked == []
    finally:
        h.close()


def test_the_deferred_import_calls_its_hook_first(sock_path: Path, backend: Backend) -> None:
    hooked = threading.Event()
    h = MCPHost(sock_path, in_process_caller(backend.run), preload_after=0.01,
                before_preload=hooked.set)
    h.start()
    try:
        assert hooked.wait(30)
        r, out = relay(lambda: sock_path)
        started(r, out)
        r.handle(line(search(2)))
        assert "result" in out.answer(2)
    finally:
        h.close()
