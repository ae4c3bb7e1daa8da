"""``add``, ``edit``, ``forget``, ``restore``, ``confirm`` and ``profile``: memories by hand,
the agent's pending notes, and the user profile.

Run inside OpenCode (its shell sets ``OPENCODE=1``: the agent's bash tool), the writing
commands are the agent's (``caller`` ``agent``) and say so: its notes are marked as its
own, a user-scope one waits for confirmation, and it changes only the notes it added to the
project of the folder it runs in (:mod:`opencode_memoryd.usecases.agent_limits`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_OK
from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.errors import NotFoundError, RefusedError, RequestError
from opencode_memoryd.vocab import FACT_TYPES

if TYPE_CHECKING:
    from collections.abc import Callable

    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``add``, ``edit``, ``forget``, ``restore`` and ``profile`` to the CLI."""
    a = sub.add_parser("add", help=COMMANDS["add"],
                       description="Store one fact as a manual memory. The same fact (or a "
                                   "near-identical one) is stored once: adding it again "
                                   "reports the memory that holds it.")
    a.add_argument("text", help="the fact, one or two sentences")
    where = a.add_mutually_exclusive_group()
    where.add_argument("--dir", metavar="DIR", type=normalize_dir,
                       help="a memory of DIR's project (default: the current folder's)")
    where.add_argument("--user", action="store_true",
                       help="a user-scope memory (yours, in every project)")
    a.add_argument("--type", choices=FACT_TYPES, default=None,
                   help="user, feedback, project or reference (default: project with "
                        "--dir, user with --user)")
    a.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    a.add_argument("--json", action="store_true",
                   help="print {memory, status, redactions} as JSON")
    a.set_defaults(handler=cmd_add)

    e = sub.add_parser("edit", help=COMMANDS["edit"],
                       description="Replace an active memory's text (and optionally its "
                                   "type). Its sessions and messages stay; the old version "
                                   "is kept in the memory's history, and the edit is written "
                                   "to the dream journal.")
    e.add_argument("id", help="the memory id, as list or search print it (or a unique prefix, 4+ "
                   "characters)")
    e.add_argument("text", nargs="?", default=None,
                   help="the new text (omit it to change only the type)")
    e.add_argument("--type", choices=FACT_TYPES, default=None, help="the new type")
    e.add_argument("--json", action="store_true",
                   help="print {memory, status, run_id, redactions} as JSON")
    e.set_defaults(handler=cmd_edit)

    f = sub.add_parser("forget", help=COMMANDS["forget"])
    f.add_argument("id", help="the memory id, as list or search print it (or a unique prefix, 4+ "
                   "characters)")
    f.add_argument("--purge", action="store_true",
                   help="delete it for good: the point, and its text in the journals "
                        "(which record that a purge happened); it cannot be restored")
    f.add_argument("--json", action="store_true", help="print {memory, status} as JSON "
                   "({id, status, scrubbed} with --purge)")
    f.set_defaults(handler=cmd_forget)

    r = sub.add_parser("restore", help=COMMANDS["restore"])
    r.add_argument("id", help="the memory id, as list --all prints it (or a unique prefix)")
    r.add_argument("--json", action="store_true", help="print {memory, status} as JSON")
    r.set_defaults(handler=cmd_restore)

    c = sub.add_parser("confirm", help=COMMANDS["confirm"],
                       description="The agent may add a user-scope memory only as a pending "
                                   "note, in no context block until you confirm it. Without "
                                   "an id: list the pending notes.")
    c.add_argument("id", nargs="?", default=None, help="the pending note's id (or a unique prefix)")
    c.add_argument("--reject", action="store_true",
                   help="reject the note instead (it is forgotten: a tombstone)")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(handler=cmd_confirm)

    p = sub.add_parser("profile", help=COMMANDS["profile"])
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.set_defaults(handler=cmd_profile)


def _call(use: Callable[[], Any], args: argparse.Namespace) -> tuple[int, Any]:
    """Run a use case (``use()``, a call of :func:`~opencode_memoryd.cli.connect.use_cases`);
    a bad request, a missing target or a refusal is reported (on stderr, or as a JSON error
    object with ``--json``) with its class's exit code (``2``, ``5`` or ``6``)."""
    from opencode_memoryd.cli.failures import report

    try:
        return EXIT_OK, use()
    except (RequestError, NotFoundError, RefusedError) as exc:
        return report(exc, exc.exit_code, args.json), None


#: The variable OpenCode sets in the environment of every command its agent runs.
OPENCODE_ENV_VAR = "OPENCODE"


def as_agent(app: App) -> dict[str, Any]:
    """The payload fields of a writing command: ``{}`` for the user; inside OpenCode
    (``OPENCODE=1``) ``caller`` ``agent`` and the current folder as the session's, with a
    line on stderr saying so."""
    if app.env.get(OPENCODE_ENV_VAR) != "1":
        return {}
    print("opencode-memoryd: run inside OpenCode (OPENCODE=1): this change is the agent's, "
          "limited to its own notes in this folder's project; a user-scope note waits for "
          "`opencode-memoryd confirm` outside OpenCode", file=sys.stderr)
    return {"caller": "agent", "directory": os.getcwd()}


def _caller(app: App, folder: str | None = None) -> tuple[str, str | None]:
    """``(caller, directory)`` of a writing command (:func:`as_agent`): ``("user",
    folder)``, or inside OpenCode ``("agent", folder or the current folder)``."""
    agent = as_agent(app)
    return ("agent", folder or agent["directory"]) if agent else ("user", folder)


def cmd_add(app: App, args: argparse.Namespace) -> int:
    """``add TEXT [--dir DIR | --user] [--type T]``: print what was stored (without
    ``--dir`` or ``--user``: a memory of the current folder's project)."""
    folder = None if args.user else os.path.abspath(args.dir or os.getcwd())
    caller, folder = _caller(app, folder)
    code, result = _call(lambda: use_cases(app).add(
        content=args.text, type=args.type or ("user" if args.user else "project"),
        scope="user" if args.user else "project", directory=folder, db=args.db,
        caller=caller), args)
    if code != EXIT_OK:
        return code
    m = result["memory"]
    where = "user" if m["scope"] == "user" else (m["project_root"] or m["project_id"])
    verb = {"added": "added", "pending": "added, pending your confirmation,"}.get(
        result["status"], "already stored as")
    return _show(args, result, verb, where)


def cmd_forget(app: App, args: argparse.Namespace) -> int:
    """``forget ID [--purge]``: retire the memory (``--purge``: delete it for good); exit 5
    when there is no such (active) memory, 6 when the agent may not (it never purges)."""
    if args.purge:
        if as_agent(app):
            return _call(lambda: use_cases(app).purge(memory_id=args.id, caller="agent"),
                         args)[0]
        code, result = _call(lambda: use_cases(app).purge(memory_id=args.id), args)
        if code == EXIT_OK:
            print(json.dumps(result, indent=2) if args.json else
                  f"purged {result['id']}: deleted from the store; its text replaced in "
                  f"{sum(result['scrubbed'].values())} journal entries")
        return code
    caller, here = _caller(app)
    code, result = _call(lambda: use_cases(app).forget(memory_id=args.id, caller=caller,
                                                       directory=here), args)
    return code if code != EXIT_OK else _show(args, result, "forgot")


def cmd_edit(app: App, args: argparse.Namespace) -> int:
    """``edit ID [TEXT] [--type T]``: print the memory as it is now; exit 5 when there is
    no such memory, 6 when it is retired (or the agent may not)."""
    caller, here = _caller(app)
    code, result = _call(lambda: use_cases(app).edit(
        memory_id=args.id, content=args.text, type=args.type, caller=caller,
        directory=here), args)
    if code != EXIT_OK:
        return code
    return _show(args, result, "edited" if result["status"] == "edited" else "unchanged")


def cmd_restore(app: App, args: argparse.Namespace) -> int:
    """``restore ID``: bring a forgotten memory back; exit 5 when there is no such memory,
    6 when it is active or a dream retired it (or the agent may not)."""
    caller, here = _caller(app)
    code, result = _call(lambda: use_cases(app).restore(memory_id=args.id, caller=caller,
                                                        directory=here), args)
    return code if code != EXIT_OK else _show(args, result, "restored")


def cmd_confirm(app: App, args: argparse.Namespace) -> int:
    """``confirm [ID] [--reject]``: list the pending notes, or answer one; exit 5 when
    there is no such memory, 6 when it is not pending or the agent asks."""
    if args.id is None:
        rows = use_cases(app).pending()
        if args.json:
            print(json.dumps(rows, indent=2))
        elif not rows:
            print("no pending notes of the agent")
        for m in [] if args.json else rows:
            print(f"{m['id']}  [{m['type']}, user]  {m['content']}")
        return EXIT_OK
    caller = "agent" if as_agent(app) else "user"
    code, result = _call(lambda: use_cases(app).confirm(
        memory_id=args.id, reject=args.reject, caller=caller), args)
    if code != EXIT_OK:
        return code
    return _show(args, result, result["status"])


def _show(args: argparse.Namespace, result: dict[str, Any], verb: str,
          where: str | None = None) -> int:
    """Print a use case's answer about one memory (JSON with ``--json``, else one line, and
    on stderr what was redacted); return exit 0."""
    if args.json:
        print(json.dumps(result, indent=2))
        return EXIT_OK
    m = result["memory"]
    tag = f"{m['type']}, {where}" if where else m["type"]
    print(f"{verb} {m['id']}  [{tag}]  {m['content']}")
    for old in result.get("superseded") or []:
        print(f"retired {old}  (superseded by {m['id']}; `journal` lists the run to undo)")
    if result.get("redactions"):
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(result["redactions"].items()))
        print(f"redacted before storing: {kinds}", file=sys.stderr)
    return EXIT_OK


def cmd_profile(app: App, args: argparse.Namespace) -> int:
    """``profile``: the user-scope memories, one block per type."""
    prof = use_cases(app).profile()
    if args.json:
        print(json.dumps(prof, indent=2))
        return EXIT_OK
    if not prof["total"]:
        print(f"no user-scope memories (user {prof['user_id']})")
        return EXIT_OK
    print(f"user {prof['user_id']}: {prof['total']} memories, last change "
          f"{prof['updated_at']}")
    for type_, group in prof["types"].items():
        print(f"\n{type_} ({group['count']}, last change {group['updated_at']})")
        for m in group["memories"]:
            print(f"  {m['id']}  {m['content']}")
    return EXIT_OK
