"""Run a use case in the running daemon (which owns the embedded store), else locally.

Commands call the service contract's methods (:class:`~opencode_memoryd.usecases.contract.
UseCases`): :func:`use_cases` (the daemon's, else local) and :func:`on_daemon` (the daemon's
alone). Under them, :func:`run_use_case` and :func:`via_daemon` are the wire dispatch: a
method becomes one route and its payload.

A daemon that is still starting (``daemon.pid`` names a live ``opencode-memoryd run`` that
does not serve yet) is waited for, up to :data:`DAEMON_START_WAIT_SECONDS`.
"""

from __future__ import annotations

import os
import sys
import time

from opencode_memoryd.errors import DaemonUnreachableError, RemoteError, StoreInUseError
from opencode_memoryd.usecases.routed import routed

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, TypeVar

    from opencode_memoryd.compose import App
    from opencode_memoryd.usecases.contract import UseCases
    from opencode_memoryd.usecases.maintain import Progress

    T = TypeVar("T")

#: How long a command waits (s) for a daemon that is starting to serve it.
DAEMON_START_WAIT_SECONDS = 60.0


def use_cases(app: App, *, progress: Progress | None = None) -> UseCases:
    """The use cases, each call served by the running daemon when there is one, else run
    here (:func:`run_use_case`); ``progress`` wraps ``maintain``'s session lists when it
    runs here.

    Raises (from each method):
        MemorydError: the use case failed, in the class the daemon raised.
    """
    def send(route: str, payload: dict[str, Any]) -> Any:
        return run_use_case(app, route, payload, progress=progress)

    return routed(send)


class _NotServed(Exception):
    """No daemon serves the call (:func:`on_daemon`)."""


def on_daemon(app: App, use: Callable[[UseCases], T]) -> tuple[bool, T | None]:
    """``use`` with the running daemon's use cases: ``(True, its result)``, or
    ``(False, None)`` when no daemon serves (nothing is run here).

    Raises:
        MemorydError: the daemon answered an error, in the class it raised.
    """
    def send(route: str, payload: dict[str, Any]) -> Any:
        served, result = via_daemon(app, route, payload)
        if not served:
            raise _NotServed(route)
        return result

    try:
        return True, use(routed(send))
    except _NotServed:
        return False, None


def run_use_case(app: App, route: str, payload: dict[str, Any], *,
                 progress: Progress | None = None) -> Any:
    """The result of use case ``route`` (see :mod:`opencode_memoryd.usecases.service`):
    the wire dispatch under :func:`use_cases`, which commands call.

    Served by the running daemon when there is one; otherwise the state file and the
    store are opened here (a dream or undo first finishes a dream a crash interrupted).

    Raises:
        MemorydError: the use case failed (a daemon's error is rebuilt in its own class,
            :meth:`~opencode_memoryd.errors.RemoteError.local`).
    """
    served, result = via_daemon(app, route, payload)
    if served:
        return result
    from opencode_memoryd.cli.thin import ThinApp
    from opencode_memoryd.usecases.service import call, open_local

    if isinstance(app, ThinApp):  # the daemon went away: the full config after all
        app = app.load()

    try:
        if route == "maintain":
            _migrate(app)
        with open_local(app, progress=progress) as service:
            if route in ("dream", "undo"):
                service.recover_dreams()
            return call(service, route, payload)
    except StoreInUseError:
        # a daemon that started after our first look holds the store: it serves us
        served, result = via_daemon(app, route, payload)
        if served:
            return result
        raise


def _migrate(app: App) -> None:
    """Re-embed a store built before the local model was the default
    (:func:`~opencode_memoryd.usecases.reembed.migrate_store`), saying so on stderr."""
    from opencode_memoryd.usecases.reembed import migrate_store

    result = migrate_store(app)
    if result and result["reembedded"]:
        print(f"re-embedded {result['points']} memories of {result['store']}: "
              f"{result['from']} -> {result['to']}", file=sys.stderr)


def via_daemon(app: App, name: str, payload: dict[str, Any]
               ) -> tuple[bool, Any]:
    """Ask a running daemon to run route ``name`` (the wire under :func:`on_daemon`).

    Returns:
        ``(True, result)`` when a daemon answered, ``(False, None)`` when none runs.

    Raises:
        MemorydError: the daemon answered an error, rebuilt in its class
            (:meth:`~opencode_memoryd.errors.RemoteError.local`).
    """
    sock = app.daemon_socket() or _wait_for_starting_daemon(app)
    if sock is None:
        return False, None
    from opencode_memoryd.serve.control import client as control_client

    if control_client.ping(sock) is None:
        return False, None
    try:
        return True, control_client.call(sock, name, payload)
    except DaemonUnreachableError:
        return False, None
    except RemoteError as exc:
        raise exc.local() from exc


def daemon_starting(app: App) -> int | None:
    """The pid of a daemon that is starting (``daemon.pid`` names a live
    ``opencode-memoryd`` / ``opencode_memoryd`` process, and it does not serve yet)."""
    try:
        pid = int((app.state_dir / "daemon.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    import re
    import subprocess
    from pathlib import Path

    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        try:  # no /proc (macOS)
            cmdline = subprocess.run(["ps", "-p", str(pid), "-o", "command="],
                                     capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    return pid if re.search(r"opencode[-_]memoryd\b.*\brun\b", cmdline) else None


def _wait_for_starting_daemon(app: App) -> Path | None:
    """While a daemon is starting up (it owns the store but does not serve yet), wait up
    to ``DAEMON_START_WAIT_SECONDS`` for its control socket; ``None`` when no daemon is
    starting, or it did not come up in time."""
    pid = daemon_starting(app)
    if pid is None:
        return None
    print(f"opencode-memoryd: waiting for the daemon (pid {pid}) to finish starting",
          file=sys.stderr)
    deadline = time.monotonic() + DAEMON_START_WAIT_SECONDS
    while time.monotonic() < deadline:
        sock = app.daemon_socket()
        if sock is not None:
            return sock
        if daemon_starting(app) is None:
            return app.daemon_socket()
        time.sleep(0.2)
    return None
