"""What `web` says when no page answers: the port is another program's (and the setting
to change), or the daemon started before `[web]` was enabled (restart it)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import cli, start_daemon, wait_until, write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.service import open_local
from opencode_memoryd.web.server import start_web


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    try:
        yield int(other.getsockname()[1])
    finally:
        other.close()


def test_a_taken_port_is_said_with_the_setting_to_change(
        tmp_path: Path, isolated_env: dict[str, str], taken_port: int,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path / "c.toml", '[extraction]\nmode = "rules"\n'
                       f"[web]\nenabled = true\nport = {taken_port}\n")
    app = App(config=load_config(cfg, None), env=dict(isolated_env))
    with open_local(app) as service:  # this process stands for the daemon
        assert start_web(service, app.config.web, app.state_dir) is None
        code, out = cli("--config", str(cfg), "web", "--print")
    err = capsys.readouterr().err
    assert code == 1 and out == ""
    assert f"127.0.0.1:{taken_port} is taken by another program" in err
    assert "set `[web] port`" in err and "no daemon serves" not in err


def test_web_enabled_under_a_running_daemon_says_restart_it(
        tmp_path: Path, isolated_env: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path / "c.toml", '[extraction]\nmode = "rules"\n')
    info = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "daemon.json"
    proc = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: info.exists() or proc.poll() is not None, 120)
        pid = json.loads(info.read_text())["pid"]
        write_config(cfg, '[extraction]\nmode = "rules"\n[web]\nenabled = true\n')
        code, _ = cli("--config", str(cfg), "web", "--print")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    err = capsys.readouterr().err
    assert code == 1
    assert f"the daemon (pid {pid}) started before `[web] enabled = true`: restart it" in err
