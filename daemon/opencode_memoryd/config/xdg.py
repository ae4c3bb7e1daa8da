"""The rules of :mod:`opencode_memoryd.config.paths` on plain strings.

Where the config file is, and the XDG base directories, computed with :mod:`os.path` alone:
the commands a running daemon serves find the state dir with these (through
:mod:`opencode_memoryd.config.light`) without importing :mod:`pathlib`, and
:mod:`~opencode_memoryd.config.paths` wraps each result in a :class:`~pathlib.Path`, so
the rules exist once. Pure: every function reads the environment from its ``env`` mapping
(``os.environ`` when ``None``) and touches no file.

The XDG rules follow the XDG Base Directory Specification
(https://specifications.freedesktop.org/basedir-spec/latest/): a relative or empty
``$XDG_*_HOME`` is ignored.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Mapping

#: Directory name used under every XDG base directory.
APP_NAME = "opencode-memoryd"
#: Environment variable naming the config file (overrides the XDG default).
CONFIG_ENV_VAR = "OPENCODE_MEMORYD_CONFIG"


def effective_env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    """``env``, or ``os.environ`` when it is ``None``."""
    return os.environ if env is None else env


def home_dir(env: Mapping[str, str]) -> str:
    """``$HOME`` from ``env``, else the account's home (:func:`os.path.expanduser`)."""
    return env.get("HOME", "") or os.path.expanduser("~")


def expand_home(value: str, env: Mapping[str, str]) -> str:
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


def default_config_path(env: Mapping[str, str] | None = None) -> str:
    """The XDG config file: ``$XDG_CONFIG_HOME/opencode-memoryd/config.toml``."""
    return os.path.join(xdg_home(env, "XDG_CONFIG_HOME", ".config"), APP_NAME, "config.toml")


def config_path(env: Mapping[str, str] | None = None) -> str:
    """The config file read when no explicit path is given: ``$OPENCODE_MEMORYD_CONFIG``
    (``~`` expanded) when set and non-empty, else :func:`default_config_path`."""
    env = effective_env(env)
    named = env.get(CONFIG_ENV_VAR, "")
    return expand_home(named, env) if named else default_config_path(env)


def default_state_dir(env: Mapping[str, str] | None = None) -> str:
    """The state dir when the config names none: ``$XDG_STATE_HOME/opencode-memoryd``."""
    return os.path.join(xdg_home(env, "XDG_STATE_HOME", ".local/state"), APP_NAME)


def normalize_dir(directory: str) -> str:
    """An absolute, normalised folder path (``~`` expanded); the folder need not exist."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(directory)))
