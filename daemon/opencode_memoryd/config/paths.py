"""Where things live: the XDG base directories, the config file, the state and store dirs.

Pure: every function reads the environment from its ``env`` mapping (``os.environ`` when
``None``) and touches no file. The rules themselves are in
:mod:`opencode_memoryd.config.xdg`, on plain strings (what a thin client uses to find the
state dir without loading the config schema or :mod:`pathlib`); here they give paths.

The XDG rules follow the XDG Base Directory Specification
(https://specifications.freedesktop.org/basedir-spec/latest/): a relative or empty
``$XDG_*_HOME`` is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from opencode_memoryd.config import xdg
from opencode_memoryd.config.xdg import (
    APP_NAME,
    CONFIG_ENV_VAR,
    effective_env,
    normalize_dir,
)

if TYPE_CHECKING:
    from opencode_memoryd.config.schema import Config

__all__ = [
    "APP_NAME",
    "CONFIG_ENV_VAR",
    "config_path",
    "configured_db_paths",
    "default_config_path",
    "effective_env",
    "expand_home",
    "normalize_dir",
    "opencode_data_dir",
    "state_dir",
    "store_dir",
    "xdg_config_home",
    "xdg_data_home",
    "xdg_state_home",
]


def expand_home(value: str, env: Mapping[str, str]) -> Path:
    """``value`` as a path, a leading ``~`` or ``~/`` expanded with ``HOME`` from ``env``.

    ``~user`` forms are expanded by :func:`os.path.expanduser`; other values are unchanged.
    """
    return Path(xdg.expand_home(value, env))


def xdg_config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME``, else ``$HOME/.config`` (empty or relative values are unset)."""
    return Path(xdg.xdg_home(env, "XDG_CONFIG_HOME", ".config"))


def xdg_data_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, else ``$HOME/.local/share`` (empty or relative values are unset)."""
    return Path(xdg.xdg_home(env, "XDG_DATA_HOME", ".local/share"))


def xdg_state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME``, else ``$HOME/.local/state`` (empty or relative values are unset)."""
    return Path(xdg.xdg_home(env, "XDG_STATE_HOME", ".local/state"))


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The XDG config file: ``xdg_config_home(env)/opencode-memoryd/config.toml``."""
    return Path(xdg.default_config_path(env))


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file read when no explicit path is given.

    ``$OPENCODE_MEMORYD_CONFIG`` (``~`` expanded) when set and non-empty, else
    :func:`default_config_path`. ``env`` defaults to ``os.environ``.
    """
    return Path(xdg.config_path(env))


def state_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """The daemon's state directory: ``state.dir``, else ``$XDG_STATE_HOME/opencode-memoryd``."""
    env = effective_env(env)
    return expand_home(cfg.state.dir, env) if cfg.state.dir else xdg_state_home(env) / APP_NAME


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
