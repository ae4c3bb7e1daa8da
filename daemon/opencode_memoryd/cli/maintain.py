"""``maintain``: extract memories from sessions up to now, then exit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_CODES_HELP, EXIT_FAILURE, EXIT_OK
from opencode_memoryd.cli.render import table
from opencode_memoryd.config.paths import normalize_dir

if TYPE_CHECKING:
    from opencode_memoryd.compose import App
    from opencode_memoryd.conversation.rows import SessionRow


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``maintain`` to the CLI."""
    m = sub.add_parser("maintain", help=COMMANDS["maintain"],
                       epilog=EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    target = m.add_mutually_exclusive_group(required=True)
    target.add_argument("--dir", metavar="DIR", type=normalize_dir,
                        help="the project folder: sessions whose project worktree is DIR or "
                             "whose directory is DIR or below it (DIR need not exist here)")
    target.add_argument("--all", action="store_true", help="every project")
    m.add_argument("--db", metavar="PATH", help="OpenCode database (default: discovered)")
    m.add_argument("--json", action="store_true", help="print the report as JSON")
    m.add_argument("--retry-failed", action="store_true",
                   help="first extract again the chunks given up after repeated identical "
                        "failures (see `status`), e.g. after changing the model; the "
                        "structured-output mode is negotiated again too")
    m.set_defaults(handler=cmd_maintain)


def _progress(sessions: list[SessionRow]) -> Iterable[SessionRow]:
    if not sys.stderr.isatty():
        return sessions
    from tqdm import tqdm

    bar: Iterable[SessionRow] = tqdm(sessions, desc="sessions", unit="session", leave=False)
    return bar


def cmd_maintain(app: App, args: argparse.Namespace) -> int:
    """``maintain``: print a summary line and a table of the sessions that did work."""
    directory = None if args.all else normalize_dir(args.dir)
    service = use_cases(app, progress=_progress if args.all else None)
    summary = (service.maintain(directory=directory, db=args.db, retry_failed=True)
               if args.retry_failed else service.maintain(directory=directory, db=args.db))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        rows = [
            (r["session_id"], r["turns_read"], r["added"], sum(r["skipped"].values()),
             r["llm_calls"], f"{r['tokens_in']}/{r['tokens_out']}",
             sum(r["redactions"].values()),
             r["error"] or (f"ok, {r['given_up']} given up" if r.get("given_up") else "ok"))
            for r in summary["sessions"] if r["turns_read"] or r["error"] or r["replayed_items"]
        ]
        t = summary["totals"]
        print(f"mode: {summary['mode']}  sessions: {t['sessions']}  turns read: "
              f"{t['turns_read']}  memories added: {t['added']}  skipped: {t['skipped']}  "
              f"refused: {t['rejected']}  "
              f"LLM calls: {t['llm_calls']}  tokens in/out: {t['tokens_in']}/{t['tokens_out']}")
        if t.get("corrupt_rows"):
            print(f"unreadable rows skipped: {t['corrupt_rows']} (not UTF-8 or not JSON; "
                  "see the log)")
        if rows:
            print(table(rows, ["session", "turns", "added", "skipped", "llm", "tokens",
                               "redacted", "result"]))
        if summary.get("sessions_omitted"):
            print(f"({summary['sessions_omitted']} more sessions read with nothing to report: "
                  "not listed)")
        if t.get("given_up"):
            print(f"given up:    {t['given_up']} chunk(s) failed the same way too often and "
                  "were captured by the rules; `maintain --retry-failed` tries them again")
        for r in summary.get("retried") or []:
            print(f"retried:     {r['session_id']}: "
                  + (f"failed: {r['error']}" if r["error"] else f"+{r['added']} memories"))
    return EXIT_FAILURE if summary["failed"] else EXIT_OK
