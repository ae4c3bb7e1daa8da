"""A state dir or store this user may not use (left root's by one `sudo` run, or on a
read-only file system): every command says which folder and the command that fixes it,
with exit 78 and no traceback, and `doctor` runs and fails its `file-modes` check.

As root (containers, CI) a mode does not stop anyone, so a folder is made read-only with
a read-only bind mount and made another user's with `chown`; without root, with `chmod`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import cli
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir

ROOT = os.geteuid() == 0


def _chmod_tree(folder: Path, dirs: int, files: int) -> None:
    for here, subdirs, names in os.walk(folder, topdown=False):
        for n in names:
            os.chmod(os.path.join(here, n), files)
        for n in subdirs:
            os.chmod(os.path.join(here, n), dirs)
    os.chmod(folder, dirs)


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """``read_only(folder)``: the folder and everything in it cannot be written."""
    undo: list[Callable[[], None]] = []

    def make(folder: Path) -> None:
        if not ROOT:
            _chmod_tree(folder, 0o500, 0o400)
            undo.append(lambda: _chmod_tree(folder, 0o700, 0o600))
            return
        done = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)],
                              capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"no read-only bind mount here: {done.stderr!r}")
        undo.append(lambda: subprocess.run(["umount", str(folder)], check=True))

    yield make
    for step in reversed(undo):
        step()


@pytest.fixture
def not_yours() -> Iterator[Callable[[Path], None]]:
    """``not_yours(folder)``: the folder's files are another user's (as root: chowned to
    uid 65534), or out of this user's reach (without root)."""
    undo: list[Callable[[], None]] = []

    def make(folder: Path) -> None:
        if ROOT:
            subprocess.run(["chown", "-R", "65534", str(folder)], check=True)
            undo.append(lambda: subprocess.run(["chown", "-R", str(os.geteuid()),
                                                str(folder)], check=True))
        else:
            _chmod_tree(folder, 0o500, 0o400)
            undo.append(lambda: _chmod_tree(folder, 0o700, 0o600))

    yield make
    for step in reversed(undo):
        step()


def _doctor(cfg: Path) -> tuple[int, dict[str, Any]]:
    code, out = cli("--config", str(cfg), "doctor", "--json")
    return code, {c["name"]: c for c in json.loads(out)["checks"]}


def test_a_read_only_state_dir_is_named_with_its_fix_not_a_traceback(
        config_file: Path, state_db: Path, read_only: Callable[[Path], None],
        capsys: Any) -> None:
    assert cli("--config", str(config_file), "add", "I prefer tabs.", "--user")[0] == 0
    read_only(state_db.parent)
    capsys.readouterr()
    code, out = cli("--config", str(config_file), "list")
    err = capsys.readouterr().err
    assert code == 78 and out == ""
    assert f"cannot use {state_db.parent}/" in err and "fix: " in err
    assert "Traceback" not in err and "internal error" not in err
    # doctor runs all the same and says what is wrong
    code, checks = _doctor(config_file)
    assert code == 1
    assert checks["file-modes"]["status"] == "fail"
    assert str(state_db.parent) in checks["file-modes"]["detail"]
    assert not [c for c in checks.values() if "the check itself failed" in c["detail"]]


def test_a_store_left_to_another_user_fails_doctors_file_modes_with_chown(
        config_file: Path, isolated_env: dict[str, str],
        not_yours: Callable[[Path], None]) -> None:
    assert cli("--config", str(config_file), "add", "I prefer tabs.", "--user")[0] == 0
    store = store_dir(load_config(config_file, isolated_env), isolated_env)
    not_yours(store)
    _, checks = _doctor(config_file)
    modes = checks["file-modes"]
    assert modes["status"] == "fail" and str(store) in modes["detail"]
    assert modes["fix"].startswith("sudo chown -R ") and modes["fix"].endswith(str(store))


def test_a_read_only_store_is_named_with_its_fix(
        config_file: Path, isolated_env: dict[str, str], read_only: Callable[[Path], None],
        capsys: Any) -> None:
    assert cli("--config", str(config_file), "add", "I prefer tabs.", "--user")[0] == 0
    store = store_dir(load_config(config_file, isolated_env), isolated_env)
    read_only(store)
    capsys.readouterr()
    code, out = cli("--config", str(config_file), "search", "tabs", "--json")
    error = json.loads(out)["error"]
    assert (code, error["exit_code"]) == (78, 78)
    assert error["message"].startswith(f"cannot use {store}/") and "fix: " in error["message"]
    assert "Traceback" not in capsys.readouterr().err
