"""A full disk: exit 1 with a message naming the folder and the space needed, nothing lost
(the mark does not move), and the next run after space returns does the work. Real
size-limited file systems (tmpfs) where the machine allows mounting, and the check itself
with an injected free-space probe."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import marks
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.disk import STORE_MIN_FREE_BYTES, FreeSpaceCache, require_free
from opencode_memoryd.errors import DiskFullError
from opencode_memoryd.models import Memory
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.usecases.service import open_local
from opencode_writer import OpenCodeWriter

SESSION = "ses_dfec43a4cffe5HkHVz7wUC8pgF"
MIB = 1024 * 1024


# --------------------------------------------------------------------- the check alone


def _memory(text: str) -> Memory:
    now = datetime.now(UTC)
    return Memory(id=str(uuid.uuid4()), content=text, type="project", scope="project",
                  project_id="p", project_root="/p", session_id="s", message_ids=["m"],
                  source="rules", created_at=now, updated_at=now)


def test_require_free_names_the_folder_and_the_space(tmp_path: Path) -> None:
    require_free(tmp_path, 10, free=lambda _p: 10)
    with pytest.raises(DiskFullError) as caught:
        require_free(tmp_path / "store", 32 * MIB, free=lambda _p: MIB // 2)
    msg = str(caught.value)
    assert str(tmp_path / "store") in msg
    assert "0.5 MiB free" in msg and "32.0 MiB needed" in msg


def test_a_roomy_reading_is_reused_for_a_second_a_tight_one_never(tmp_path: Path) -> None:
    readings: list[str] = []
    free = [10 * 1024 * MIB]
    clock = [100.0]

    def measure(path: Path) -> int:
        readings.append(str(path))
        return free[0]

    probe = FreeSpaceCache(measure, seconds=1.0, floor=1024 * MIB, clock=lambda: clock[0])
    store, state = tmp_path / "store", tmp_path / "state"
    assert [probe(store), probe(store), probe(state)] == [free[0]] * 3
    assert readings == [str(store), str(state)]  # one reading per folder
    free[0] = 100 * MIB  # filled up by someone else: seen once the reading is a second old
    clock[0] += 0.5
    assert probe(store) == 10 * 1024 * MIB
    clock[0] += 0.5
    assert probe(store) == 100 * MIB
    readings.clear()
    assert [probe(store), probe(store)] == [100 * MIB] * 2  # below the floor: measured
    assert readings == [str(store)] * 2
    free[0] = STORE_MIN_FREE_BYTES - 1
    with pytest.raises(DiskFullError):
        require_free(store, STORE_MIN_FREE_BYTES, free=probe)


def test_the_app_measures_through_the_cache(tmp_path: Path) -> None:
    app = App(config=load_config(None, {"HOME": str(tmp_path)}), env={"HOME": str(tmp_path)})
    assert isinstance(app.free_space, FreeSpaceCache)
    assert app.free_space(tmp_path) > 0


def test_the_embedded_store_refuses_to_write_without_room(tmp_path: Path) -> None:
    free = [STORE_MIN_FREE_BYTES - 1]
    with pytest.raises(DiskFullError):  # a new store: not even created
        EdgeStore(tmp_path / "q", free=lambda _p: free[0])
    assert not (tmp_path / "q").exists()
    free[0] = STORE_MIN_FREE_BYTES
    store = EdgeStore(tmp_path / "q", free=lambda _p: free[0])
    try:
        kept = _memory("The API base path is /api/v2.")
        store.upsert([kept])
        free[0] = STORE_MIN_FREE_BYTES - 1
        with pytest.raises(DiskFullError):
            store.upsert([_memory("Deploys need a green build.")])
        with pytest.raises(DiskFullError):
            store.delete([kept.id])
        assert [m.id for m in store.scroll(None)] == [kept.id]  # reads still work
        free[0] = STORE_MIN_FREE_BYTES
        store.upsert([_memory("Deploys need a green build.")])
        assert store.count() == 2
    finally:
        store.close()


def test_maintain_stops_before_the_llm_and_the_mark(config_file: Path, sample_db: Path,
                                                    state_db: Path) -> None:
    env = dict(os.environ)
    free = [128 * MIB]
    app = App(config=load_config(config_file, env), env=env, config_path=config_file,
              free_space=lambda _p: free[0])
    with open_local(app) as service:  # as the daemon: the store stays open
        service.maintain(directory=None, db=str(sample_db))
        before = marks(state_db)
        w = OpenCodeWriter(sample_db)
        w.append_turn(SESSION, "remember that release notes go in CHANGELOG.md")
        w.close()
        free[0] = 10 * MIB  # the disk fills up: enough for the state dir, not the store
        with pytest.raises(DiskFullError, match=r"qdrant: 10\.0 MiB free, 64\.0 MiB needed"):
            service.maintain(directory=None, db=str(sample_db))
        assert marks(state_db) == before
        free[0] = 2 * MIB  # and now for the state dir too
        with pytest.raises(DiskFullError, match=r"opencode-memoryd: 2\.0 MiB free, 4\.0 MiB"):
            service.maintain(directory=None, db=str(sample_db))
        free[0] = 128 * MIB  # space returns
        report = service.maintain(directory=None, db=str(sample_db))
    assert report["totals"]["added"] == 1 and marks(state_db)[SESSION] != before[SESSION]
    free[0] = 10 * MIB  # opening the store needs room too
    with pytest.raises(DiskFullError, match="qdrant"), open_local(app):
        pass


# --------------------------------------------------------------------- real full disks


def _mount(path: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` on ``path``; ``False`` where that is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700",
                               "tmpfs", str(path)], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


Mount = Callable[[Path, str], None]


@pytest.fixture
def tmpfs() -> Iterator[Mount]:
    """Mounts a tmpfs of a size on a folder (skips the test where that is not allowed);
    unmounted at the end."""
    mounted: list[Path] = []

    def mount(path: Path, size: str) -> None:
        if os.geteuid() != 0 or not _mount(path, size):
            pytest.skip("mounting a tmpfs is not permitted here")
        mounted.append(path)

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def _fill(folder: Path) -> Path:
    """Fill the file system under ``folder`` to the last byte."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    block = b"\0" * MIB
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError:
                break
        while True:  # the last partial block
            try:
                os.write(fd, b"\0" * 4096)
            except OSError:
                break
    finally:
        os.close(fd)
    return filler


def _run(cfg: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as its own process (a SIGBUS must not take the test run with it)."""
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "opencode_memoryd", "--config", str(cfg),
                           *args], env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("full", ["data", "state"])
def test_a_full_disk_fails_cleanly_and_recovers(full: str, tmpfs: Mount, config_file: Path,
                                                sample_db: Path, state_db: Path,
                                                isolated_env: dict[str, str]) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode-memoryd"
    state = state_db.parent
    folder = data if full == "data" else state
    tmpfs(folder, "128m" if full == "data" else "8m")
    first = _run(config_file, isolated_env, "maintain", "--all", "--db", str(sample_db))
    assert first.returncode == 0, first.stderr
    before = marks(state_db)
    w = OpenCodeWriter(sample_db)
    w.append_turn(SESSION, "remember that release notes go in CHANGELOG.md")
    w.close()
    filler = _fill(folder)

    failed = _run(config_file, isolated_env, "maintain", "--all", "--db", str(sample_db))
    assert failed.returncode == 1, (failed.returncode, failed.stderr)  # not a SIGBUS
    assert "not enough free space in" in failed.stderr
    assert str(folder) in failed.stderr and "MiB needed" in failed.stderr
    assert "Traceback" not in failed.stderr and "Logging error" not in failed.stderr
    assert marks(state_db) == before  # nothing lost: the turn is still unread

    filler.unlink()  # space returns
    again = _run(config_file, isolated_env, "maintain", "--all", "--db", str(sample_db),
                 "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["totals"]["added"] == 1
    assert marks(state_db)[SESSION] != before[SESSION]
    listed = _run(config_file, isolated_env, "list", "--json")
    assert sum("CHANGELOG.md" in m["content"] for m in json.loads(listed.stdout)) == 1
    with sqlite3.connect(state_db) as c:
        assert c.execute("SELECT count(*) FROM items WHERE status != 'stored'").fetchone() \
            == (0,)
