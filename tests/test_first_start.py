"""A fresh daemon and a command opening the embedded store at the same moment: one of
them creates the store, the other waits for it (or is served by the daemon), and both
work afterwards. Run under load (two busy processes beside them), where the two starts
overlap most."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SAMPLE_DB, start_daemon, write_config

pytestmark = pytest.mark.slow

ROUNDS = 50


@pytest.fixture(scope="module")
def load() -> Iterator[None]:
    """Two processes spinning on a core each for the module's tests."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for p in busy:
        p.kill()
        p.wait()


def status(cfg: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``opencode-memoryd status --json`` as its own process."""
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "opencode_memoryd", "--config", str(cfg), "status", "--json"],
        env=full, capture_output=True, text=True, timeout=100)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_first_start_and_status_at_the_same_moment(
        round_: int, load: None, tmp_path: Path, isolated_env: dict[str, str]) -> None:
    db = tmp_path / "opencode.db"
    db.write_bytes(SAMPLE_DB.read_bytes())
    cfg = write_config(tmp_path / "config.toml",
                       f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{db}"]\n'
                       '[extraction]\nmode = "rules"\n')
    daemon = start_daemon(cfg, isolated_env)
    try:
        first = status(cfg, isolated_env)
        second = status(cfg, isolated_env)
        assert first.returncode == 0, first.stderr
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["daemon"]["running"] is True
        assert daemon.poll() is None, "the daemon stopped"
    finally:
        daemon.kill()
        daemon.wait()
