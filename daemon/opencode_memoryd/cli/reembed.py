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
        from opencode_memoryd.serve import raw_client

        pid = raw_client.ping(sock)
        if pid is not None:
            return pid
    return daemon_starting(app)


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
    bar: Any = None
    started = False

    def announce(report: dict[str, Any]) -> None:
        nonlocal bar, started
        started = True
        print(f"re-embedding {report['points']} memories in {report['store']}: "
              f"{report['from']} -> {report['to']} ({report['reason']}) ...",
              file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=report["points"], desc="memories", unit="memory", leave=False)

    def advance(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(done - bar.n)

    try:
        result = reembed(app, force=args.force, on_start=announce, progress=advance)
    except StoreInUseError as exc:
        raise _refusal(app, f"another opencode-memoryd process holds the memory store "
                            f"({exc})") from exc
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        if started:  # before that, nothing was changed
            print(f"reembed interrupted: {MARKED}; run `opencode-memoryd reembed` again — it "
                  "starts over, the memories are kept", file=sys.stderr, flush=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print_json(result)
    elif result["reembedded"]:
        print(f"re-embedded {result['points']} memories in {result['store']}: "
              f"{result['from']} -> {result['to']} ({result['reason']})")
    elif result["from"] == "no store":
        print(f"nothing to do: {result['reason']}")
    else:
        print(f"nothing to do: {result['reason']} ({result['to']}, {result['points']} "
              "memories); `opencode-memoryd reembed --force` rebuilds the vectors anyway")
    return EXIT_OK
