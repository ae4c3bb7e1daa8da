"""The path rules live in one module (``config/paths.py``) that the fast path and the full
path both import: the state dir the fast path reads from the config file alone is the one
the full config gives, and importing the module stays light."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, state_dir_from_file

#: ``[state] dir`` lines of a config file ("" : the file says nothing of it).
STATE_LINES = ["", '[state]\ndir = "/srv/memoryd-state"\n', '[state]\ndir = "~/mstate"\n',
               '[state]\ndir = ""\n', '[extraction]\nmode = "rules"\n# dir of nothing\n']


@pytest.mark.parametrize("text", STATE_LINES)
@pytest.mark.parametrize("how", ["explicit", "env", "xdg", "explicit-tilde"])
def test_the_fast_path_finds_the_state_dir_the_full_config_gives(
        text: str, how: str, isolated_env: dict[str, str]) -> None:
    env = dict(isolated_env)
    home = Path(env["HOME"])
    where = {"explicit": home / "a.toml", "env": home / "b.toml",
             "xdg": Path(env["XDG_CONFIG_HOME"]) / "opencode-memoryd" / "config.toml",
             "explicit-tilde": home / "c.toml"}[how]
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(text, encoding="utf-8")
    explicit: str | None = None
    if how == "explicit":
        explicit = str(where)
    elif how == "explicit-tilde":
        explicit = "~/c.toml"
    elif how == "env":
        env["OPENCODE_MEMORYD_CONFIG"] = "~/b.toml"
    full = load_config(Path(explicit).expanduser() if explicit else None, env)
    assert state_dir_from_file(explicit, env) == str(state_dir(full, env))


def test_an_empty_config_option_reads_the_default_file(isolated_env: dict[str, str]) -> None:
    assert state_dir_from_file("", isolated_env) == str(state_dir(load_config(None,
                                                                              isolated_env),
                                                                  isolated_env))


def test_the_path_module_imports_no_pathlib_or_typing(isolated_env: dict[str, str]) -> None:
    probe = ("import sys, json\nimport opencode_memoryd.config.paths as p\n"
             "p.state_dir_from_file(None, {'HOME': sys.argv[1]})\n"
             "print(json.dumps([m for m in ('pathlib', 'typing', 'tomllib') "
             "if m in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", probe, isolated_env["HOME"]],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == []
