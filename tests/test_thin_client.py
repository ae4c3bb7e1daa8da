"""The commands a running daemon serves, and ``--help``, load none of the heavy libraries
(config schema, store clients, LLM client, secret scanner, MCP SDK): each runs in a fresh
interpreter that reports ``sys.modules`` after ``main()``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import start_daemon, wait_until, write_config
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir

HEAVY = ("sqlalchemy", "pydantic", "detect_secrets", "qdrant_client", "qdrant_edge", "openai",
         "mcp", "apscheduler", "starlette", "uvicorn")
PROBE = ("import contextlib, io, json, sys\n"
         "from opencode_memoryd.cli.main import main\n"
         "out = io.StringIO()\n"
         "with contextlib.redirect_stdout(out):\n"
         "    code = main(sys.argv[1:])\n"
         f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
         "print(json.dumps({'code': code, 'heavy': heavy, 'out': out.getvalue()}))\n")


def probe(env: dict[str, str], *args: str) -> dict[str, object]:
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=full, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_help_loads_no_heavy_library(isolated_env: dict[str, str]) -> None:
    got = probe(isolated_env, "--help")
    assert got["code"] == 0 and "search" in str(got["out"])
    assert got["heavy"] == []


@pytest.mark.slow
def test_commands_served_by_the_daemon_load_no_heavy_library(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path / "cfg.toml", f'db_paths = ["{sample_db}"]\n'
                       '[extraction]\nmode = "rules"\n'.replace("db_paths", "[opencode]\n"
                                                                "settle_seconds = 0\ndb_paths"))
    proc = start_daemon(cfg, isolated_env)
    try:
        info = state_dir(load_config(cfg, isolated_env), isolated_env) / "daemon.json"
        assert wait_until(info.exists, timeout=60)
        base = ("--config", str(cfg))
        status = probe(isolated_env, *base, "status", "--json")
        assert status["heavy"] == [] and status["code"] == 0
        assert json.loads(str(status["out"]))["daemon"]["running"] is True  # served
        for cmd in (["search", "pnpm"], ["list"], ["context", "--dir", str(tmp_path)]):
            got = probe(isolated_env, *base, *cmd)
            assert got["code"] == 0, (cmd, got)
            assert got["heavy"] == [], (cmd, got)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # without a daemon the same command loads the full application (and still works)
    local = probe(isolated_env, *base, "status", "--json")
    assert local["code"] == 0 and "pydantic" in local["heavy"]
    assert json.loads(str(local["out"]))["daemon"]["running"] is False
