"""Connect OpenCode to opencode-memoryd: a global plugin file and an ``mcp`` config entry.

:func:`install` writes two things into OpenCode's global config:

- **the plugin** ``plugin/opencode-memoryd.js`` (:mod:`.opencode_plugin`: one file for
  OpenCode 1.x and 2.x, in ``$OPENCODE_CONFIG_DIR/plugin/`` when that is set, else
  ``$XDG_CONFIG_HOME/opencode/plugin/``). OpenCode loads every file of that folder at
  start-up. Once per session the plugin asks the daemon (``GET /v1/context``) for a block
  of memories and puts the same text into the system prompt of every model request of
  that session. The file names no socket: the plugin finds the daemon's when it asks.
- **the MCP server** ``mcp.memoryd`` in the global config file (in
  ``$OPENCODE_CONFIG_DIR`` when that is set, else ``$XDG_CONFIG_HOME/opencode/``, default
  ``~/.config/opencode/``):
  ``{"type": "local", "command": [<program>, "mcp"], "environment": {...}, "enabled": true}``.
  ``environment`` holds the variables that decide which config and state the program
  uses (:data:`~.service.PINNED_ENV_VARS`, as for the service files), so the MCP server
  finds the same daemon as the service does.

The config file is the first that exists of ``opencode.jsonc``, ``opencode.json`` and
``config.json``. OpenCode's config loader merges ``config.json``, then ``opencode.json``,
then ``opencode.jsonc`` (so the first of our list wins), and its ``globalConfigFile``
writes OpenCode's own changes to that same file. When none exists, ``opencode.json`` is
created with a ``$schema`` line and the entry. The file is JSONC; it is edited with
:mod:`.jsonc`, so its comments, trailing commas, newlines and indentation and every other
key stay as they were, and the result is checked to parse to the old value plus the entry
before it is written. Files are replaced atomically (a temporary file, then a rename); a symlinked
config file stays a symlink, its target is replaced.

:func:`uninstall` removes exactly what :func:`install` added: the plugin file of ours in
each folder of :func:`~.opencode_plugin.plugin_dirs`, and the ``memoryd`` entry from each
of the three config files of both config folders; an ``mcp`` object left empty is removed
too, and a config file left exactly as :func:`install` creates it minus the entry is
deleted. Installing twice
changes nothing the second time ("unchanged"), and so does uninstalling twice.

Ownership: a plugin file is ours when its first line starts with :data:`PLUGIN_HEADER`;
an ``mcp.memoryd`` entry is ours when its command is ``[<program>, "mcp"]`` and the program
is this one, an ``opencode-memoryd`` executable or ``<python> -m opencode_memoryd``.
Without ``force``, :func:`install` refuses to replace anything else and :func:`uninstall`
leaves it in place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from opencode_memoryd.config.paths import APP_NAME
from opencode_memoryd.errors import InstallRefusedError
from opencode_memoryd.install import jsonc
from opencode_memoryd.install.files import (
    FileChange,
    InstallReport,
    Plan,
    carry_out,
    plan_change,
    read_text,
    unchanged,
)
from opencode_memoryd.install.opencode_plugin import (
    PLUGIN_FILE_NAME,
    PLUGIN_HEADER,
    SOCKET_ENV_VAR,
    plugin_dirs,
    plugin_path,
    render_plugin,
)
from opencode_memoryd.install.opencode_plugin import is_our_plugin as _is_our_plugin
from opencode_memoryd.install.service import default_executable, pinned_env, program_argv

__all__ = [
    "CONFIG_FILE_NAMES",
    "MCP_SERVER_NAME",
    "PLUGIN_FILE_NAME",
    "PLUGIN_HEADER",
    "SOCKET_ENV_VAR",
    "FileChange",
    "InstallReport",
    "Installed",
    "config_path",
    "inspect",
    "install",
    "mcp_entry",
    "plugin_path",
    "render_plugin",
    "uninstall",
]

#: The key under ``mcp``; OpenCode names the tools ``memoryd_<tool>``.
MCP_SERVER_NAME = "memoryd"
#: The global config files OpenCode reads, the one whose values win first.
CONFIG_FILE_NAMES = ("opencode.jsonc", "opencode.json", "config.json")

_SCHEMA_URL = "https://opencode.ai/config.json"
_NEW_CONFIG = '{\n  "$schema": "' + _SCHEMA_URL + '"\n}\n'
_ENTRY_PATH = ("mcp", MCP_SERVER_NAME)
_BOM = "\ufeff"

# --------------------------------------------------------------------------------------
# Paths and rendering
# --------------------------------------------------------------------------------------


def _opencode_dirs(env: Mapping[str, str]) -> list[Path]:
    """OpenCode's global config folders, the one written first: ``$OPENCODE_CONFIG_DIR``
    when set (2.x reads only that one, 1.x reads it too), ``$XDG_CONFIG_HOME/opencode``."""
    return [folder.parent for folder in plugin_dirs(env)]


def _opencode_dir(env: Mapping[str, str]) -> Path:
    return _opencode_dirs(env)[0]


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The global OpenCode config file :func:`install` edits (see the module docstring)."""
    folder = _opencode_dir(os.environ if env is None else env)
    for name in CONFIG_FILE_NAMES:
        if (folder / name).exists():
            return folder / name
    return folder / "opencode.json"


def mcp_entry(executable: str, env: Mapping[str, str]) -> dict[str, object]:
    """The ``mcp.memoryd`` value: runs ``<executable> mcp`` with the pinned variables.

    ``executable`` is a command line in shell syntax whose first word is an absolute
    path (see :func:`~.service.program_argv`); ``environment`` holds the
    :data:`~.service.PINNED_ENV_VARS` set in ``env`` and is left out when there are none.

    Raises:
        ValueError: a bad ``executable``, or a control character in a pinned value.
    """
    entry: dict[str, object] = {"type": "local", "command": [*program_argv(executable), "mcp"]}
    environment = dict(pinned_env(env))
    if environment:
        entry["environment"] = environment
    entry["enabled"] = True
    return entry


def _is_our_entry(entry: object, argv: list[str]) -> bool:
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    if not isinstance(command, list) or len(command) < 2 or command[-1] != "mcp":
        return False
    program = command[:-1]
    return (program == argv[:-1] or os.path.basename(str(program[0])) == APP_NAME
            or program[1:] == ["-m", "opencode_memoryd"])


# --------------------------------------------------------------------------------------
# Install / uninstall
# --------------------------------------------------------------------------------------


def install(
    *,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    executable: str | None = None,
    force: bool = False,
) -> InstallReport:
    """Write the plugin and the ``mcp.memoryd`` entry (see the module docstring). The
    plugin's text is the same whatever the environment: it names no socket.

    Args:
        dry_run: compute the report (with diffs) but write nothing.
        env: the environment for ``XDG_CONFIG_HOME``/``HOME`` and the pinned variables
            (default ``os.environ``).
        executable: the program, in shell syntax (default :func:`~.service.default_executable`).
        force: replace a plugin file or ``memoryd`` entry that opencode-memoryd did not write.

    Raises:
        InstallRefusedError: the config file is not JSONC, not UTF-8, its top level or
            ``mcp`` is not an object, or (without ``force``) the plugin file or the entry
            is someone else's. Nothing was written.
        ValueError: a bad ``executable``.
        RuntimeError: no ``executable`` given and :func:`~.service.default_executable`
            cannot tell the program.
        OSError: a file cannot be read or written.
    """
    env = os.environ if env is None else env
    exe = default_executable() if executable is None else executable
    entry = mcp_entry(exe, env)
    argv = [*program_argv(exe), "mcp"]
    plans = [_plan_plugin(plugin_path(env), render_plugin(), force=force),
             _plan_config_install(config_path(env), entry, argv, force=force)]
    return carry_out(plans, dry_run=dry_run)


def uninstall(
    *,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    executable: str | None = None,
    force: bool = False,
) -> InstallReport:
    """Remove the plugin files and the ``mcp.memoryd`` entries that :func:`install` wrote.

    Each folder of :func:`~.opencode_plugin.plugin_dirs` is looked at (a file written
    before ``$OPENCODE_CONFIG_DIR`` was set goes too).
    Every one of :data:`CONFIG_FILE_NAMES` that exists is looked at; the report lists the
    ones that change, or :func:`config_path` as unchanged. A plugin file or entry that is
    not ours is left in place with a ``note``, unless ``force``. ``executable`` (default
    :func:`~.service.default_executable`) only helps to recognise our entry.

    Raises:
        InstallRefusedError: one of the config files is not UTF-8 JSONC, or its top level
            is not an object. Nothing was written.
        ValueError: a bad ``executable``.
        RuntimeError: no ``executable`` given and :func:`~.service.default_executable`
            cannot tell the program.
        OSError: a file cannot be read, written or removed.
    """
    env = os.environ if env is None else env
    exe = default_executable() if executable is None else executable
    argv = [*program_argv(exe), "mcp"]
    plans = []
    for folder in plugin_dirs(env):
        path = folder / PLUGIN_FILE_NAME
        old = read_text(path)
        if old is None:
            continue
        if _is_our_plugin(old) or force:
            plans.append(plan_change(path, "plugin", old, None))
        else:
            plans.append(unchanged(path, "plugin",
                                   "not written by opencode-memoryd; left in place"))
    plans = plans or [unchanged(plugin_path(env), "plugin")]
    configs = [_plan_config_uninstall(folder / name, argv, force=force)
               for folder in _opencode_dirs(env) for name in CONFIG_FILE_NAMES
               if (folder / name).exists()]
    configs = [p for p in configs if p.change.action != "unchanged" or p.change.note]
    return carry_out(plans + (configs or [unchanged(config_path(env), "config")]),
                      dry_run=dry_run)


@dataclass(frozen=True, slots=True)
class Installed:
    """What :func:`inspect` found: the plugin (``current``: ours, as :func:`render_plugin`
    renders it; ``outdated``: ours, of another version; ``foreign``;
    ``missing``) and the ``mcp.memoryd`` entry (``ours``; ``disabled``: ours with
    ``enabled`` false; ``foreign``; ``missing``; ``unreadable``: see ``problem``), with the
    entry's ``command``."""

    plugin_path: Path
    plugin: str
    config_path: Path
    entry: str
    command: list[str] | None = None
    problem: str | None = None


def inspect(*, env: Mapping[str, str] | None = None) -> Installed:
    """What :func:`install` left in place: the plugin file and the ``mcp.memoryd`` entry,
    judged by the ownership rules of the module docstring. Reads; never writes.

    Raises:
        OSError: a file exists but cannot be read.
    """
    env = os.environ if env is None else env
    ppath, cpath = plugin_path(env), config_path(env)
    text = read_text(ppath)
    plugin = ("missing" if text is None else "foreign" if not _is_our_plugin(text)
              else "current" if text == render_plugin() else "outdated")
    try:
        raw = _read_config(cpath)
        current = {} if raw is None else _load(cpath, _split_bom(raw)[1])
    except InstallRefusedError as e:
        return Installed(ppath, plugin, cpath, "unreadable", problem=e.reason)
    mcp = current.get("mcp")
    entry = mcp.get(MCP_SERVER_NAME) if isinstance(mcp, dict) else None
    try:
        argv = [*program_argv(default_executable()), "mcp"]
    except (RuntimeError, ValueError):
        argv = []
    command = entry.get("command") if isinstance(entry, dict) else None
    found = ("missing" if entry is None else "foreign" if not _is_our_entry(entry, argv)
             else "disabled" if isinstance(entry, dict) and entry.get("enabled") is False
             else "ours")
    return Installed(ppath, plugin, cpath, found,
                     [str(c) for c in command] if isinstance(command, list) else None)


# --------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------


def _plan_plugin(path: Path, text: str, *, force: bool) -> Plan:
    old = read_text(path)
    if old is not None and not _is_our_plugin(old) and not force:
        raise InstallRefusedError(
            str(path), "this plugin file was not written by opencode-memoryd; "
                       "move it away or install with force")
    return plan_change(path, "plugin", old, text)


def _plan_config_install(path: Path, entry: dict[str, object], argv: list[str], *,
                         force: bool) -> Plan:
    old = _read_config(path)
    bom, body = _split_bom(_NEW_CONFIG if old is None else old)
    current = _load(path, body)
    mcp = current.get("mcp", {})
    if not isinstance(mcp, dict):
        raise InstallRefusedError(str(path), '"mcp" is not an object')
    existing = mcp.get(MCP_SERVER_NAME)
    if existing == entry:
        return unchanged(path, "config")
    if existing is not None and not force and not _is_our_entry(existing, argv):
        raise InstallRefusedError(
            str(path), f'"mcp.{MCP_SERVER_NAME}" was not written by opencode-memoryd; '
                       "rename it or install with force")
    new = _edit(path, body, lambda t: jsonc.set_member(t, _ENTRY_PATH, entry))
    _check(path, new, [{**current, "mcp": {**mcp, MCP_SERVER_NAME: entry}}])
    return plan_change(path, "config", old, bom + new)


def _plan_config_uninstall(path: Path, argv: list[str], *, force: bool) -> Plan:
    old = _read_config(path)
    if old is None:
        return unchanged(path, "config")
    bom, body = _split_bom(old)
    current = _load(path, body)
    mcp = current.get("mcp")
    if not isinstance(mcp, dict) or MCP_SERVER_NAME not in mcp:
        return unchanged(path, "config")
    if not force and not _is_our_entry(mcp[MCP_SERVER_NAME], argv):
        return unchanged(path, "config", f'"mcp.{MCP_SERVER_NAME}" was not written by '
                                          "opencode-memoryd; left in place")
    new = _edit(path, body, lambda t: jsonc.remove_member(t, _ENTRY_PATH))
    rest = {k: v for k, v in mcp.items() if k != MCP_SERVER_NAME}
    allowed = [{**current, "mcp": rest}]
    if not rest:  # an mcp object left empty goes too
        allowed.append({k: v for k, v in current.items() if k != "mcp"})
    _check(path, new, allowed)
    if bom + new == _NEW_CONFIG and not path.is_symlink():  # created by install: remove
        return plan_change(path, "config", old, None)
    return plan_change(path, "config", old, bom + new)


def _split_bom(text: str) -> tuple[str, str]:
    return (_BOM, text[1:]) if text.startswith(_BOM) else ("", text)


def _load(path: Path, body: str) -> dict[str, object]:
    try:
        value = jsonc.loads(body)
    except ValueError as e:
        raise InstallRefusedError(str(path), f"not valid JSONC: {e}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InstallRefusedError(str(path), "the top-level value is not an object")
    return value


def _edit(path: Path, body: str, edit: Callable[[str], str]) -> str:
    try:
        return edit(body)
    except ValueError as e:
        raise InstallRefusedError(str(path), f"cannot edit the file: {e}") from None


def _check(path: Path, new: str, allowed: list[dict[str, object]]) -> None:
    try:
        value = jsonc.loads(new)
    except ValueError as e:  # pragma: no cover - a bug in the editor
        raise InstallRefusedError(str(path), f"the edited text would not parse: {e}") from None
    if value not in allowed:  # pragma: no cover - a bug in the editor
        raise InstallRefusedError(str(path), "the edit would change more than the entry")


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def _read_config(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InstallRefusedError(str(path), f"not UTF-8 text ({e.reason} at byte "
                                             f"{e.start})") from None
