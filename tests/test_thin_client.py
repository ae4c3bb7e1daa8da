"""The commands a running daemon serves, and ``--help``, load none of the heavy libraries
(config schema, store clients, LLM client, secret scanner, MCP SDK, logging): each runs in a
fresh interpreter that reports ``sys.modules`` after ``main()``. They skip the costlier
parts of the standard library too (``typing``, ``pathlib``, the ``socket`` module; a served
command :mod:`argparse` too), and no
command module but the one asked for; ``--help`` is printed from the command table, which
must say what the full parser says."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import start_daemon, wait_until, write_config
from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.main import _parser, top_level_parser
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir

HEAVY = ("sqlalchemy", "pydantic", "detect_secrets", "qdrant_client", "qdrant_edge", "openai",
         "mcp", "apscheduler", "starlette", "uvicorn", "structlog")
#: Standard-library modules the thin path does without (each costs milliseconds).
COSTLY_STDLIB = ("typing", "pathlib", "socket", "shutil", "dataclasses", "datetime",
                 "argparse", "gettext")
#: Every command module: a thin command loads its own alone, ``--help`` none.
COMMAND_MODULES = tuple(f"opencode_memoryd.cli.{m}" for m in (
    "context", "doctor", "dreams", "history", "maintain", "manage", "mcp", "memories",
    "opencode_setup", "reembed", "setup", "status", "web"))
PROBE = ("import contextlib, io, json, sys\n"
         "from opencode_memoryd.cli.main import main\n"
         "out = io.StringIO()\n"
         "with contextlib.redirect_stdout(out):\n"
         "    code = main(sys.argv[1:])\n"
         f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
         f"costly = [m for m in {COSTLY_STDLIB!r} if m in sys.modules]\n"
         f"commands = [m for m in {COMMAND_MODULES!r} if m in sys.modules]\n"
         "print(json.dumps({'code': code, 'heavy': heavy, 'costly': costly,\n"
         "                  'commands': commands, 'out': out.getvalue()}))\n")


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
    assert got["commands"] == []  # printed from the command table
    assert {"typing", "pathlib", "socket", "dataclasses", "shutil"}.isdisjoint(got["costly"])
    version = probe(isolated_env, "--version")
    assert version["code"] == 0 and version["commands"] == []


def test_a_command_help_still_comes_from_its_module(isolated_env: dict[str, str]) -> None:
    got = probe(isolated_env, "search", "--help")
    assert got["code"] == 0 and "--limit N" in str(got["out"])
    assert "opencode_memoryd.cli.memories" in got["commands"]


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(str(a.dest), a.help) for a in sub._choices_actions]


def test_the_command_table_is_the_full_parsers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same commands, order and help lines; the same top-level help at any width."""
    assert _subcommands(_parser()) == list(COMMANDS.items())
    assert _subcommands(top_level_parser()) == list(COMMANDS.items())
    for columns in ("40", "80", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        assert top_level_parser().format_help() == _parser().format_help()


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--version"], ["-v", "--help"],
                                  ["--config", "/nowhere.toml", "-h"]])
def test_top_level_help_and_version_match_the_full_parser(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from opencode_memoryd.cli.thin import fast_path

    assert fast_path(argv, {}) == 0
    fast = capsys.readouterr().out
    with pytest.raises(SystemExit) as full_exit:
        _parser().parse_args(argv)
    assert full_exit.value.code == 0
    assert fast == capsys.readouterr().out and fast


@pytest.mark.parametrize("argv", [[], ["-v"], ["--config", "--help"], ["--bogus", "--help"],
                                  ["list", "--help"], ["--helpful"]])
def test_anything_else_takes_the_full_way(argv: list[str]) -> None:
    from opencode_memoryd.cli.thin import asks_top_level

    assert not asks_top_level(argv)


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
        assert status["costly"] == [] and status["commands"] == ["opencode_memoryd.cli.status"]
        for cmd, module in ((["search", "pnpm"], "memories"), (["list"], "memories"),
                            (["context", "--dir", str(tmp_path)], "context")):
            got = probe(isolated_env, *base, *cmd)
            assert got["code"] == 0, (cmd, got)
            assert got["heavy"] == [], (cmd, got)
            assert got["costly"] == [], (cmd, got)
            assert got["commands"] == [f"opencode_memoryd.cli.{module}"], (cmd, got)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # without a daemon the same command loads the full application (and still works)
    local = probe(isolated_env, *base, "status", "--json")
    assert local["code"] == 0 and "pydantic" in local["heavy"]
    assert json.loads(str(local["out"]))["daemon"]["running"] is False


@pytest.mark.parametrize("columns", [None, "", "abc", "0", "-5", "123"])
def test_terminal_columns_is_shutils(columns: str | None,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from opencode_memoryd.cli.main import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
