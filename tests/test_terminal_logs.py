"""Log lines a person reads: `run` on a terminal prints structlog's console lines (levels
coloured, no APScheduler chatter) while the log file keeps JSON lines; a command that
fails prints one clear error line, not the JSON events that led to it."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import cli, llm_section, write_config

ANSI = "\x1b["


def _read_until(fd: int, needle: bytes, proc: subprocess.Popen[bytes],
                timeout: float = 120.0) -> bytes:
    """What the terminal got, up to and including ``needle`` (or the daemon's end)."""
    out = b""
    end = time.monotonic() + timeout
    while needle not in out and proc.poll() is None and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def test_run_on_a_terminal_prints_coloured_console_lines_and_the_file_stays_json(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path / "c.toml", '[extraction]\nmode = "rules"\n')
    main, tty = pty.openpty()
    env = {**os.environ, **isolated_env, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "opencode_memoryd", "--config", str(cfg),
                             "run"], stdin=subprocess.DEVNULL, stdout=tty, stderr=tty,
                            env=env)
    os.close(tty)
    try:
        shown = _read_until(main, b"catch_up_queued", proc)
        proc.send_signal(signal.SIGTERM)
        shown += _read_until(main, b"daemon_stopped", proc)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    text = shown.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    assert any("daemon_started" in line for line in lines), text[-2000:]
    assert not [line for line in lines if line.lstrip().startswith("{")]
    assert ANSI in text  # levels and keys coloured
    assert "Adding job" not in text and "Scheduler started" not in text
    log = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "opencode-memoryd.log"
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert "daemon_started" in events and "daemon_stopped" in events


def test_a_failing_maintain_prints_one_error_line(
        tmp_path: Path, sample_db: Path, capfd: Any) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now

    class Gone:
        base_url = f"http://127.0.0.1:{port}/v1"

    cfg = write_config(tmp_path / "c.toml", '[extraction]\nmode = "llm"\n'
                       + llm_section(Gone()))
    capfd.readouterr()
    code, _ = cli("--config", str(cfg), "maintain", "--all", "--db", str(sample_db),
                  env={**os.environ, "TEST_LLM_KEY": "k"})
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert code == 1
    assert len(err) == 1, err
    assert err[0].startswith("opencode-memoryd: ") and "unreachable" in err[0]
