"""Where things live: the XDG base directories, the config file, the state and store dirs,
the daemon's ``daemon.json`` and control sockets. The one module of path rules: the full
CLI, the daemon and the fast path (:mod:`opencode_memoryd.cli.thin`) all import it.

Import-light, as the fast path needs: at import only :mod:`os` and :mod:`json`; the rules
work on strings, and a function that gives a :class:`~pathlib.Path` imports :mod:`pathlib`
when called. Pure but for :func:`state_dir_from_file` and :func:`daemon_info` (which read
one file each): every function reads the environment from its ``env`` mapping
(``os.environ`` when ``None``).

The XDG rules follow the XDG Base Directory Specification
(https://specifications.freedesktop.org/basedir-spec/latest/): a relative or empty
``$XDG_*_HOME`` is ignored.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from opencode_memoryd.config.schema import Config

#: Directory name used under every XDG base directory.
APP_NAME = "opencode-memoryd"
#: Environment variable naming the config file (overrides the XDG default).
CONFIG_ENV_VAR = "OPENCODE_MEMORYD_CONFIG"
#: Environment variable naming the daemon's control socket (the MCP socket is beside it).
SOCKET_ENV_VAR = "OPENCODE_MEMORYD_SOCKET"
#: Written by a running daemon in its state dir: its pid and sockets.
DAEMON_INFO_FILE = "daemon.json"
#: The control socket's file name.
SOCKET_NAME = "control.sock"
#: The MCP socket's file name, beside the control socket.
MCP_SOCKET_NAME = "mcp.sock"
#: The folder under ``$XDG_RUNTIME_DIR`` that holds the sockets.
RUNTIME_SUBDIR = APP_NAME


def _path(text: str) -> Path:
    from pathlib import Path  # here: the fast path works on strings

    return Path(text)


# -- the rules, on strings ------------------------------------------------------------


def effective_env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    """``env``, or ``os.environ`` when it is ``None``."""
    return os.environ if env is None else env


def home_dir(env: Mapping[str, str]) -> str:
    """``$HOME`` from ``env``, else the account's home (:func:`os.path.expanduser`)."""
    return env.get("HOME", "") or os.path.expanduser("~")


def home_expanded(value: str, env: Mapping[str, str]) -> str:
    """``value`` with a leading ``~`` or ``~/`` expanded with ``HOME`` from ``env``.

    ``~user`` forms are expanded by :func:`os.path.expanduser`; other values are unchanged.
    """
    if value == "~" or value.startswith("~/"):
        return os.path.join(home_dir(env), value[2:])
    if value.startswith("~"):
        return os.path.expanduser(value)
    return value


def xdg_home(env: Mapping[str, str] | None, var: str, fallback: str) -> str:
    """``$var`` when it is an absolute path, else ``fallback`` under the home directory
    (e.g. ``xdg_home(env, "XDG_STATE_HOME", ".local/state")``)."""
    env = effective_env(env)
    value = env.get(var, "")
    # The XDG spec: relative values are invalid and must be ignored, as are empty ones.
    if value and os.path.isabs(value):
        return value
    return os.path.join(home_dir(env), fallback)


def config_file(env: Mapping[str, str] | None = None) -> str:
    """:func:`config_path` as a string."""
    env = effective_env(env)
    named = env.get(CONFIG_ENV_VAR, "")
    if named:
        return home_expanded(named, env)
    return os.path.join(xdg_home(env, "XDG_CONFIG_HOME", ".config"), APP_NAME, "config.toml")


def default_state_dir(env: Mapping[str, str] | None = None) -> str:
    """The state dir when the config names none: ``$XDG_STATE_HOME/opencode-memoryd``."""
    return os.path.join(xdg_home(env, "XDG_STATE_HOME", ".local/state"), APP_NAME)


def state_dir_of(configured: str, env: Mapping[str, str]) -> str:
    """The state dir for the config's ``[state] dir`` value ``configured``: it, ``~``
    expanded, else (empty) :func:`default_state_dir`. The daemon's and the fast path's
    rule (:func:`state_dir`, :func:`state_dir_from_file`)."""
    return home_expanded(configured, env) if configured else default_state_dir(env)


def normalize_dir(directory: str) -> str:
    """An absolute, normalised folder path (``~`` expanded); the folder need not exist.
    A relative one is taken in this process's working directory."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(directory)))


def state_dir_from_file(explicit: str | None, env: Mapping[str, str]) -> str | None:
    """The state dir the full config would give, read from the config file alone
    (``[state] dir``; :mod:`tomllib` imported only when the file mentions ``dir``).

    Args:
        explicit: ``--config PATH`` (``~`` expanded here), else the file named by the
            environment or the XDG default (:func:`config_file`).
        env: the environment.

    Returns:
        The state dir; ``None`` when this cannot be told without the full config (an
        explicit file that is missing, a file that is not valid TOML, a ``state.dir`` that
        is not a string): the caller then loads the config, which says what is wrong.
    """
    explicit = home_expanded(explicit, env) if explicit else None
    path = explicit or config_file(env)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        if explicit is not None or env.get(CONFIG_ENV_VAR):
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
    return state_dir_of(value, env)


def daemon_info(state_dir: str) -> dict[str, Any]:
    """``daemon.json`` of the state dir (``{}`` when absent or unreadable)."""
    try:
        with open(os.path.join(state_dir, DAEMON_INFO_FILE), encoding="utf-8") as f:
            info = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


# -- the same rules as paths ----------------------------------------------------------


def expand_home(value: str, env: Mapping[str, str]) -> Path:
    """:func:`home_expanded` as a path."""
    return _path(home_expanded(value, env))


def xdg_config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME``, else ``$HOME/.config`` (empty or relative values are unset)."""
    return _path(xdg_home(env, "XDG_CONFIG_HOME", ".config"))


def xdg_data_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, else ``$HOME/.local/share`` (empty or relative values are unset)."""
    return _path(xdg_home(env, "XDG_DATA_HOME", ".local/share"))


def xdg_state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME``, else ``$HOME/.local/state`` (empty or relative values are unset)."""
    return _path(xdg_home(env, "XDG_STATE_HOME", ".local/state"))


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The XDG config file: ``xdg_config_home(env)/opencode-memoryd/config.toml``."""
    return xdg_config_home(env) / APP_NAME / "config.toml"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file read when no explicit path is given.

    ``$OPENCODE_MEMORYD_CONFIG`` (``~`` expanded) when set and non-empty, else
    :func:`default_config_path`. ``env`` defaults to ``os.environ``.
    """
    return _path(config_file(env))


def state_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """The daemon's state directory: ``state.dir``, else ``$XDG_STATE_HOME/opencode-memoryd``."""
    return _path(state_dir_of(cfg.state.dir, effective_env(env)))


def store_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """The embedded Qdrant store directory: ``qdrant.path``, else
    ``$XDG_DATA_HOME/opencode-memoryd/qdrant``. Meaningful only when ``qdrant.url`` is empty.
    """
    env = effective_env(env)
    if cfg.qdrant.path:
        return expand_home(cfg.qdrant.path, env)
    return xdg_data_home(env) / APP_NAME / "qdrant"


def configured_db_paths(cfg: Config, env: Mapping[str, str] | None = None) -> list[Path]:
    """``opencode.db_paths`` as paths, ``~`` expanded; empty when databases are to be found
    in :func:`opencode_data_dir` instead. No filesystem access.
    """
    env = effective_env(env)
    return [expand_home(p, env) for p in cfg.opencode.db_paths]


def opencode_data_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's data directory: ``opencode.data_dir``, else ``$XDG_DATA_HOME/opencode``."""
    env = effective_env(env)
    if cfg.opencode.data_dir:
        return expand_home(cfg.opencode.data_dir, env)
    return xdg_data_home(env) / "opencode"


# -- the daemon's sockets -------------------------------------------------------------


def socket_path(state_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where the control socket lives.

    Args:
        state_dir: the daemon's state folder, used when no runtime folder is set.
        env: the environment to read (default ``os.environ``).

    Returns:
        ``$XDG_RUNTIME_DIR/opencode-memoryd/control.sock`` when ``XDG_RUNTIME_DIR`` is set
        to an absolute path, else ``<state_dir>/control.sock``. A path too long for an
        ``AF_UNIX`` address (over 100 bytes) is replaced by
        ``<tmp>/opencode-memoryd-<uid>/<hash of the state dir>.sock`` (its folder is 0700).
        The daemon records the path it used in ``daemon.json``, so clients never guess.
    """
    import hashlib
    import tempfile

    runtime = effective_env(env).get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        path = _path(runtime) / RUNTIME_SUBDIR / SOCKET_NAME
    else:
        path = _path(str(state_dir)) / SOCKET_NAME
    if len(os.fsencode(str(path))) > 100:
        resolved = _path(str(state_dir)).resolve()
        digest = hashlib.sha256(os.fsencode(str(resolved))).hexdigest()[:16]
        path = (_path(tempfile.gettempdir()) / f"opencode-memoryd-{os.getuid()}"
                / f"{digest}.sock")
    return path


def mcp_socket_path(control: Path) -> Path:
    """The MCP socket next to the control socket ``control`` (see
    :mod:`opencode_memoryd.serve.mcp.host`): ``mcp.sock`` beside ``control.sock``, else
    ``<control stem>-mcp.sock`` (a shortened socket path)."""
    if control.name == SOCKET_NAME:
        return control.with_name(MCP_SOCKET_NAME)
    return control.with_name(control.stem + "-mcp.sock")
