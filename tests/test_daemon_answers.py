"""What `status` and `doctor` say about a running daemon: the facts each project got
since the daemon started (not the last session's count, `+0` after a backfill), and a
config file edited under it (taken up by a restart in place when it is valid, refused and
said when it is not) and SIGHUP. A real daemon
over a copy of the real OpenCode sample database."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import cli, cli_json, start_daemon, wait_until, write_config

CONFIG = """
[opencode]
settle_seconds = 0.2
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 0.3
max_wait_seconds = 30
sweep_interval_seconds = 5
poll_interval_seconds = 0.2
"""


@pytest.fixture
def cfg(tmp_path: Path, isolated_env: dict[str, str]) -> Path:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    (data / "opencode.db").write_bytes(
        (Path(__file__).parent / "fixtures" / "opencode-sample.db").read_bytes())
    return write_config(tmp_path / "daemon.toml", CONFIG)


@pytest.fixture
def daemon(cfg: Path, isolated_env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = start_daemon(cfg, isolated_env)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _caught_up(cfg: Path) -> bool:
    d = cli_json("--config", str(cfg), "status")["daemon"]
    return bool(d.get("running") and not d["catching_up"] and d["databases"]
                and not d["pending_count"] and d["last_extraction"])


def test_status_counts_what_each_project_got_since_the_start(
        daemon: subprocess.Popen[str], cfg: Path) -> None:
    assert wait_until(lambda: _caught_up(cfg), 120)
    stored = Counter(m["project_root"] for m in cli_json("--config", str(cfg), "list")
                     if m["scope"] == "project" and m["provenance"] != "generated")
    extraction = cli_json("--config", str(cfg), "status")["daemon"]["last_extraction"]
    got = {e["project_root"]: e["added_since_start"] for e in extraction.values()}
    assert sum(got.values()) == sum(stored.values()) > 0
    assert {root: n for root, n in got.items() if n} == dict(stored)
    code, out = cli("--config", str(cfg), "status")
    assert code == 0
    for root, n in stored.items():
        assert f"{root} at " in out and f"(+{n} since the daemon started" in out


def test_an_edited_config_is_taken_up_by_a_restart_in_place(
        daemon: subprocess.Popen[str], cfg: Path) -> None:
    assert wait_until(lambda: cli_json("--config", str(cfg), "status")["daemon"]
                      .get("running"), 120)
    before = cli_json("--config", str(cfg), "status")["daemon"]
    assert before["config_changed"] is False and before["web"] is None
    # an invalid edit is refused: the daemon keeps its config, and says why
    write_config(cfg, CONFIG + "[web]\nenabled = true\nport = 70000\n")
    assert wait_until(lambda: cli_json("--config", str(cfg), "status")["daemon"]
                      .get("config_error"), 60)
    d = cli_json("--config", str(cfg), "status")["daemon"]
    assert d["pid"] == before["pid"] == daemon.pid and d["since"] == before["since"]
    assert "port" in d["config_error"]
    code, out = cli("--config", str(cfg), "status")
    assert code == 0 and "the edited config file is not valid" in out, out
    code, _ = cli("--config", str(cfg), "doctor")
    assert code == 78  # doctor reads the file itself: a config error, named on stderr
    # a valid edit is taken up: the same process starts again with it (the web page on)
    write_config(cfg, CONFIG + "[web]\nenabled = true\nport = 0\n")

    def restarted() -> bool:
        d = cli_json("--config", str(cfg), "status")["daemon"]
        return bool(d.get("running") and d["since"] != before["since"] and d["web"])

    assert wait_until(restarted, 120)
    d = cli_json("--config", str(cfg), "status")["daemon"]
    assert d["pid"] == daemon.pid and daemon.poll() is None
    assert d["config_changed"] is False and d["config_error"] is None
    assert d["web"].startswith("http://127.0.0.1:")


def test_sighup_restarts_the_daemon_in_place(
        daemon: subprocess.Popen[str], cfg: Path) -> None:
    assert wait_until(lambda: cli_json("--config", str(cfg), "status")["daemon"]
                      .get("running"), 120)
    since = cli_json("--config", str(cfg), "status")["daemon"]["since"]
    # SIGHUPs that arrive while it restarts are served by the next image, never fatal
    for _ in range(30):
        daemon.send_signal(signal.SIGHUP)
        time.sleep(0.1)
    assert daemon.poll() is None

    def restarted() -> bool:
        d = cli_json("--config", str(cfg), "status")["daemon"]
        return bool(d.get("running") and d["since"] != since)

    assert wait_until(restarted, 120)
    assert cli_json("--config", str(cfg), "status")["daemon"]["pid"] == daemon.pid
    assert daemon.poll() is None
