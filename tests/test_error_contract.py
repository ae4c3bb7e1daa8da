"""Each error class carries its exit code, HTTP status and wire type, and crosses the
control socket whole: a handler raises it, a real server sends the envelope over a real
Unix socket, the client rebuilds the same class with the same message and exit code."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from opencode_memoryd import errors
from opencode_memoryd.errors import (
    GENERIC_MESSAGE,
    AlreadyRunning,
    ConfigError,
    ControlError,
    DaemonUnreachableError,
    DiskFullError,
    DreamError,
    EmbedderMismatchError,
    ExtractionError,
    InstallRefusedError,
    MemorydError,
    NotFoundError,
    RefusedError,
    RemoteError,
    ReplyCutOff,
    RequestError,
    SocketOwnerError,
    SourceError,
    SourceSchemaError,
    StateError,
    StoreError,
    StoreInUseError,
    UpstreamError,
)
from opencode_memoryd.serve.control import client as control_client
from opencode_memoryd.serve.control.client import ControlClient
from opencode_memoryd.serve.control.server import ControlServer

#: One instance of every error class, with what it must be outside the process:
#: (exit code, HTTP status).
SAMPLES: list[tuple[MemorydError, int, int]] = [
    (MemorydError("something failed"), 1, 500),
    (ConfigError("/home/u/.config/x.toml", ["at `llm.mode`: bad"]), 78, 400),
    (SourceError("no OpenCode database"), 4, 500),
    (SourceSchemaError("no table `part`"), 4, 500),
    (StateError("state file locked"), 1, 500),
    (StoreError("collection is read-only"), 1, 500),
    (StoreInUseError("the store is open in pid 42"), 1, 500),
    (EmbedderMismatchError("built with bge-small, configured e5"), 1, 409),
    (UpstreamError("rate limited", kind="rate_limit", retryable=True, status=429), 1, 502),
    (ExtractionError("not JSON"), 1, 502),
    (ReplyCutOff("cut off at 512 tokens"), 1, 502),
    (NotFoundError("no memory with id abcd"), 5, 404),
    (RefusedError("the file exists"), 6, 409),
    (DreamError("run r1 is not applied"), 6, 409),
    (InstallRefusedError("/home/u/opencode.json", "not valid JSONC"), 6, 409),
    (DiskFullError("/var/state", 50 * 2**20, 2**20), 1, 500),
    (AlreadyRunning("pid 42 holds the lock"), 1, 500),
    (ControlError("no answer"), 1, 500),
    (DaemonUnreachableError("no daemon"), 1, 500),
    (SocketOwnerError("the socket is another user's"), 1, 500),
    (RequestError("`query` is required"), 2, 400),
]


def _classes(root: type[MemorydError]) -> set[type[MemorydError]]:
    found = {root}
    for sub in root.__subclasses__():
        found |= _classes(sub)
    return found


def test_the_table_names_every_error_class() -> None:
    """A new error class must say here what it becomes outside the process."""
    listed = {type(exc) for exc, _code, _status in SAMPLES}
    assert _classes(MemorydError) - {RemoteError} == listed


@pytest.mark.parametrize(("exc", "exit_code", "status"), SAMPLES,
                         ids=[type(e).__name__ for e, _c, _s in SAMPLES])
def test_each_class_carries_its_exit_code_status_and_wire_type(
        exc: MemorydError, exit_code: int, status: int) -> None:
    assert (exc.exit_code, exc.http_status, exc.wire_type) == (
        exit_code, status, type(exc).__name__)
    assert errors.describe(exc)[:3] == (status, type(exc).__name__, str(exc))


@pytest.fixture
def sock() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="mde-", dir="/tmp"))
    yield d / "run" / "control.sock"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def server(sock: Path) -> Iterator[Callable[[BaseException], None]]:
    """A real control server whose route ``fail`` raises what the test sets."""
    raised: list[BaseException] = []

    def fail(_payload: dict[str, Any]) -> None:
        raise raised[-1]

    control = ControlServer(sock, {"fail": fail})
    control.start()
    try:
        yield raised.append
    finally:
        control.close(wait_seconds=2)


@pytest.mark.parametrize(("exc", "exit_code", "status"), SAMPLES,
                         ids=[type(e).__name__ for e, _c, _s in SAMPLES])
def test_every_error_round_trips_socket_to_client(
        server: Callable[[BaseException], None], sock: Path, exc: MemorydError,
        exit_code: int, status: int) -> None:
    server(exc)
    for call in (lambda: control_client.call(sock, "fail", {}),
                 lambda: ControlClient(sock).call("fail", {})):
        with pytest.raises(RemoteError) as info:
            call()
        remote = info.value
        assert (remote.status, remote.type, remote.message) == (
            status, type(exc).__name__, str(exc))
        local = remote.local()
        assert type(local) is type(exc)
        assert (str(local), local.exit_code, local.http_status) == (
            str(exc), exit_code, status)
    if isinstance(exc, UpstreamError):
        assert isinstance(local, UpstreamError)
        assert (local.kind, local.retryable) == ("rate_limit", False)


def test_a_bug_crosses_as_a_generic_failure(server: Callable[[BaseException], None],
                                            sock: Path) -> None:
    server(KeyError("secret internals"))
    with pytest.raises(RemoteError) as info:
        control_client.call(sock, "fail", {})
    local = info.value.local()
    assert type(local) is MemorydError
    assert (str(local), local.exit_code, info.value.status) == (GENERIC_MESSAGE, 1, 500)
    assert "secret" not in str(local)
