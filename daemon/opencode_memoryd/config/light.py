"""Finding a running daemon without loading the config schema.

A command the daemon serves (and the ``mcp`` relay) only needs the state dir, where
``daemon.json`` names the daemon's sockets. The state dir is ``[state] dir`` of the config
file, else ``$XDG_STATE_HOME/opencode-memoryd``; reading that one key costs a file read
(and ``tomllib`` only when the file mentions ``dir`` at all), where validating the whole
config costs the schema library's import. Paths are plain strings (:mod:`pathlib` is not
imported on this path either).
"""

from __future__ import annotations

import json
import os

from opencode_memoryd.config.xdg import config_path, default_state_dir, expand_home

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Written by a running daemon in its state dir: its pid and sockets.
DAEMON_INFO_FILE = "daemon.json"


def light_state_dir(explicit: str | None, env: Mapping[str, str]) -> str | None:
    """The state dir the full config would give, read from the config file alone.

    Args:
        explicit: ``--config PATH`` (``~`` expanded), else the file named by the
            environment or the XDG default (:func:`~opencode_memoryd.config.xdg.config_path`).
        env: the environment.

    Returns:
        The state dir; ``None`` when this cannot be told without the full config (an
        explicit file that is missing, a file that is not valid TOML, a ``state.dir`` that
        is not a string): the caller then loads the config, which says what is wrong.
    """
    path = explicit or config_path(env)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
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
    return expand_home(value, env) if value else default_state_dir(env)


def daemon_info(state_dir: str) -> dict[str, Any]:
    """``daemon.json`` of the state dir (``{}`` when absent or unreadable)."""
    try:
        with open(os.path.join(state_dir, DAEMON_INFO_FILE), encoding="utf-8") as f:
            info = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}
