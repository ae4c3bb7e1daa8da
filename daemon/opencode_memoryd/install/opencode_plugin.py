"""The OpenCode plugin file: where each OpenCode version looks for it, its text, which
OpenCode is installed, and which daemon socket the plugin will find.

One file serves OpenCode 1.x and 2.x (``templates/opencode-plugin.js``): its default export
is ``{ id, server, setup }``. OpenCode 1.18.29 and later call ``server``; 2.x calls
``setup``. Nothing in it depends on the machine: the plugin finds the daemon's socket when
a session asks (:func:`plugin_socket` mirrors its rules), so the same bytes are written
whatever shell runs ``install-opencode``.

Where the file goes (:func:`plugin_dirs`):

- ``$XDG_CONFIG_HOME/opencode/plugin/`` (default ``~/.config/opencode/plugin/``): both
  versions load every ``*.js``/``*.ts`` file of the ``plugin`` and ``plugins`` folders of
  their global config folder. Sources: the 1.18.33 binary (config directories
  ``[Path.config, ..., OPENCODE_CONFIG_DIR]``); anomalyco/opencode dbc74f5b
  ``packages/core/src/plugin/discovery.ts`` and 8ff468ab
  ``packages/core/src/plugin/source-directory.ts`` (2.x: ``names = ["plugin",
  "plugins"]``, files ending in ``.ts``/``.js``).
- ``$OPENCODE_CONFIG_DIR/plugin/`` when that variable is set: 2.x uses that folder *instead
  of* the global one (6345810 ``packages/util/src/global.ts``: ``config:
  process.env.OPENCODE_CONFIG_DIR ?? Path.config``), 1.x reads it *besides* the global one.
  The file then goes there alone, so 1.x does not load it twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from opencode_memoryd.config.paths import (
    APP_NAME,
    SOCKET_ENV_VAR,
    daemon_info,
    state_dir_from_file,
    xdg_config_home,
)

__all__ = [
    "CONFIG_DIR_ENV_VAR",
    "PLUGIN_FILE_NAME",
    "PLUGIN_HEADER",
    "PLUGIN_ID",
    "SOCKET_ENV_VAR",
    "describe_socket_search",
    "is_our_plugin",
    "opencode_version",
    "plugin_dirs",
    "plugin_path",
    "plugin_socket",
    "render_plugin",
    "socket_candidates",
    "version_note",
]

#: The plugin's file name in OpenCode's ``plugin/`` folder.
PLUGIN_FILE_NAME = f"{APP_NAME}.js"
#: How the first line of the plugin starts; tells our file from someone else's.
PLUGIN_HEADER = "// opencode-memoryd plugin."
#: The ``id`` of the default export (OpenCode 2.x lists plugins by it).
PLUGIN_ID = APP_NAME
#: OpenCode's own variable for its config folder (see the module docstring).
CONFIG_DIR_ENV_VAR = "OPENCODE_CONFIG_DIR"
#: The first 1.x release that loads a default export ``{ id, server }``.
FIRST_DEFAULT_EXPORT_1X = (1, 18, 29)

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def plugin_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """The ``plugin/`` folders the file may be in, the one :func:`plugin_path` writes first:
    ``$OPENCODE_CONFIG_DIR/plugin`` (when set to an absolute path), then
    ``$XDG_CONFIG_HOME/opencode/plugin``."""
    env = os.environ if env is None else env
    default = xdg_config_home(env) / "opencode" / "plugin"
    named = env.get(CONFIG_DIR_ENV_VAR, "")
    if named and os.path.isabs(named):
        return [Path(named) / "plugin", default]
    return [default]


def plugin_path(env: Mapping[str, str] | None = None) -> Path:
    """Where :func:`~.opencode.install` writes the plugin (``env``: default os.environ)."""
    return plugin_dirs(env)[0] / PLUGIN_FILE_NAME


def render_plugin() -> str:
    """The plugin's JavaScript: the same text on every machine (nothing is filled in)."""
    source = resources.files("opencode_memoryd.install").joinpath(
        "templates", "opencode-plugin.js")
    return source.read_text(encoding="utf-8")


def is_our_plugin(text: str | None) -> bool:
    """Whether a plugin file's text is one opencode-memoryd wrote (its first line)."""
    return text is not None and text.startswith(PLUGIN_HEADER)


# --------------------------------------------------------------------------------------
# Which OpenCode
# --------------------------------------------------------------------------------------


def opencode_version(env: Mapping[str, str] | None = None, *,
                     timeout_seconds: float = 20.0) -> str | None:
    """``opencode --version`` of the ``opencode`` on ``env``'s ``PATH`` (e.g.
    ``"1.18.33"``), or ``None`` when there is none or it gives no version in time."""
    env = os.environ if env is None else env
    program = shutil.which("opencode", path=env.get("PATH", os.defpath))
    if program is None:
        return None
    try:
        done = subprocess.run([program, "--version"], env=dict(env), capture_output=True,
                              text=True, timeout=timeout_seconds, stdin=subprocess.DEVNULL,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION_RE.search(done.stdout)
    return found.group(0) if done.returncode == 0 and found else None


def version_note(version: str | None) -> str:
    """What the installed OpenCode does with the plugin, in a few words."""
    if version is None:
        return "no `opencode` on PATH; the file suits OpenCode 1.18.29 and later, and 2.x"
    found = _VERSION_RE.search(version)
    parts = tuple(int(x) for x in found.groups()) if found else (0, 0, 0)
    if parts[0] >= 2:
        return f"OpenCode {version} loads it through setup()"
    if parts >= FIRST_DEFAULT_EXPORT_1X:
        return f"OpenCode {version} loads it through server()"
    return (f"OpenCode {version} cannot load it (1.18.29 or later is needed): "
            "upgrade OpenCode")


# --------------------------------------------------------------------------------------
# Which socket the plugin finds
# --------------------------------------------------------------------------------------


def _state_dir(env: Mapping[str, str]) -> str:
    found = state_dir_from_file(None, env)
    if found is None:  # the plugin then reads no `[state] dir` either
        from opencode_memoryd.config.paths import default_state_dir

        return default_state_dir(env)
    return found


def socket_candidates(env: Mapping[str, str], uid: int | None = None) -> list[str]:
    """Where the plugin, run with environment ``env``, looks for the daemon's control
    socket, in order (the same rules as ``socketCandidates`` of the plugin):
    ``$OPENCODE_MEMORYD_SOCKET`` alone when set; else the ``socket`` of ``daemon.json`` in
    the state dir, ``$XDG_RUNTIME_DIR/opencode-memoryd/control.sock``,
    ``/run/user/<uid>/opencode-memoryd/control.sock``, ``<state dir>/control.sock`` and
    ``<tmp>/opencode-memoryd-<uid>/<hash>.sock``."""
    override = env.get(SOCKET_ENV_VAR, "")
    if override:
        return [override]
    uid = os.getuid() if uid is None else uid
    state = _state_dir(env)
    found: list[str] = []
    named = daemon_info(state).get("socket")
    if isinstance(named, str) and named:
        found.append(named)
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        found.append(os.path.join(runtime, APP_NAME, "control.sock"))
    found.append(os.path.join("/run/user", str(uid), APP_NAME, "control.sock"))
    found.append(os.path.join(state, "control.sock"))
    digest = hashlib.sha256(os.fsencode(os.path.realpath(state))).hexdigest()[:16]
    tmp = env.get("TMPDIR") or tempfile.gettempdir()
    found.append(os.path.join(tmp, f"{APP_NAME}-{uid}", f"{digest}.sock"))
    return found


def _own_socket(path: str, uid: int) -> bool:
    try:
        folder = os.lstat(os.path.dirname(path))
        file = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(folder.st_mode) and folder.st_uid == uid
            and folder.st_mode & 0o077 == 0 and stat.S_ISSOCK(file.st_mode)
            and file.st_uid == uid)


def plugin_socket(env: Mapping[str, str] | None = None) -> Path | None:
    """The socket the plugin would talk to in a process with environment ``env`` (default
    os.environ): the first of :func:`socket_candidates` that is a socket of this user's in
    a folder of this user's closed to others, or ``None``."""
    env = os.environ if env is None else env
    uid = os.getuid()
    for path in socket_candidates(env, uid):
        if os.path.isabs(path) and _own_socket(path, uid):
            return Path(path)
    return None


def describe_socket_search(env: Mapping[str, str]) -> str:
    """The candidates of :func:`socket_candidates` as one line, for messages."""
    return ", ".join(json.dumps(p) for p in socket_candidates(env))
