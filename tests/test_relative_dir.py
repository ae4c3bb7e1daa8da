"""A relative ``--dir`` means the folder of the shell that typed it, also when a running
daemon (whose working directory is elsewhere) serves the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from test_mcp import World, world  # noqa: F401  (the MCP tests' running daemon)

pytestmark = pytest.mark.slow

PNPM = "Always use pnpm, never npm."


def cli_json(w: World, cwd: Path, *args: str) -> Any:
    """Run the CLI in ``cwd`` (not the daemon's working directory) and decode its JSON."""
    done = subprocess.run([sys.executable, "-m", "opencode_memoryd", *args, "--json"],
                          cwd=cwd, env=w.env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_list_and_search_read_the_folder_of_the_shell(world: World) -> None:  # noqa: F811
    sub = world.project / "src" / "deep"
    sub.mkdir(parents=True, exist_ok=True)
    listed = cli_json(world, world.project, "list", "--dir", ".")
    assert PNPM in [m["content"] for m in listed]
    found = cli_json(world, sub, "search", "package manager pnpm", "--dir", "../..")
    assert PNPM in [h["content"] for h in found]


def test_history_defaults_to_the_folder_of_the_shell(world: World) -> None:  # noqa: F811
    sessions = cli_json(world, world.project, "history", "sessions")
    assert world.session in [s["id"] for s in sessions]
