"""``history sessions|messages|search|compactions``: read OpenCode's conversations.

Read-only over OpenCode's databases. A running daemon answers (the same use cases it
serves to the MCP server); without one the command reads the databases itself and never
opens the memory store.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import on_daemon
from opencode_memoryd.cli.exits import EXIT_OK
from opencode_memoryd.cli.render import print_json, table
from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.usecases import limits

if TYPE_CHECKING:
    from types import ModuleType

    from opencode_memoryd.compose import App
    from opencode_memoryd.usecases.contract import UseCases


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``history`` and its four sub-commands to the CLI."""
    h = sub.add_parser("history", help=COMMANDS["history"],
                       description="Read OpenCode's sessions, messages and compaction "
                                   "summaries. Texts are redacted (secrets replaced by "
                                   "[REDACTED:kind]).")
    hs = h.add_subparsers(dest="history_command", required=True, metavar="WHAT")

    def common(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--db", metavar="PATH", help="OpenCode database to read (default: "
                                                    "the configured or discovered ones)")
        p.add_argument("--json", action="store_true", help=f"print {what}")

    s = hs.add_parser("sessions", help="recent top-level sessions of a project "
                                       "(sub-agent sessions are counted, not listed)")
    s.add_argument("--dir", metavar="DIR", type=normalize_dir, default=os.curdir,
                   help="the project folder (default: the current folder)")
    s.add_argument("--limit", type=_whole(1), default=20, metavar="N",
                   help=f"sessions (default 20, at most {limits.MAX_SESSIONS})")
    common(s, "a JSON array")
    s.set_defaults(handler=cmd_sessions)

    m = hs.add_parser("messages", help="one session as readable text, a page at a time")
    m.add_argument("session_id", metavar="SESSION_ID")
    m.add_argument("--offset", type=_whole(0), default=0, metavar="N",
                   help="messages to skip (default 0)")
    m.add_argument("--limit", type=_whole(1), default=50, metavar="N",
                   help=f"messages (default 50, at most {limits.MAX_MESSAGES})")
    common(m, "the page as JSON")
    m.set_defaults(handler=cmd_messages)

    q = hs.add_parser("search", help="find words in a project's conversations, newest "
                                     "first")
    q.add_argument("query", metavar="QUERY", help="words that must all occur (any case)")
    q.add_argument("--dir", metavar="DIR", type=normalize_dir, default=os.curdir,
                   help="the project folder (default: the current folder)")
    q.add_argument("--limit", type=_whole(1), default=20, metavar="N",
                   help=f"hits (default 20, at most {limits.MAX_HITS})")
    common(q, "a JSON array")
    q.set_defaults(handler=cmd_search)

    c = hs.add_parser("compactions", help="a session's compaction checkpoints and their "
                                          "summaries")
    c.add_argument("session_id", metavar="SESSION_ID")
    common(c, "the checkpoints as JSON")
    c.set_defaults(handler=cmd_compactions)


def _run(app: App, served: Callable[[UseCases], Any], local: Callable[[ModuleType], Any]
         ) -> Any:
    """The running daemon's answer (``served`` with its use cases), else ``local`` with
    :mod:`opencode_memoryd.usecases.history`, run here (no store is opened)."""
    done, result = on_daemon(app, served)
    if done:
        return result
    from opencode_memoryd.usecases import history

    return local(history)


def _when(iso: str) -> str:
    from opencode_memoryd.models import parse_iso

    return parse_iso(iso).astimezone().strftime("%Y-%m-%d %H:%M")


def cmd_sessions(app: App, args: argparse.Namespace) -> int:
    """``history sessions``: the project's recent sessions, newest first."""
    rows = _run(app, lambda uc: uc.history_sessions(directory=args.dir, limit=args.limit,
                                                    db=args.db),
                lambda h: h.sessions(app, directory=args.dir, limit=args.limit, db=args.db))
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"no OpenCode sessions for {args.dir}")
    else:
        print(table([[r["id"], _when(r["updated"]),
                      f"{r['user_messages']}/{r['assistant_messages']}", r["subagents"],
                      r["title"] + ("  [archived]" if r["archived"] else "")]
                     for r in rows],
                    ["ID", "UPDATED", "USER/ASSISTANT", "SUB-AGENTS", "TITLE"]))
    return EXIT_OK


def _header(session: dict[str, Any]) -> str:
    parent = f", sub-agent of {session['parent_id']}" if session.get("parent_id") else ""
    return f"{session['title']}  ({session['id']}, {session['directory']}{parent})"


def cmd_messages(app: App, args: argparse.Namespace) -> int:
    """``history messages SESSION_ID``: one page of the session as text."""
    page = _run(app, lambda uc: uc.history_messages(
                    session_id=args.session_id, offset=args.offset, limit=args.limit,
                    db=args.db),
                lambda h: h.messages(app, session_id=args.session_id, offset=args.offset,
                                     limit=args.limit, db=args.db))
    if args.json:
        print_json(page)
        return EXIT_OK
    print(_header(page["session"]))
    for m in page["messages"]:
        kind = "" if m["kind"] == "text" else f" [{m['kind']}]"
        print(f"\n--- {m['role']}{kind} · {_when(m['time'])} · {m['id']}")
        print(m["text"] or "(no text)")
    shown = len(page["messages"])
    first = page["offset"] + 1 if shown else page["offset"]
    more = (f"; next page: --offset {page['next_offset']}"
            if page["next_offset"] is not None else "")
    print(f"\nmessages {first}-{page['offset'] + shown} of {page['total']}{more}")
    return EXIT_OK


def cmd_search(app: App, args: argparse.Namespace) -> int:
    """``history search QUERY``: matching messages, newest first."""
    hits = _run(app, lambda uc: uc.history_search(query=args.query, directory=args.dir,
                                                  limit=args.limit, db=args.db),
                lambda h: h.search(app, query=args.query, directory=args.dir,
                                   limit=args.limit, db=args.db))
    if args.json:
        print_json(hits)
        return EXIT_OK
    if not hits:
        print(f"no messages match {args.query!r} in the conversations of {args.dir}")
    for h in hits:
        kind = "" if h["kind"] == "text" else f" [{h['kind']}]"
        print(f"{_when(h['time'])}  {h['role']}{kind}  {h['session_title']}  "
              f"({h['session_id']} {h['message_id']})")
        print(f"    {h['snippet']}")
    return EXIT_OK


def cmd_compactions(app: App, args: argparse.Namespace) -> int:
    """``history compactions SESSION_ID``: checkpoints and summaries, oldest first."""
    got = _run(app, lambda uc: uc.history_compactions(session_id=args.session_id,
                                                      db=args.db),
               lambda h: h.compactions(app, session_id=args.session_id, db=args.db))
    if args.json:
        print_json(got)
        return EXIT_OK
    print(_header(got["session"]))
    points = got["compactions"]
    if not points:
        print("no compactions")
    for p in points:
        how = "automatic" if p["auto"] else "manual"
        print(f"\n--- {_when(p['time'])} {how} compaction ({p['request_message_id']})")
        if p["summary"] is None:
            print("(no summary written yet)")
        else:
            print(f"summary {p['summary_message_id']} at {_when(p['summary_time'])}:")
            print(p["summary"])
    return EXIT_OK

