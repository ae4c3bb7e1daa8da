"""``mcp``: the stdio MCP server OpenCode starts (see ``install-opencode``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS

if TYPE_CHECKING:
    from opencode_memoryd.compose import App



def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the CLI."""
    m = sub.add_parser("mcp", help=COMMANDS["mcp"])
    m.set_defaults(handler=cmd_mcp)


def cmd_mcp(app: App, args: argparse.Namespace) -> int:
    """``mcp``: serve until OpenCode closes stdin."""
    from opencode_memoryd.serve.mcp.server import run

    return run(app.daemon_socket, app.env)
