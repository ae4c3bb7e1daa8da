"""``reembed [--force] [--json]``: rebuild the store's vectors after the embedder (or the
BM25 tokenizer) changed (:mod:`opencode_memoryd.usecases.reembed`).

A local, exclusive command: it refuses (exit 6, nothing changed) while a daemon runs or
another process holds the embedded store, and says how to stop the service and start it
again afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import daemon_starting
from opencode_memoryd.cli.exits import EXIT_CODES_HELP, EXIT_OK
from opencode_memoryd.cli.render import print_json
from opencode_memoryd.errors import RefusedError, StoreInUseError

if TYPE_CHECKING:
    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reembed`` to the CLI."""
    r = sub.add_parser(
        "reembed", help=COMMANDS["reembed"], epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Rebuild every memory's vectors for the configured [embedding] (and this\n"
            "version's BM25 settings) from the memory texts kept in the store: after a\n"
            "change of embedding provider, model or document_prefix, or when the store\n"
            "says its BM25 settings differ or a re-embedding did not complete. Nothing is\n"
            "re-extracted; ids and texts stay. Does nothing when the store already\n"
            "matches (unless --force). Stop the daemon first: it owns the store."))
    r.add_argument("--force", action="store_true",
                   help="re-embed even when the store already matches the configuration")
    r.add_argument("--json", action="store_true",
                   help='print {"reembedded", "points", "from", "to", "reason", "store"}')
    r.set_defaults(handler=cmd_reembed)


def _service_commands(app: App) -> tuple[str, str]:
    """How to stop and start the installed service on this system."""
    if sys.platform == "darwin":
        from opencode_memoryd.install.service import LAUNCHD_LABEL, service_path

        domain = f"gui/{os.getuid()}"
        return (f"launchctl bootout {domain}/{LAUNCHD_LABEL}",
                f"launchctl bootstrap {domain} {service_path(system='darwin', env=app.env)}")
    return ("systemctl --user stop opencode-memoryd", "systemctl --user start opencode-memoryd")


def _refusal(app: App, who: str) -> RefusedError:
    stop, start = _service_commands(app)
    return RefusedError(
        f"{who}, so the store cannot be re-embedded now; nothing was changed. Stop the "
        f"daemon first (`{stop}`, or end the `opencode-memoryd run` in the foreground), "
        f"run `opencode-memoryd reembed`, then start it again (`{start}`)")


def _running_daemon(app: App) -> int | None:
    """The pid of a daemon that serves or is starting, or ``None``."""
    sock = app.daemon_socket()
    if sock is not None:
        from opencode_memoryd.serve.control import client as control_client

        pid = control_client.ping(sock)
        if pid is not None:
            return pid
    return daemon_starting(app)


class _Progress:
    """What ``reembed`` shows while it runs: a line on stderr when it starts, and a
    progress bar (tqdm) when stderr is a terminal."""

    def __init__(self) -> None:
        self.started = False
        self._bar: Any = None

    def announce(self, report: dict[str, Any]) -> None:
        """The re-embedding starts (``report``: ``points``, ``store``, ``from``, ``to``,
        ``reason``)."""
        self.started = True
        print(f"re-embedding {report['points']} memories in {report['store']}: "
              f"{report['from']} -> {report['to']} ({report['reason']}) ...",
              file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=report["points"], desc="memories", unit="memory",
                             leave=False)

    def advance(self, done: int, total: int) -> None:
        """``done`` of ``total`` memories are re-embedded."""
        if self._bar is not None:
            self._bar.total = total
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        """Remove the bar (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def cmd_reembed(app: App, args: argparse.Namespace) -> int:
    """``reembed``: one line saying what was done (or the JSON report).

    Raises:
        RefusedError: a daemon runs, or another process holds the embedded store.
        UpstreamError, StoreError: the re-embedding failed (the store still needs one).
    """
    from opencode_memoryd.usecases.reembed import MARKED, reembed

    pid = _running_daemon(app)
    if pid is not None:
        raise _refusal(app, f"the opencode-memoryd daemon is running (pid {pid}) and owns "
                            "the memory store")
    shown = _Progress()
    try:
        result = reembed(app, force=args.force, on_start=shown.announce,
                         progress=shown.advance)
    except StoreInUseError as exc:
        raise _refusal(app, f"another opencode-memoryd process holds the memory store "
                            f"({exc})") from exc
    except KeyboardInterrupt:
        shown.close()
        if shown.started:  # before that, nothing was changed
            print(f"reembed interrupted: {MARKED}; run `opencode-memoryd reembed` again — it "
                  "starts over, the memories are kept", file=sys.stderr, flush=True)
        raise
    finally:
        shown.close()
    if args.json:
        print_json(result)
    else:
        print(_said(result))
    return EXIT_OK


def _said(result: dict[str, Any]) -> str:
    """The line ``reembed`` prints for its report ``result`` (see
    :func:`~opencode_memoryd.usecases.reembed.reembed`)."""
    if result["reembedded"]:
        return (f"re-embedded {result['points']} memories in {result['store']}: "
                f"{result['from']} -> {result['to']} ({result['reason']})")
    if result["from"] == "no store":
        return f"nothing to do: {result['reason']}"
    return (f"nothing to do: {result['reason']} ({result['to']}, {result['points']} "
            "memories); `opencode-memoryd reembed --force` rebuilds the vectors anyway")
