"""Commands first: the daemon's background work waits while a young control connection
is open (real threads, a real control server on a Unix socket; outcomes, not times)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import wait_until
from opencode_memoryd.serve.control.client import call
from opencode_memoryd.serve.control.server import ControlServer
from opencode_memoryd.serve.runtime import priority
from opencode_memoryd.serve.runtime.priority import Foreground


def test_step_aside_returns_at_once_without_connections() -> None:
    fg = Foreground()
    assert fg.step_aside() == 0.0
    assert not fg.busy()


def test_step_aside_waits_until_the_connection_is_answered() -> None:
    fg = Foreground()
    fg.arrived(1)
    order: list[str] = []
    aside = threading.Thread(target=lambda: (fg.step_aside(max_seconds=30),
                                             order.append("background")))
    aside.start()
    aside.join(0.2)
    assert aside.is_alive()  # still waiting: the command goes first
    order.append("command")
    fg.left(1)
    aside.join(10)
    assert not aside.is_alive()
    assert order == ["command", "background"]
    assert not fg.busy()


def test_a_connection_never_holds_the_background_past_the_bound() -> None:
    fg = Foreground()
    fg.arrived(1)
    fg.step_aside(max_seconds=0.01)  # returns though the connection stays open
    assert fg.busy()


def test_an_old_connection_has_no_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority, "PRIORITY_SECONDS", 0.0)
    fg = Foreground()
    fg.arrived(1)  # e.g. a `maintain` asked over the socket, running for minutes
    assert not fg.busy()
    fg.step_aside(max_seconds=30)  # returns at once
    fg.left(1)
    fg.left(2)  # unknown: ignored


@pytest.fixture
def sock() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="prio-", dir="/tmp"))  # the socket path limit
    yield d / "control.sock"
    shutil.rmtree(d, ignore_errors=True)


def test_the_control_server_marks_a_connection_until_it_is_answered(sock: Path) -> None:
    inside = threading.Event()
    release = threading.Event()
    seen: dict[str, Any] = {}

    def slow(_body: dict[str, Any]) -> str:
        inside.set()
        release.wait(30)
        return "done"

    server = ControlServer(sock, {"slow": slow})
    server.start()
    try:
        t = threading.Thread(target=lambda: seen.update(result=call(sock, "slow", {})))
        t.start()
        assert inside.wait(10)
        assert server.foreground.busy()
        release.set()
        t.join(10)
        assert seen == {"result": "done"}
        # the server closes its side just after the client has read the answer
        assert wait_until(lambda: not server.foreground.busy(), timeout=10)
        assert server.foreground.step_aside() == 0.0
    finally:
        release.set()
        server.close(wait_seconds=2)


def test_capture_routes_wait_for_the_capture_code(tmp_path: Path, sample_db: Path,
                                                  isolated_env: dict[str, str]) -> None:
    """Until the start has loaded the capture code, ``add`` (one of CAPTURE_ROUTES)
    waits and changes nothing, while ``status`` is answered at once."""
    from conftest import write_config
    from opencode_memoryd.cli.main import load_app
    from opencode_memoryd.serve.runtime.daemon import Daemon
    from opencode_memoryd.usecases.service import Service

    cfg = write_config(tmp_path / "cfg.toml", f'[opencode]\ndb_paths = ["{sample_db}"]\n'
                       '[extraction]\nmode = "rules"\n')
    app = load_app(str(cfg), "run", False, isolated_env)
    d = Daemon(app)
    d.state, d.store = app.open_state(), app.open_store()
    try:
        d.service = Service(app, d.state, d.store)
        got: dict[str, Any] = {}
        payload = {"content": "I prefer tabs over spaces in every file.", "type": "user",
                   "scope": "user"}
        adding = threading.Thread(target=lambda: got.update(add=d.commands.route("add", payload)))
        adding.start()
        adding.join(0.3)
        assert adding.is_alive() and d.store.count() == 0
        assert d.commands.route("status", {})["daemon"] == {"running": False}
        d.shared.capture_loaded.set()
        adding.join(30)
        assert got["add"]["status"] == "added" and d.store.count() == 1
    finally:
        d.shared.capture_loaded.set()
        d.store.close()
        d.state.close()


def test_the_daemons_background_work_steps_aside_for_its_socket(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the daemon serves its control socket, the background work's ``step_aside``
    sees the commands in flight there (here an ``add`` waiting for the capture code)."""
    from conftest import write_config
    from opencode_memoryd.cli.main import load_app
    from opencode_memoryd.serve.control.protocol import socket_path
    from opencode_memoryd.serve.runtime.daemon import Daemon
    from opencode_memoryd.usecases.service import Service

    monkeypatch.setattr(priority, "PRIORITY_SECONDS", 600.0)  # however slow the machine
    cfg = write_config(tmp_path / "cfg.toml", f'[opencode]\ndb_paths = ["{sample_db}"]\n'
                       '[extraction]\nmode = "rules"\n')
    app = load_app(str(cfg), "run", False, isolated_env)
    d = Daemon(app)
    d.state, d.store = app.open_state(), app.open_store()
    try:
        d.service = Service(app, d.state, d.store)
        d.commands.start()
        payload = {"content": "I prefer tabs over spaces in every file.", "type": "user",
                   "scope": "user"}
        path = socket_path(app.state_dir, app.env)
        adding = threading.Thread(target=lambda: call(path, "add", payload))
        adding.start()
        fg = d.shared.foreground
        assert fg is not None
        assert wait_until(fg.busy, timeout=60)  # the add waits for the capture code
        d.shared.capture_loaded.set()
        adding.join(60)
        assert wait_until(lambda: not fg.busy(), timeout=60)
    finally:
        d.shared.capture_loaded.set()
        d.commands.close()
        d.store.close()
        d.state.close()
