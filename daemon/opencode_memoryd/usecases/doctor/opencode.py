"""``plugin`` and ``mcp``: what ``install-opencode`` writes is in place and current
(:func:`opencode_memoryd.install.opencode.inspect`)."""

from __future__ import annotations

import os

from opencode_memoryd.install.opencode import MCP_SERVER_NAME, inspect
from opencode_memoryd.usecases.doctor.model import FAIL, OK, WARN, Check, Context

_INSTALL = "`opencode-memoryd install-opencode`, then restart OpenCode"


def opencode_checks(ctx: Context) -> list[Check]:
    """``plugin`` then ``mcp``."""
    found = inspect(socket=ctx.probes.socket, env=ctx.app.env)
    path = found.plugin_path
    plugin = {
        "current": Check("plugin", OK, f"{path}"),
        "outdated": Check("plugin", WARN, f"{path} was written for another control socket "
                                          "or by another version", _INSTALL),
        "foreign": Check("plugin", WARN, f"{path} was not written by opencode-memoryd",
                         f"move it away, then {_INSTALL}"),
        "missing": Check("plugin", WARN, f"not installed ({path}): new OpenCode sessions "
                                         "get no memories", _INSTALL),
    }[found.plugin]
    return [plugin, _mcp(found.entry, found.config_path, found.command, found.problem)]


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
