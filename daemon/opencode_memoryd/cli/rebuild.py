"""``rebuild [--json]``: make the embedded store again from OpenCode's databases and the
journal of manual changes, after it was lost or damaged
(:mod:`opencode_memoryd.usecases.rebuild`).

A local, exclusive command: it refuses (exit 6, nothing changed) while a daemon runs or
another process holds the store.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.exits import EXIT_CODES_HELP, EXIT_FAILURE, EXIT_OK
from opencode_memoryd.cli.maintain import _progress
from opencode_memoryd.cli.reembed import _running_daemon, _service_commands
from opencode_memoryd.cli.render import print_json
from opencode_memoryd.errors import RefusedError, StoreInUseError

if TYPE_CHECKING:
    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rebuild`` to the CLI."""
    r = sub.add_parser(
        "rebuild", help=COMMANDS["rebuild"], epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Make the memory store again when it is lost or damaged (doctor's `store`\n"
            "check fails, or the daemon cannot open it): the store's folder is moved\n"
            "aside (<store>.broken-<time>, never deleted), every high-water mark is reset,\n"
            "every session is read again from OpenCode's databases (results recorded in\n"
            "the state file are replayed, not extracted again), and the memories added,\n"
            "edited, forgotten or restored by hand (CLI, web page, agent) are written back\n"
            "from the journal of manual changes (and from the old store when it still\n"
            "reads). Dreams are not replayed. Stop the daemon first: it owns the store."))
    r.add_argument("--json", action="store_true",
                   help='print {"store", "moved_to", "old_store_read", "old_store_error", '
                        '"marks_reset", "sessions", "added", "failed", '
                        '"manual_restored", "points"}')
    r.set_defaults(handler=cmd_rebuild)


def _refusal(app: App, who: str) -> RefusedError:
    stop, start = _service_commands(app)
    return RefusedError(
        f"{who}, so the store cannot be rebuilt now; nothing was changed. Stop the daemon "
        f"first (`{stop}`, or end the `opencode-memoryd run` in the foreground), run "
        f"`opencode-memoryd rebuild`, then start it again (`{start}`)")


def cmd_rebuild(app: App, args: argparse.Namespace) -> int:
    """``rebuild``: a summary line (or the JSON report); exit 1 when a session failed.

    Raises:
        RefusedError: a daemon runs, another process holds the store, or the store is on
            a Qdrant server (exit 6, nothing changed).
        SourceError, StoreError, StateError: see
            :func:`~opencode_memoryd.usecases.rebuild.rebuild`.
    """
    from opencode_memoryd.usecases.rebuild import rebuild

    pid = _running_daemon(app)
    if pid is not None:
        raise _refusal(app, f"the opencode-memoryd daemon is running (pid {pid}) and owns "
                            "the memory store")
    try:
        report = rebuild(app, progress=_progress)
    except StoreInUseError as exc:
        raise _refusal(app, f"another opencode-memoryd process holds the memory store "
                            f"({exc})") from exc
    if args.json:
        print_json(report)
    else:
        where = (f"the old one is in {report['moved_to']}" if report["moved_to"]
                 else "there was no store")
        print(f"rebuilt {report['store']} ({where}): {report['sessions']} sessions read "
              f"again, {report['added']} memories extracted, {report['manual_restored']} "
              f"written back from the journal of manual changes; {report['points']} points")
        if report["failed"]:
            print(f"{report['failed']} session(s) failed (see the log); run "
                  "`opencode-memoryd maintain --all` to retry them")
    return EXIT_FAILURE if report["failed"] else EXIT_OK
