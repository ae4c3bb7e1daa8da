"""``opencode-memoryd mcp``: the MCP server OpenCode starts per directory (stdio).

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.lowlevel.Server` with only
the tools capability: one tool, ``memory`` (:mod:`opencode_memoryd.serve.mcp.tool`), and a
short ``instructions`` text, which OpenCode puts in the system prompt and which never
changes (cache-safe). No resources and no prompts: advertising resources makes OpenCode add
three more tools to every request.

Every call goes to the running daemon over its control socket; the server never opens the
embedded store. It resolves the daemon on each call (``daemon.json`` in the state dir, or
``$OPENCODE_MEMORYD_SOCKET``), so a daemon started or restarted after OpenCode is found.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from opencode_memoryd import __version__
from opencode_memoryd.config.paths import SOCKET_ENV_VAR
from opencode_memoryd.errors import ControlError, DaemonUnreachableError
from opencode_memoryd.serve.mcp.tool import (
    DESCRIPTION,
    INPUT_SCHEMA,
    INSTRUCTIONS,
    TOOL_NAME,
    dispatch,
    to_text,
)

#: How long (s) a daemon has to answer a ping before a call is sent to it.
PING_SECONDS = 3.0


def daemon_caller(find_socket: Callable[[], Path | None], env: Mapping[str, str]
                  ) -> Callable[[str, dict[str, Any]], Any]:
    """A function that calls a daemon route, resolving the socket on every call.

    The daemon is pinged first (:data:`PING_SECONDS`), so a daemon that accepts
    connections but answers nothing (stopped with SIGSTOP, stuck) costs the agent seconds,
    not the client's whole timeout.

    Raises (from the returned function):
        DaemonUnreachableError: no daemon runs (no socket, or nobody accepts on it).
        ControlError: the daemon accepts connections but does not answer a ping; and
            see :meth:`ControlClient.call`.
        RemoteError: see :meth:`ControlClient.call`.
    """
    from opencode_memoryd.serve.control.client import ControlClient

    def call(route: str, payload: dict[str, Any]) -> Any:
        override = env.get(SOCKET_ENV_VAR)
        sock = Path(override) if override else find_socket()
        if sock is None:
            raise DaemonUnreachableError("no daemon.json in the state dir")
        with ControlClient(sock, timeout_seconds=120) as client:
            if client.ping(timeout=PING_SECONDS) is None and _accepts(sock):
                raise ControlError(f"the daemon on {sock} accepts connections but did not "
                                   f"answer within {PING_SECONDS:g} s (stuck or stopped?)")
            return client.call(route, payload)

    return call


def _accepts(sock: Path) -> bool:
    """Whether something accepts connections on the Unix socket ``sock``."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PING_SECONDS)
        try:
            probe.connect(str(sock))
        except OSError:
            return False
    return True


def preload() -> None:
    """Import the SDK parts :func:`serve` uses (the daemon does it once, before its first
    MCP session, so no session waits for the import).

    Raises:
        ImportError: the ``mcp`` SDK is not installed.
    """
    import anyio  # noqa: F401
    import mcp.server.lowlevel
    import mcp.server.stdio  # noqa: F401
    import mcp_types  # noqa: F401


def serve(call: Callable[[str, dict[str, Any]], Any], directory: str,
          streams: tuple[IO[str], IO[str]] | None = None) -> None:
    """Serve MCP until the client closes its end.

    Args:
        call: calls a daemon route (:func:`daemon_caller`, or the daemon's own service).
        directory: the session's directory (OpenCode starts the server there).
        streams: ``(input, output)`` text streams of newline-delimited JSON-RPC (the
            daemon passes a relay's connection); default stdin/stdout.
    """
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    tool = types.Tool(name=TOOL_NAME, description=DESCRIPTION, input_schema=INPUT_SCHEMA)

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        if params.name != TOOL_NAME:
            result: dict[str, Any] = {"success": False,
                                      "error": f"unknown tool {params.name!r}; use memory"}
        else:
            args = dict(params.arguments or {})
            result = await anyio.to_thread.run_sync(dispatch, args, call, directory)
        return types.CallToolResult(content=[types.TextContent(type="text", text=to_text(result))],
                                    is_error=not result.get("success"))

    server: Server[Any] = Server("opencode-memoryd", version=__version__,
                                 instructions=INSTRUCTIONS, on_list_tools=list_tools,
                                 on_call_tool=call_tool)

    async def main() -> None:
        wrapped = (anyio.wrap_file(streams[0]), anyio.wrap_file(streams[1])) if streams else (
            None, None)
        async with stdio_server(*wrapped) as (read_stream, write_stream):
            await server.run(read_stream, write_stream,
                             server.create_initialization_options())

    anyio.run(main)


def run(find_socket: Callable[[], Path | None], env: Mapping[str, str] | None = None) -> int:
    """Run the MCP server for the current working directory; returns the exit code."""
    serve(daemon_caller(find_socket, os.environ if env is None else env), os.getcwd())
    return 0
