"""The CLI's fast paths: what runs before the full command line and config are loaded.

``opencode-memoryd mcp`` (started by OpenCode for every directory it opens) becomes a relay
to the daemon's MCP server (:mod:`opencode_memoryd.serve.mcp_relay`) after reading only the
state dir from the config file (:mod:`opencode_memoryd.config.light`). Anything this
module cannot decide cheaply (a ``--help``, an option it does not know, a config file it
cannot read, a daemon too old to host MCP) goes the full way (:func:`fast_path` returns
``None``), which reports problems as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from opencode_memoryd.config.light import daemon_info, light_state_dir

#: Overrides the daemon's control socket (the MCP socket is found beside it).
SOCKET_ENV_VAR = "OPENCODE_MEMORYD_SOCKET"


@dataclass(frozen=True)
class Line:
    """A command line split before ``argparse``: the global options and the rest."""

    config: str | None
    verbose: bool
    command: str
    rest: list[str]


def split(argv: Sequence[str]) -> Line | None:
    """The global options (``--config PATH``, ``-v``) and the command with its arguments;
    ``None`` for anything else before the command (``--help``, ``--version``, a typo)."""
    config: str | None = None
    verbose = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--config" and i + 1 < len(argv):
            config, i = argv[i + 1], i + 2
        elif arg.startswith("--config="):
            config, i = arg.split("=", 1)[1], i + 1
        elif arg in ("-v", "--verbose"):
            verbose, i = True, i + 1
        elif arg.startswith("-"):
            return None
        else:
            return Line(config, verbose, arg, list(argv[i + 1:]))
    return None


def state_dir_of(line: Line, env: Mapping[str, str]) -> Path | None:
    """The state dir for ``line``'s config (``None``: ask the full config)."""
    from opencode_memoryd.config.paths import expand_home

    explicit = expand_home(line.config, env) if line.config else None
    return light_state_dir(explicit, env)


def mcp_socket_finder(state_dir: Path, env: Mapping[str, str]) -> tuple[bool, object]:
    """``(usable, find)``: ``find()`` gives the running daemon's MCP socket or ``None``;
    ``usable`` is false when a daemon runs that hosts no MCP server (an older version)."""
    override = env.get(SOCKET_ENV_VAR)
    if override:
        from opencode_memoryd.serve.protocol import mcp_socket_path

        fixed = mcp_socket_path(Path(override))
        return True, lambda: fixed
    info = daemon_info(state_dir)
    if info.get("socket") and not info.get("mcp_socket"):
        return False, None

    def find() -> Path | None:
        found = daemon_info(state_dir).get("mcp_socket")
        return Path(found) if isinstance(found, str) and found else None

    return True, find


def fast_path(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Run the command here when it has a fast path; ``None``: take the full way."""
    line = split(argv)
    if line is None:
        return None
    if line.command == "mcp" and not line.rest:
        state = state_dir_of(line, env)
        if state is None:
            return None
        usable, find = mcp_socket_finder(state, env)
        if not usable or not callable(find):
            return None
        from opencode_memoryd.serve.mcp_relay import run

        return run(find)
    return None
