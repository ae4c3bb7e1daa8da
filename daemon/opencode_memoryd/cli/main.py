"""Command line: ``opencode-memoryd COMMAND``. The only place that picks exit codes (an
error's is its class's ``exit_code``, see :mod:`opencode_memoryd.errors`).

Each command group lives in its own module with a ``register(subparsers)`` that adds its
parsers and sets ``handler(app, args)`` (commands that need the config) or
``without_app(args, env)`` (``config init|path``, the service files).

Every error message is printed redacted (an error can quote row data), the process umask
is ``077`` (what we write is private), and a reader that closes our output early
(``| head``) ends the command quietly.
"""

from __future__ import annotations

import os
import sys

from opencode_memoryd import __version__
from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import (
    EXIT_CODES_HELP,
    EXIT_CONFIG,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
)
from opencode_memoryd.disk import PRIVATE_UMASK
from opencode_memoryd.errors import MemorydError

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence
    from typing import Any

    from opencode_memoryd.compose import App



class _HelpLine:
    """What :func:`top_level_parser` makes for each command instead of its parser: the
    top-level help needs only the command's name and help line, and an
    :class:`~argparse.ArgumentParser` per command would cost more than the rest of
    ``--help``."""

    def __init__(self, **_kwargs: object) -> None:
        pass


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` (``$COLUMNS``, else the terminal of stdout,
    else 80) without importing :mod:`shutil` (and the compression modules it imports)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns


def _top(*, light: bool = False
         ) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]]:
    """The parser's top level (description, global options, exit codes) and its empty
    sub-parsers; ``light``: for :func:`top_level_parser` (a :class:`_HelpLine` per
    command, the width from :func:`terminal_columns`)."""
    import argparse  # here: a command the daemon serves needs none of it

    class _Formatter(argparse.RawDescriptionHelpFormatter):
        # argparse's own width rule (the terminal's columns less 2), without `shutil`
        def __init__(self, prog: str) -> None:
            super().__init__(prog, width=terminal_columns() - 2)

    p = argparse.ArgumentParser(
        prog="opencode-memoryd",
        description="Turn OpenCode sessions into durable memories in Qdrant.",
        epilog=EXIT_CODES_HELP,
        formatter_class=_Formatter if light else argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--config", metavar="PATH",
                   help="config file (default: $OPENCODE_MEMORYD_CONFIG, else "
                        "$XDG_CONFIG_HOME/opencode-memoryd/config.toml)")
    p.add_argument("-v", "--verbose", action="store_true", help="log info events to stderr")
    if not light:
        return p, p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lines: Any = _HelpLine  # stands in for a parser class: it is never asked to parse
    return p, p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                               parser_class=lines)


def top_level_parser() -> argparse.ArgumentParser:
    """A parser that knows the top level alone: each command of
    :data:`~opencode_memoryd.cli.commands.COMMANDS` with its help line and no arguments.
    Its ``--help`` and ``--version`` print what the full parser's do, without importing a
    command module; it must not parse a command line that names a command (its commands
    have no parser)."""
    p, sub = _top(light=True)
    for name, line in COMMANDS.items():
        sub.add_parser(name, help=line)
    return p


def _parser(*, run_only: bool = False) -> argparse.ArgumentParser:
    """The full command line; with ``run_only`` the top level and ``run`` alone (the
    daemon's start imports no other command's module)."""
    import argparse

    p, sub = _top()
    sub.add_parser("run", help=COMMANDS["run"],
                   description="Tail OpenCode's databases and extract sessions as they go "
                               "idle. Stays in the foreground; stops cleanly (exit 0) on "
                               "SIGTERM or SIGINT.",
                   epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
                   ).set_defaults(handler=_cmd_run)
    if run_only:
        return p
    from opencode_memoryd.cli import (
        context,
        doctor,
        dreams,
        history,
        install_cmd,
        maintain,
        manage,
        mcp,
        memories,
        opencode_setup,
        rebuild,
        reembed,
        setup,
        status,
        transfer,
        uninstall_cmd,
        web,
    )

    install_cmd.register(sub)
    uninstall_cmd.register(sub)
    maintain.register(sub)
    memories.register(sub)
    manage.register(sub)
    status.register(sub)
    context.register(sub)
    mcp.register(sub)
    dreams.register(sub)
    setup.register(sub)
    opencode_setup.register(sub)
    history.register(sub)
    reembed.register(sub)
    rebuild.register(sub)
    doctor.register(sub)
    web.register(sub)
    transfer.register(sub)
    return p


def _cmd_run(app: App, args: argparse.Namespace) -> int:
    """``run``; a store built for another embedder exits :data:`EXIT_CONFIG`, which the
    service files do not restart on (restarting cannot fix it; ``reembed`` can). A daemon
    that stopped to take up its edited config file starts again in place (same pid)."""
    from opencode_memoryd.errors import EmbedderMismatchError
    from opencode_memoryd.serve.runtime.daemon import RESTART, run
    from opencode_memoryd.serve.runtime.reload import restart_in_place

    try:
        code = run(app)
        if code == RESTART:  # the config file was edited (or SIGHUP): start again in place
            import logging

            logging.shutdown()
            try:
                restart_in_place()
            except OSError as exc:  # a thread still in a call must not hold the exit
                print(f"opencode-memoryd: cannot restart in place: {exc}", file=sys.stderr)
                os._exit(EXIT_INTERNAL)
        return code
    except EmbedderMismatchError as exc:
        import structlog

        from opencode_memoryd.cli.render import print_error

        structlog.get_logger(__name__).error("store_needs_reembed", error=str(exc))
        print_error(exc)
        return EXIT_CONFIG


#: Commands that print each failure themselves (their console shows errors alone).
_REPORTS_FAILURES = frozenset({"maintain", "rebuild", "reembed", "dream"})


def _load_app(args: argparse.Namespace, env: Mapping[str, str]) -> App:
    return load_app(args.config, args.command, args.verbose, env)


def load_app(config_file: str | None, command: str, verbose: bool,
             env: Mapping[str, str]) -> App:
    """The application of ``--config`` (else the default config file), with logging set
    up for ``command``.

    Raises:
        ConfigError: the config file is missing (when named) or invalid.
    """
    # imported here: `--help` and a usage error need none of it
    from pathlib import Path

    import structlog

    from opencode_memoryd import logs
    from opencode_memoryd.compose import App
    from opencode_memoryd.config.loader import load_config
    from opencode_memoryd.config.paths import config_path

    explicit = Path(config_file).expanduser() if config_file else None
    config = load_config(explicit, env)
    app = App(config=config, env=env, config_path=explicit or config_path(env))
    from functools import partial

    # a command other than `run` is a person's: readable lines; one that reports each
    # failure itself shows no warnings on the way (the log file has them)
    quiet = "error" if command in _REPORTS_FAILURES else "warning"
    configure = partial(logs.configure, level=config.log.level,
                        console_level="info" if verbose or command == "run" else quiet,
                        console_format="auto" if command == "run" else "human",
                        max_bytes=config.log.file_max_bytes, backups=config.log.file_backups)
    try:
        configure(log_dir=app.state_dir)
    except OSError:
        if command != "doctor":  # doctor says what is wrong with the state dir
            raise
        configure(log_dir=None)
    structlog.get_logger(__name__).info("command_started", command=command,
                                        version=__version__, config=str(app.config_path))
    return app


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so the interpreter's final flush
    does not complain about the closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests, an IDE)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run the CLI; returns the exit code (see ``--help``)."""
    os.umask(PRIVATE_UMASK)  # every dir 0700, every file 0600
    env = dict(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        from opencode_memoryd.cli.thin import fast_path, split

        code = fast_path(argv, env)  # `mcp` and the commands a running daemon serves
        if code is None:
            line = split(argv)
            try:
                args = _parser(run_only=line is not None
                               and line.command == "run").parse_args(argv)
            except SystemExit as exc:
                return int(exc.code or 0)
            if getattr(args, "without_app", None) is not None:
                code = int(args.without_app(args, env))
            else:
                code = int(args.handler(_load_app(args, env), args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        _quiet_stdout()
        return EXIT_OK
    except MemorydError as exc:
        from opencode_memoryd.cli.failures import refused_access, report, wants_json

        return refused_access(exc, argv) or report(exc, exc.exit_code, wants_json(argv))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug (but a folder of ours this user may not use)
        from opencode_memoryd.cli.failures import refused_access

        if code := refused_access(exc, argv):
            return code
        import structlog

        from opencode_memoryd import logs

        structlog.get_logger(__name__).exception("internal_error")
        print("opencode-memoryd: internal error; the traceback is in "
              f"{logs.LOG_FILE_NAME} under the state dir", file=sys.stderr)
        return EXIT_INTERNAL
