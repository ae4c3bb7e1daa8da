"""Memories are their owner's alone: the data and state folders are 0700 and every file in
them 0600, for a new installation and for one an earlier version left readable."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SAMPLE_DB, cli, cli_json

NOBODY = "nobody"
#: found now, before the tests narrow PATH
RUNUSER = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")


def _tree(root: Path) -> Iterator[Path]:
    yield root
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            yield Path(dirpath, name)


def _loose(root: Path) -> list[str]:
    """Every entry under ``root`` (itself included) that another user could use."""
    out = []
    for p in _tree(root):
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_IMODE(st.st_mode) & 0o077:  # any bit for the group or others
            out.append(f"{oct(stat.S_IMODE(st.st_mode))} {p}")
    return out


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A HOME that other users can walk into (0755 all the way down to the XDG folders,
    as on many systems), so only our own folders' modes keep them out."""
    top = Path(tempfile.mkdtemp(prefix="memoryd-perm-", dir="/tmp"))
    top.chmod(0o755)
    env = {"HOME": str(top), "XDG_CONFIG_HOME": str(top / ".config"),
           "XDG_DATA_HOME": str(top / ".local/share"),
           "XDG_STATE_HOME": str(top / ".local/state")}
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        Path(env[key]).mkdir(parents=True)
    for p in _tree(top):
        p.chmod(0o755)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    db = top / ".local/share/opencode/opencode.db"
    db.parent.mkdir()
    shutil.copyfile(SAMPLE_DB, db)
    try:
        yield env
    finally:
        shutil.rmtree(top)


def _ours(env: dict[str, str]) -> tuple[Path, Path]:
    return (Path(env["XDG_DATA_HOME"]) / "opencode-memoryd",
            Path(env["XDG_STATE_HOME"]) / "opencode-memoryd")


def test_a_new_installation_is_private(home: dict[str, str], tmp_path: Path) -> None:
    os.umask(0o022)  # the usual login umask
    cfg = tmp_path / "c.toml"
    cfg.write_text("[opencode]\nsettle_seconds = 0\n[extraction]\nmode = \"rules\"\n")
    assert cli_json("--config", str(cfg), "maintain", "--all")["totals"]["added"] == 3
    data, state = _ours(home)
    assert (data / "qdrant" / "shard").is_dir() and (state / "state.db").is_file()
    assert (state / "opencode-memoryd.log").is_file()
    assert _loose(data) == [] and _loose(state) == []


def test_an_installation_left_readable_is_repaired_on_open(
        home: dict[str, str], tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[opencode]\nsettle_seconds = 0\n[extraction]\nmode = \"rules\"\n")
    cli_json("--config", str(cfg), "maintain", "--all")
    data, state = _ours(home)
    for root in (data, state):  # as an earlier version left them
        for p in _tree(root):
            p.chmod(0o755 if p.is_dir() else 0o644)
    assert len(_loose(data)) > 20 and _loose(state)
    code, _ = cli("--config", str(cfg), "list")
    assert code == 0
    assert _loose(data) == [] and _loose(state) == []


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    assert RUNUSER is not None
    return subprocess.run([RUNUSER, "-u", NOBODY, "--", *argv], capture_output=True,
                          text=True, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0 or RUNUSER is None,
                    reason="needs root and runuser to act as another user")
def test_another_user_cannot_read_memories(home: dict[str, str], tmp_path: Path) -> None:
    try:
        probe = _as_nobody("true")
    except OSError as exc:
        pytest.skip(f"runuser unusable here: {exc}")
    if probe.returncode != 0:
        pytest.skip(f"runuser -u {NOBODY} unusable here: {probe.stderr.strip()}")
    os.umask(0o022)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[opencode]\nsettle_seconds = 0\n[extraction]\nmode = \"rules\"\n")
    cli_json("--config", str(cfg), "maintain", "--all")
    data, state = _ours(home)
    # the other user reaches our folders' parents (the premise) ...
    assert _as_nobody("ls", str(data.parent)).returncode == 0
    assert _as_nobody("ls", str(state.parent)).returncode == 0
    # ... and reads nothing of ours: not the memories, not the marks, not the log
    payload = next((data / "qdrant" / "shard").rglob("page_0.dat"))
    for target in (data / "qdrant" / "store.json", payload, state / "state.db",
                   state / "opencode-memoryd.log"):
        denied = _as_nobody("cat", str(target))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, target
    assert _as_nobody("ls", str(data)).returncode != 0
