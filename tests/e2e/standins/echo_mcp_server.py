"""Test stand-in: a stdio MCP server with one tool, ``echo``, built on the official ``mcp`` SDK.

``echo(text)`` returns ``"ECHO-RESULT: <text>"``. When ``$STANDIN_LOG`` is set, every call
appends one JSON line ``{"tool", "arguments", "cwd"}`` to that file (OpenCode starts local MCP
servers in the session's directory).
"""

from __future__ import annotations

import json
import os

from mcp.server import MCPServer

server = MCPServer("echo-standin", instructions="Call echo to get a text back.")


@server.tool()
def echo(text: str) -> str:
    """Return the text prefixed with ECHO-RESULT."""
    log = os.environ.get("STANDIN_LOG")
    if log:
        with open(log, "a") as f:
            call = {"tool": "echo", "arguments": {"text": text}, "cwd": os.getcwd()}
            f.write(json.dumps(call) + "\n")
    return f"ECHO-RESULT: {text}"


if __name__ == "__main__":
    server.run()
