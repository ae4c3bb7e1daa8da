"""`[embedding] provider = "fastembed"` without the fastembed package: `run` exits 78
(the code the service files do not restart on) with a command that installs it, and
`doctor` fails its `embedder` check (it skipped while no store existed)."""

from __future__ import annotations

import json
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from conftest import cli, start_daemon, write_config

pytestmark = pytest.mark.skipif(find_spec("fastembed") is not None,
                                reason="fastembed is installed here")


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", '[extraction]\nmode = "rules"\n',
                        embedding='[embedding]\nprovider = "fastembed"\n')


def test_run_exits_78_with_a_command_that_installs_it(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    proc = start_daemon(cfg, isolated_env, capture=True)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 78, err[-2000:]
    assert f"{sys.executable} -m pip install 'fastembed>=0.4'" in err
    assert "opencode-memoryd[fastembed]" not in err


def test_doctor_fails_the_embedder_check(cfg: Path) -> None:
    code, out = cli("--config", str(cfg), "doctor", "--json")
    (check,) = [c for c in json.loads(out)["checks"] if c["name"] == "embedder"]
    assert code == 1 and check["status"] == "fail"
    assert "pip install 'fastembed>=0.4'" in check["fix"]

