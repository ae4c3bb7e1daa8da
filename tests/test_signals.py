"""A SIGTERM at any moment stops the daemon within 10 s (exit 0), also right after the
process was stopped and continued (SIGSTOP, SIGCONT): the kernel may then hand the signal
to a thread other than the main one, which must not delay or lose it."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, cli, start_daemon, wait_until, write_config

pytestmark = pytest.mark.slow

#: How long a SIGTERM may take to stop the daemon (s).
STOP_SECONDS = 10
ROUNDS = 20


def _idle(cfg: Path, state_dir: Path) -> bool:
    """The daemon serves its control socket, caught up and with nothing queued: its main
    thread sleeps until the next change or its loop's timeout."""
    if not (state_dir / "daemon.json").exists():
        return False
    code, out = cli("--config", str(cfg), "status", "--json")
    if code != 0:
        return False
    info = json.loads(out)["daemon"]
    return bool(info.get("running")) and not info["catching_up"] and not info["pending_count"]


def test_sigterm_after_sigstop_and_sigcont_stops_the_daemon(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    db = Path(isolated_env["XDG_DATA_HOME"]) / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "opencode-sample.db", db)
    cfg = write_config(tmp_path / "daemon.toml", '[extraction]\nmode = "rules"\n')
    stopped = 0
    for _ in range(ROUNDS):
        proc = start_daemon(cfg, isolated_env)
        try:
            assert wait_until(lambda: _idle(cfg, state_db.parent), timeout=60)
            proc.send_signal(signal.SIGSTOP)
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                assert proc.wait(timeout=STOP_SECONDS) == 0
            except subprocess.TimeoutExpired:
                pytest.fail(f"a SIGTERM was still not served after {STOP_SECONDS} s, "
                            f"after {stopped} round(s) that were")
            stopped += 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert stopped == ROUNDS
