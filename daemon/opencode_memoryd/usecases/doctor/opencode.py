"""``plugin`` and ``mcp``: what ``install-opencode`` writes is in place and current
(:func:`opencode_memoryd.install.opencode.inspect`)."""

from __future__ import annotations

import os
from pathlib import Path

from opencode_memoryd.config.paths import CONFIG_ENV_VAR
from opencode_memoryd.install.opencode import MCP_SERVER_NAME, inspect
from opencode_memoryd.install.opencode_plugin import (
    SOCKET_ENV_VAR,
    describe_socket_search,
    plugin_socket,
)
from opencode_memoryd.usecases.doctor.model import FAIL, OK, WARN, Check, Context

_INSTALL = ("`opencode-memoryd install` (or `install-opencode` for this step alone), then "
            "restart OpenCode")


def opencode_checks(ctx: Context) -> list[Check]:
    """``plugin`` then ``mcp``."""
    found = inspect(env=ctx.app.env)
    path = found.plugin_path
    plugin = {
        "current": Check("plugin", OK, f"{path}"),
        "outdated": Check("plugin", WARN, f"{path} was written by another version",
                          _INSTALL),
        "foreign": Check("plugin", WARN, f"{path} was not written by opencode-memoryd",
                         f"move it away, then {_INSTALL}"),
        "missing": Check("plugin", WARN, f"not installed ({path}): new OpenCode sessions "
                                         "get no memories", _INSTALL),
    }[found.plugin]
    checks = [plugin]
    if found.plugin in ("current", "outdated"):
        checks.append(_plugin_socket(ctx))
    return [*checks, _mcp(found.entry, found.config_path, found.command, found.problem)]


def _plugin_socket(ctx: Context) -> Check:
    """Which socket the plugin finds in OpenCode's process: with this environment, and
    without ``XDG_RUNTIME_DIR`` (OpenCode started from ``su -``, cron or a desktop entry),
    compared with the socket of the running daemon."""
    daemon = ctx.probes.daemon.socket
    if daemon is None or not ctx.probes.daemon.running:
        return Check("plugin socket", OK, "no daemon runs; the plugin looks for one when "
                                          "a session starts")
    env = dict(ctx.app.env)
    bare = {k: v for k, v in env.items() if k != "XDG_RUNTIME_DIR"}
    misses = [label for label, e in (("this environment", env),
                                     ("an environment without XDG_RUNTIME_DIR", bare))
              if (plugin_socket(e) or "") != Path(daemon)]
    if not misses:
        return Check("plugin socket", OK, f"OpenCode's process finds {daemon}, with or "
                                          "without XDG_RUNTIME_DIR")
    return Check("plugin socket", WARN,
                 f"in {' and '.join(misses)} the plugin would not find the daemon's "
                 f"socket {daemon} (it looks at {describe_socket_search(bare)})",
                 f"set {SOCKET_ENV_VAR}={daemon} (or {CONFIG_ENV_VAR} to this config "
                 "file) in OpenCode's environment")


def _mcp(entry: str, config: os.PathLike[str], command: list[str] | None,
         problem: str | None) -> Check:
    key = f"mcp.{MCP_SERVER_NAME}"
    if entry == "unreadable":
        return Check("mcp", WARN, f"{config} cannot be read: {problem}",
                     "fix the file (OpenCode cannot read it either)")
    if entry == "missing":
        return Check("mcp", WARN, f"no {key} entry in {config}: the agent has no memory tool",
                     _INSTALL)
    if entry == "foreign":
        return Check("mcp", WARN, f"{key} in {config} was not written by opencode-memoryd",
                     f"rename it, then {_INSTALL}")
    if entry == "disabled":
        return Check("mcp", WARN, f"{key} in {config} is disabled",
                     f'set "enabled": true on {key} in {config}')
    program = (command or ["?"])[0]
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return Check("mcp", FAIL, f"{key} in {config} runs {program}, which is not an "
                                  "executable file (was the installation moved?)", _INSTALL)
    return Check("mcp", OK, f"{key} in {config}")
