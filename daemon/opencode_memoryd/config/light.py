"""Finding a running daemon without loading the config schema.

A command the daemon serves (and the ``mcp`` relay) only needs the state dir, where
``daemon.json`` names the daemon's sockets. The state dir is ``[state] dir`` of the config
file, else ``$XDG_STATE_HOME/opencode-memoryd``; reading that one key costs a file read
(and ``tomllib`` only when the file mentions ``dir`` at all), where validating the whole
config costs the schema library's import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opencode_memoryd.config.paths import APP_NAME, config_path, expand_home, xdg_state_home

#: Written by a running daemon in its state dir: its pid and sockets.
DAEMON_INFO_FILE = "daemon.json"


def light_state_dir(explicit: Path | None, env: Mapping[str, str]) -> Path | None:
    """The state dir the full config would give, read from the config file alone.

    Args:
        explicit: ``--config PATH``, else the file named by the environment or the XDG
            default (:func:`~opencode_memoryd.config.paths.config_path`).
        env: the environment.

    Returns:
        The state dir; ``None`` when this cannot be told without the full config (an
        explicit file that is missing, a file that is not valid TOML, a ``state.dir`` that
        is not a string): the caller then loads the config, which says what is wrong.
    """
    path = explicit or config_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit is not None or env.get("OPENCODE_MEMORYD_CONFIG"):
            return None
        text = ""
    except (OSError, UnicodeDecodeError):
        return None
    value: Any = ""
    if "dir" in text:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        state = data.get("state", {})
        value = state.get("dir", "") if isinstance(state, dict) else None
        if not isinstance(value, str):
            return None
    value = value.strip()
    return expand_home(value, env) if value else xdg_state_home(env) / APP_NAME


def daemon_info(state_dir: Path) -> dict[str, Any]:
    """``daemon.json`` of the state dir (``{}`` when absent or unreadable)."""
    try:
        info = json.loads((state_dir / DAEMON_INFO_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}
