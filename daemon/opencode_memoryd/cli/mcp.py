"""``mcp``: the stdio MCP server OpenCode starts (see ``install-opencode``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opencode_memoryd.compose import App



def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the CLI."""
    m = sub.add_parser("mcp", help="serve the `memory` MCP tool on stdin/stdout (started by "
                                   "OpenCode; a client of the running daemon)")
    m.set_defaults(handler=cmd_mcp)


def cmd_mcp(app: App, args: argparse.Namespace) -> int:
    """``mcp``: serve until OpenCode closes stdin."""
    from opencode_memoryd.serve.mcp_server import run

    return run(app.daemon_socket, app.env)
