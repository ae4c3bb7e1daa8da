"""``doctor [--json]``: run the checks of :mod:`opencode_memoryd.usecases.doctor` and print
one line per check; exit 1 when one fails (warnings do not fail)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import on_daemon
from opencode_memoryd.cli.exits import EXIT_FAILURE, EXIT_OK
from opencode_memoryd.errors import MemorydError

# the checks are imported when `doctor` runs: `--help` and the other commands need none
if TYPE_CHECKING:
    from opencode_memoryd.compose import App
    from opencode_memoryd.usecases.doctor.model import DaemonProbe

_WIDTH = 16


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the CLI."""
    d = sub.add_parser(
        "doctor", help=COMMANDS["doctor"],
        description="Checks the OpenCode databases (schema, which storage shape is live, "
                    "rows in tables this version does not read, rows dated in the future, "
                    "stuck sessions), the daemon, its service and linger, the LLM endpoint, "
                    "the store's embedder, the store's points against what the state file says "
                    "was stored, the OpenCode plugin and MCP entry, file modes, "
                    "disk space, and the last extraction and dream. Each check prints ok, "
                    "warn, fail or skip and what to do; exit 1 when any check fails.")
    d.add_argument("--json", action="store_true",
                   help='print {"checks": [{"name", "status", "detail", "fix"}], "counts", '
                        '"failed"}')
    d.set_defaults(handler=cmd_doctor)


def probe_daemon(app: App) -> DaemonProbe:
    """Ask a running daemon for its ``status`` and ``integrity`` (it owns the embedded
    store)."""
    from opencode_memoryd.usecases.doctor.model import DaemonProbe

    sock = app.daemon_socket()
    named = str(sock) if sock is not None else None
    try:
        served, info = on_daemon(app, lambda uc: uc.status())
    except MemorydError as exc:
        return DaemonProbe(socket=named, error=str(exc))
    if served:
        try:
            _, integrity = on_daemon(app, lambda uc: uc.integrity())
        except MemorydError as exc:
            return DaemonProbe(status=info, socket=named, integrity_error=str(exc))
        return DaemonProbe(status=info, socket=named, integrity=integrity)
    return DaemonProbe(socket=named, error="nothing answers on it" if named else None)


def cmd_doctor(app: App, args: argparse.Namespace) -> int:
    """``doctor``: run every check, print them, exit 1 when one failed."""
    from opencode_memoryd.errors import SocketOwnerError
    from opencode_memoryd.serve.control.peer import check_path
    from opencode_memoryd.serve.control.protocol import socket_path
    from opencode_memoryd.usecases.doctor.model import Probes
    from opencode_memoryd.usecases.doctor.runner import doctor

    sock = socket_path(app.state_dir, app.env)
    try:
        check_path(sock)
        problem = None
    except SocketOwnerError as exc:
        problem = str(exc)
    probes = Probes(socket=sock, socket_problem=problem, daemon=probe_daemon(app))
    result = doctor(app, probes)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return EXIT_FAILURE if result["failed"] else EXIT_OK


def _print(result: dict[str, Any]) -> None:
    for c in result["checks"]:
        print(f"{c['status']:<5} {c['name']:<{_WIDTH}} {c['detail']}")
        if c["fix"] and c["status"] in ("warn", "fail"):
            print(f"{'':<5} {'':<{_WIDTH}} fix: {c['fix']}")
    n = result["counts"]
    print(f"{n['ok']} ok, {n['warn']} warning(s), {n['fail']} failure(s), "
          f"{n['skip']} skipped")
