"""A WAL-mode OpenCode database on a read-only mount is read: SQLite cannot create its
``-shm`` file there, so ``mode=ro`` alone fails to open it. The mount is a real read-only
bind mount in a user and mount namespace of the test's own (``unshare``), since ``root``
ignores file modes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, write_config

UNSHARE = shutil.which("unshare")


def _can_mount_read_only(tmp_path: Path) -> bool:
    if UNSHARE is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run([UNSHARE, "-rm", "sh", "-c",
                           f'mount --bind -o ro "{probe}" "{probe}" && touch "{probe}/x"'],
                          capture_output=True, check=False)
    return done.returncode != 0 and b"Read-only file system" in done.stderr


def test_a_wal_database_on_a_read_only_mount_is_read(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("no user and mount namespaces here (unshare -rm)")
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "opencode.db"
    shutil.copyfile(FIXTURES / "opencode-sample.db", db)
    with sqlite3.connect(db) as c:  # OpenCode's mode; closed cleanly: no -wal, no -shm
        assert c.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    assert sorted(p.name for p in folder.iterdir()) == ["opencode.db"]
    cfg = write_config(tmp_path / "config.toml", '[extraction]\nmode = "rules"\n')
    env = {**os.environ, **isolated_env, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = (f'mount --bind -o ro "{folder}" "{folder}" && exec "{sys.executable}" -m '
           f'opencode_memoryd --config "{cfg}" maintain --all --db "{db}" --json')
    done = subprocess.run([str(UNSHARE), "-rm", "sh", "-c", run], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == 0 and report["totals"]["sessions"] == 13
    assert report["totals"]["added"] == 3
