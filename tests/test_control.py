"""The control endpoint over real Unix sockets: routes, errors, permissions, stale sockets."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from opencode_memoryd.errors import (
    ConfigError,
    ControlError,
    DaemonUnreachableError,
    RemoteError,
    RequestError,
    StoreError,
    UpstreamError,
)
from opencode_memoryd.serve.control.client import ControlClient
from opencode_memoryd.serve.control.protocol import BASE_URL, MAX_BODY_BYTES, socket_path
from opencode_memoryd.serve.control.server import ControlServer


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder under /tmp: AF_UNIX paths are limited to 107 bytes, tmp_path may be longer."""
    d = Path(tempfile.mkdtemp(prefix="mdc-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sock(short_dir: Path) -> Path:
    """A socket path whose folder does not exist yet."""
    return short_dir / "run" / "opencode-memoryd" / "control.sock"


@pytest.fixture
def serve(sock: Path) -> Iterator[Callable[..., ControlServer]]:
    """Start servers on ``sock`` (or another path); every one is closed at the end."""
    servers: list[ControlServer] = []

    def start(handlers: dict[str, Callable[[dict[str, Any]], Any]] | None = None,
              path: Path | None = None, **kw: Any) -> ControlServer:
        server = ControlServer(path or sock, handlers or {}, **kw)
        server.start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close(wait_seconds=2)


def raw_client(path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url=BASE_URL,
                        trust_env=False, timeout=10)


def make_stale_socket(path: Path) -> None:
    """Leave a socket file behind that nothing listens on, as a killed daemon would."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def echo(body: dict[str, Any]) -> dict[str, Any]:
    return {"echo": body, "keys": sorted(body)}


# -- socket_path -----------------------------------------------------------------------


def test_socket_path_uses_runtime_dir_when_set(tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": "/run/user/1000"}
    assert socket_path(tmp_path, env) == Path("/run/user/1000/opencode-memoryd/control.sock")


def test_socket_path_falls_back_to_state_dir(tmp_path: Path) -> None:
    assert socket_path(tmp_path, {}) == tmp_path / "control.sock"
    assert socket_path(tmp_path, {"XDG_RUNTIME_DIR": ""}) == tmp_path / "control.sock"
    assert socket_path(tmp_path, {"XDG_RUNTIME_DIR": "rel/dir"}) == tmp_path / "control.sock"


def test_socket_path_reads_os_environ_by_default(short_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # a short folder: a path over the AF_UNIX limit would be replaced (tested below)
    assert socket_path(short_dir) == short_dir / "control.sock"  # conftest unsets it
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_dir / "rt"))
    assert socket_path(short_dir) == short_dir / "rt" / "opencode-memoryd" / "control.sock"


# -- round trips -----------------------------------------------------------------------


def test_round_trip_with_json_payload(serve: Callable[..., ControlServer], sock: Path) -> None:
    serve({"echo": echo})
    payload = {"query": "naïve café ☕", "limit": 5, "filters": {"tags": ["a", "b"]},
               "flag": True, "none": None, "score": 0.25}
    with ControlClient(sock) as client:
        assert client.call("echo", payload) == {"echo": payload,
                                                "keys": sorted(payload)}
        assert client.call("echo") == {"echo": {}, "keys": []}


def test_empty_body_counts_as_empty_object(serve: Callable[..., ControlServer],
                                           sock: Path) -> None:
    serve({"echo": echo})
    with raw_client(sock) as http:
        r = http.post("/v1/echo")
    assert r.status_code == 200
    assert r.json() == {"result": {"echo": {}, "keys": []}}


def test_socket_is_0600_and_its_folder_0700(serve: Callable[..., ControlServer],
                                            sock: Path) -> None:
    serve({"echo": echo})
    assert stat.S_ISSOCK(os.lstat(sock).st_mode)
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o700


def test_existing_loose_folder_is_tightened(serve: Callable[..., ControlServer],
                                            sock: Path) -> None:
    sock.parent.mkdir(parents=True)
    os.chmod(sock.parent, 0o755)
    serve({})
    assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600


def test_ping_returns_the_server_pid(serve: Callable[..., ControlServer], sock: Path) -> None:
    serve({})
    assert ControlClient(sock).ping() == os.getpid()
    with raw_client(sock) as http:
        r = http.get("/v1/ping")
    assert r.status_code == 200
    assert r.json() == {"result": {"pid": os.getpid()}}


# -- errors ----------------------------------------------------------------------------


def test_unknown_route_is_404(serve: Callable[..., ControlServer], sock: Path) -> None:
    serve({"echo": echo})
    with raw_client(sock) as http:
        r = http.post("/v1/nope", json={})
        other = http.get("/elsewhere")
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "NotFound"
    assert other.status_code == 404
    with pytest.raises(RemoteError) as info:
        ControlClient(sock).call("nope", {"x": 1})
    assert (info.value.type, info.value.status, info.value.kind) == ("NotFound", 404, None)


def test_get_on_a_handler_route_is_405(serve: Callable[..., ControlServer],
                                       sock: Path) -> None:
    serve({"echo": echo})
    with raw_client(sock) as http:
        r = http.get("/v1/echo")
        put = http.put("/v1/echo", json={})
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    assert r.json()["error"]["type"] == "MethodNotAllowed"
    assert put.status_code == 501
    assert put.json()["error"]["type"] == "NotImplemented"


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe", b'"text"'])
def test_invalid_json_body_is_400(serve: Callable[..., ControlServer], sock: Path,
                                  content: bytes) -> None:
    called: list[dict[str, Any]] = []
    serve({"echo": lambda body: called.append(body)})
    with raw_client(sock) as http:
        r = http.post("/v1/echo", content=content,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "BadRequest"
    assert called == []


def test_memoryd_error_becomes_remote_error(serve: Callable[..., ControlServer],
                                            sock: Path) -> None:
    def boom(_body: dict[str, Any]) -> None:
        raise UpstreamError("the LLM endpoint is rate limited", kind="rate_limit",
                            retryable=True, status=429)

    serve({"boom": boom})
    with pytest.raises(RemoteError) as info:
        ControlClient(sock).call("boom", {})
    err = info.value
    assert err.type == "UpstreamError"
    assert err.kind == "rate_limit"
    assert err.message == "the LLM endpoint is rate limited"
    assert str(err) == "the LLM endpoint is rate limited"
    assert err.status == 502
    assert not isinstance(err, ControlError)


@pytest.mark.parametrize(("exc", "status", "type_name"), [
    (ConfigError("/etc/x.toml", ["at `a`: bad"]), 400, "ConfigError"),
    (RequestError("`query` is required"), 400, "RequestError"),
    (StoreError("collection is read-only"), 500, "StoreError"),
])
def test_error_status_mapping(serve: Callable[..., ControlServer], sock: Path,
                              exc: Exception, status: int, type_name: str) -> None:
    def fail(_body: dict[str, Any]) -> None:
        raise exc

    serve({"fail": fail})
    with pytest.raises(RemoteError) as info:
        ControlClient(sock).call("fail")
    assert (info.value.status, info.value.type, info.value.kind) == (status, type_name, None)
    assert info.value.message == str(exc)


def test_unexpected_exception_is_500_without_details(serve: Callable[..., ControlServer],
                                                     sock: Path) -> None:
    def crash(_body: dict[str, Any]) -> None:
        raise ValueError("secret-internal-detail-42")

    serve({"crash": crash})
    with raw_client(sock) as http:
        r = http.post("/v1/crash", json={"a": 1})
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["type"] == "InternalError"
    assert error["kind"] is None
    assert "secret-internal-detail-42" not in r.text
    assert "Traceback" not in r.text
    assert "ValueError" not in r.text
    assert "control.py" not in r.text

    with pytest.raises(RemoteError) as info:
        ControlClient(sock).call("crash")
    assert (info.value.type, info.value.status) == ("InternalError", 500)
    assert "secret-internal-detail-42" not in info.value.message


def test_unserialisable_result_is_500(serve: Callable[..., ControlServer],
                                      sock: Path) -> None:
    serve({"odd": lambda _body: {"when": object()}})
    with pytest.raises(RemoteError) as info:
        ControlClient(sock).call("odd")
    assert (info.value.type, info.value.status) == ("InternalError", 500)


def test_oversized_body_is_413(serve: Callable[..., ControlServer], sock: Path) -> None:
    called: list[Any] = []
    serve({"echo": lambda body: called.append(body)})
    big = {"text": "x" * MAX_BODY_BYTES}
    with raw_client(sock) as http:
        r = http.post("/v1/echo", json=big)
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "RequestTooLarge"
    with pytest.raises(RemoteError) as info:
        ControlClient(sock).call("echo", big)
    assert info.value.status == 413
    assert called == []
    # a body just under the cap still goes through
    assert ControlClient(sock).call("echo", {"text": "x" * (MAX_BODY_BYTES - 100)}) is None
    assert len(called) == 1


def test_chunked_body_is_refused(serve: Callable[..., ControlServer], sock: Path) -> None:
    serve({"echo": echo})

    def chunks() -> Iterator[bytes]:
        yield b"{}"

    with raw_client(sock) as http:
        r = http.post("/v1/echo", content=chunks())
    assert r.status_code == 411


# -- no daemon, stale and live sockets --------------------------------------------------


def test_ping_is_none_without_a_server(sock: Path) -> None:
    assert ControlClient(sock).ping() is None
    with pytest.raises(DaemonUnreachableError, match=r"control\.sock"):
        ControlClient(sock).call("echo", {})


def test_ping_is_none_on_a_stale_socket(sock: Path) -> None:
    make_stale_socket(sock)
    assert ControlClient(sock).ping() is None
    with pytest.raises(DaemonUnreachableError):
        ControlClient(sock).call("echo", {})


def test_stale_socket_is_replaced(serve: Callable[..., ControlServer], sock: Path) -> None:
    make_stale_socket(sock)
    serve({"echo": echo})
    assert ControlClient(sock).call("echo", {"a": 1}) == {"echo": {"a": 1}, "keys": ["a"]}
    assert ControlClient(sock).ping() == os.getpid()
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600


def test_second_server_on_a_live_socket_fails(serve: Callable[..., ControlServer],
                                              sock: Path) -> None:
    serve({"echo": lambda body: "first"})
    second = ControlServer(sock, {"echo": lambda body: "second"})
    with pytest.raises(ControlError, match=str(sock)):
        second.start()
    second.close()  # a no-op on a server that never started
    assert ControlClient(sock).call("echo") == "first"
    assert ControlClient(sock).ping() == os.getpid()


def test_foreign_listener_is_not_replaced(sock: Path) -> None:
    """A live socket not made by ControlServer (no lock held) is detected by connecting."""
    sock.parent.mkdir(parents=True, mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(sock))
        listener.listen(1)
        inode = os.lstat(sock).st_ino
        with pytest.raises(ControlError, match=str(sock)):
            ControlServer(sock, {}).start()
        assert os.lstat(sock).st_ino == inode
    finally:
        listener.close()


def test_non_socket_file_is_not_replaced(sock: Path) -> None:
    sock.parent.mkdir(parents=True, mode=0o700)
    sock.write_text("keep me")
    with pytest.raises(ControlError, match="not a socket"):
        ControlServer(sock, {}).start()
    assert sock.read_text() == "keep me"


def test_too_long_path_is_refused(short_dir: Path) -> None:
    path = short_dir / ("d" * 100) / "control.sock"
    with pytest.raises(ControlError, match="longer than"):
        ControlServer(path, {}).start()
    assert ControlClient(path).ping() is None


def test_reserved_and_invalid_route_names() -> None:
    with pytest.raises(ValueError):
        ControlServer(Path("/tmp/x.sock"), {"ping": echo})
    with pytest.raises(ValueError):
        ControlServer(Path("/tmp/x.sock"), {"a/b": echo})
    with pytest.raises(ValueError):
        ControlClient(Path("/tmp/x.sock")).call("../etc")


def test_close_removes_the_socket(serve: Callable[..., ControlServer], sock: Path) -> None:
    server = serve({"echo": echo})
    assert ControlClient(sock).ping() == os.getpid()
    server.close()
    assert not sock.exists()
    assert ControlClient(sock).ping() is None
    with pytest.raises(DaemonUnreachableError):
        ControlClient(sock).call("echo")
    server.close()
    # the path is free again
    serve({"echo": lambda body: "again"})
    assert ControlClient(sock).call("echo") == "again"


def test_close_leaves_a_socket_it_does_not_own(serve: Callable[..., ControlServer],
                                              sock: Path) -> None:
    server = serve({})
    sock.unlink()  # removed by hand, and something else now listens on the path
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        other.bind(str(sock))
        other.listen(1)
        inode = os.lstat(sock).st_ino
        server.close()
        assert os.lstat(sock).st_ino == inode
    finally:
        other.close()


# -- concurrency and timeouts ----------------------------------------------------------


def test_eight_concurrent_calls(serve: Callable[..., ControlServer], sock: Path) -> None:
    barrier = threading.Barrier(8, timeout=10)

    def together(body: dict[str, Any]) -> int:
        barrier.wait()  # only returns when all eight run at the same time
        return int(body["i"]) * 2

    serve({"together": together})
    with ControlClient(sock, timeout_seconds=20) as client, \
            ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: client.call("together", {"i": i}), range(8)))
    assert results == [i * 2 for i in range(8)]


def test_proxy_variables_are_ignored(serve: Callable[..., ControlServer], sock: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    serve({"echo": echo})
    assert ControlClient(sock).call("echo", {"a": 1})["echo"] == {"a": 1}
    assert ControlClient(sock).ping() == os.getpid()


def test_call_timeout_is_a_control_error(serve: Callable[..., ControlServer],
                                         sock: Path) -> None:
    release = threading.Event()
    serve({"slow": lambda body: release.wait(10)})
    try:
        with pytest.raises(ControlError) as info:
            ControlClient(sock, timeout_seconds=0.3).call("slow")
        assert not isinstance(info.value, DaemonUnreachableError)
    finally:
        release.set()


def test_idle_connection_is_dropped_after_the_timeout(serve: Callable[..., ControlServer],
                                                      sock: Path) -> None:
    serve({"echo": echo}, connection_timeout_seconds=0.3)
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        idle.settimeout(5)
        idle.connect(str(sock))
        idle.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\n")  # never finishes
        started = time.monotonic()
        data = idle.recv(65536)
        while data:
            data = idle.recv(65536)
        assert time.monotonic() - started < 4
    finally:
        idle.close()
    assert ControlClient(sock).call("echo", {})["echo"] == {}


def test_close_waits_for_a_running_handler(serve: Callable[..., ControlServer],
                                           sock: Path) -> None:
    entered = threading.Event()
    done: list[str] = []

    def work(_body: dict[str, Any]) -> str:
        entered.set()
        time.sleep(0.5)
        done.append("finished")
        return "ok"

    server = serve({"work": work})
    results: list[Any] = []
    caller = threading.Thread(target=lambda: results.append(ControlClient(sock).call("work")))
    caller.start()
    assert entered.wait(5)
    server.close(wait_seconds=5)
    assert done == ["finished"]
    caller.join(5)
    assert results == ["ok"]


def test_response_is_plain_json(serve: Callable[..., ControlServer], sock: Path) -> None:
    serve({"echo": echo})
    with raw_client(sock) as http:
        r = http.post("/v1/echo", json={"k": "v"})
    assert r.headers["content-type"] == "application/json"
    assert r.headers["connection"] == "close"
    assert json.loads(r.content) == {"result": {"echo": {"k": "v"}, "keys": ["k"]}}


# -- one client ------------------------------------------------------------------------


def test_the_client_class_is_the_fast_paths_client(serve: Callable[..., ControlServer],
                                                    sock: Path) -> None:
    """``ControlClient`` (the MCP server's, the tests') sends what the CLI's fast path
    sends, and loads no HTTP library: a fresh interpreter pings and calls the daemon with
    it, then reports which modules it loaded."""
    import subprocess
    import sys

    serve({"echo": echo})
    probe = ("import json, sys\n"
             "from opencode_memoryd.serve.control.client import ControlClient\n"
             "client = ControlClient(sys.argv[1])\n"
             "print(json.dumps({'pid': client.ping(), 'echo': client.call('echo', {'a': 1}),\n"
             "                  'http': [m for m in ('httpx', 'httpcore', 'h11')\n"
             "                           if m in sys.modules]}))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(sock)], capture_output=True,
                          text=True, timeout=60, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    got = json.loads(done.stdout)
    assert got == {"pid": os.getpid(), "echo": {"echo": {"a": 1}, "keys": ["a"]}, "http": []}
