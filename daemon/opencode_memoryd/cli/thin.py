"""The CLI's fast paths: what runs before the full command line and config are loaded.

``opencode-memoryd mcp`` (started by OpenCode for every directory it opens) becomes a relay
to the daemon's MCP server (:mod:`opencode_memoryd.serve.mcp.relay`) after reading only the
state dir from the config file (:func:`~opencode_memoryd.config.paths.state_dir_from_file`).
The read-only commands a running daemon serves (:data:`~opencode_memoryd.cli.commands.SERVED`)
parse their arguments with the fast parser and ask
the daemon with a :class:`ThinApp`, which loads the full config only if the daemon goes
away meanwhile (the command then runs locally, as it would have). The top-level ``--help``
and ``--version`` come from :func:`~opencode_memoryd.cli.main.top_level_parser` (the
command table, no command module). Anything this module cannot decide cheaply (a command's
``--help``, an option it does not know, a config file it cannot read, a daemon too old to
host MCP) goes the full way (:func:`fast_path` returns ``None``), which reports problems as
before.

A served command costs little more than the interpreter's start: this path imports
neither :mod:`typing` nor :mod:`pathlib` (paths are strings here) nor :mod:`argparse`, and
parses the arguments of the one command asked for with a
:class:`~opencode_memoryd.cli.quickparse.QuickParser` built from the same table as the full
parser (:func:`~opencode_memoryd.cli.commands.declare`) instead of building the whole
command line.
"""

from __future__ import annotations

from opencode_memoryd.cli.commands import SERVED, declare
from opencode_memoryd.config.paths import (
    SOCKET_ENV_VAR,
    daemon_info,
    mcp_socket_path,
    state_dir_from_file,
)

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    from opencode_memoryd.compose import App



class Line:
    """A command line split before ``argparse``: the global options and the rest."""

    def __init__(self, config: str | None, verbose: bool, command: str,
                 rest: list[str]) -> None:
        self.config = config
        self.verbose = verbose
        self.command = command
        self.rest = rest


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


def state_dir_of(line: Line, env: Mapping[str, str]) -> str | None:
    """The state dir for ``line``'s config (``None``: ask the full config)."""
    return state_dir_from_file(line.config, env)


def mcp_socket_finder(state_dir: str, env: Mapping[str, str]) -> tuple[bool, object]:
    """``(usable, find)``: ``find()`` gives the running daemon's MCP socket or ``None``;
    ``usable`` is false when a daemon runs that hosts no MCP server (an older version)."""
    from pathlib import Path

    override = env.get(SOCKET_ENV_VAR)
    if override:
        fixed = mcp_socket_path(Path(override))
        return True, lambda: fixed
    info = daemon_info(state_dir)
    if info.get("socket") and not info.get("mcp_socket"):
        return False, None

    def find() -> Path | None:
        found = daemon_info(state_dir).get("mcp_socket")
        return Path(found) if isinstance(found, str) and found else None

    return True, find


def asks_top_level(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is global options and a ``-h``/``--help``/``--version`` before any
    command: what the top level alone answers."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help", "--version"):
            return True
        if arg == "--config" and i + 1 < len(argv):
            i += 2
        elif arg.startswith("--config=") or arg in ("-v", "--verbose"):
            i += 1
        else:
            return False
    return False


def fast_path(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Run the command here when it has a fast path; ``None``: take the full way."""
    line = split(argv)
    if line is None:
        if not asks_top_level(argv):
            return None
        from opencode_memoryd.cli.main import top_level_parser

        try:
            top_level_parser().parse_args(argv)
        except SystemExit as exc:  # the help or the version was printed
            return int(exc.code or 0)
        return None
    if line.command == "mcp" and not line.rest:
        state = state_dir_of(line, env)
        if state is None:
            return None
        usable, find = mcp_socket_finder(state, env)
        if not usable or not callable(find):
            return None
        from opencode_memoryd.serve.mcp.relay import run

        return run(find)
    if line.command in SERVED and not {"-h", "--help"} & set(line.rest):
        return _served(line, env)
    return None


class ThinApp:
    """What a served command's handler gets instead of the full application: the
    daemon's socket, and :meth:`load` for the full one.

    Args:
        state_dir: the state dir (from the config file alone).
        socket: the daemon's control socket (from ``daemon.json``).
        line: the command line, for :meth:`load`.
        env: the environment.
    """

    def __init__(self, state_dir: str, socket: str, line: Line,
                 env: Mapping[str, str]) -> None:
        self._state_dir = state_dir
        self._socket = socket
        self._line = line
        self._env = env

    @property
    def state_dir(self) -> Path:
        """The state dir."""
        from pathlib import Path

        return Path(self._state_dir)

    def daemon_socket(self) -> str | None:
        """The control socket of the running daemon (a path)."""
        return self._socket

    def load(self) -> App:
        """The full application (config validated, logging set up).

        Raises:
            ConfigError: the config file is invalid.
        """
        from opencode_memoryd.cli.main import load_app

        return load_app(self._line.config, self._line.command, self._line.verbose,
                        self._env)


def _served(line: Line, env: Mapping[str, str]) -> int | None:
    """Run a served command (:data:`~opencode_memoryd.cli.commands.SERVED`) with a
    :class:`ThinApp` when a daemon runs."""
    state = state_dir_of(line, env)
    if state is None:
        return None
    sock = daemon_info(state).get("socket")
    if not isinstance(sock, str) or not sock:
        return None
    from opencode_memoryd.cli.quickparse import QuickParser, Unsure

    served = SERVED[line.command]
    args: Any  # the handlers take it as the argparse.Namespace it stands for
    try:
        args = declare(QuickParser(), line.command).parse_args(line.rest)
    except Unsure:
        return None
    module = __import__(f"opencode_memoryd.cli.{served.module}", fromlist=[served.handler])
    args.command = line.command
    args.handler = getattr(module, served.handler)
    handler: Callable[[Any, argparse.Namespace], int] = args.handler
    return int(handler(ThinApp(state, sock, line, env), args))
