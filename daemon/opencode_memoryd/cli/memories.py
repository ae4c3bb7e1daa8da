"""``list``, ``search`` and ``show``: reading memories."""

from __future__ import annotations

import json
import sys

from opencode_memoryd.cli.commands import COMMANDS, SERVED, declare
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from opencode_memoryd.cli.render import print_memories
from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.errors import NotFoundError
from opencode_memoryd.staleness import stale_note

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    import argparse

    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list``, ``search`` and ``show`` to the CLI (the served ``list`` and ``search``
    with their arguments from :data:`~opencode_memoryd.cli.commands.SERVED`)."""
    for name, handler in (("list", cmd_list), ("search", cmd_search)):
        declare(sub.add_parser(name, help=COMMANDS[name],
                               description=SERVED[name].description), name
                ).set_defaults(handler=handler)

    sh = sub.add_parser("show", help=COMMANDS["show"])
    sh.add_argument("id", help="the memory id (or a unique prefix, 4+ characters)")
    sh.add_argument("--json", action="store_true", help="print JSON")
    sh.set_defaults(handler=cmd_show)


def _unknown_dir(app: App, args: argparse.Namespace) -> int | None:
    """When no project is found for ``--dir DIR``: say so (with the folders the store does
    have memories for; never a silent "no memories") and return exit 5; ``None`` when DIR
    has a project."""
    found = use_cases(app).resolve(directory=args.dir, db=args.db)
    if found["projects"]:
        return None
    from opencode_memoryd.cli.failures import report

    roots = found["store_roots"]
    known = ("the store has memories for: " + ", ".join(roots) if roots
             else "the store holds no project memories")
    return report(NotFoundError(
        f"no memories for {found['directory']}'s project: no OpenCode session ran there "
        f"and no stored memory belongs to it or a parent folder; {known}"),
        EXIT_NOT_FOUND, args.json)


def _here(app: App, args: argparse.Namespace) -> list[dict[str, object]] | None:
    """``list`` without a scope: the current folder's project memories when it has
    some (said on stderr), else ``None``."""
    import os

    here = normalize_dir(os.getcwd())
    service = use_cases(app)
    if not service.resolve(directory=here, db=args.db)["projects"]:
        return None
    found: list[dict[str, object]] = service.list(
        user=False, directory=here, db=args.db, include_retired=args.all)
    if found:
        print(f"opencode-memoryd: the memories of {here}'s project; `list --everywhere` "
              "lists every project's, `list --user` yours", file=sys.stderr)
    return found or None


def cmd_list(app: App, args: argparse.Namespace) -> int:
    """``list``: print the memories (DIR's project, user scope, every project's; without
    one of them the current folder's project when it has memories, else every project's);
    exit 5 when no project is found for DIR."""
    if not (args.dir or args.user or args.everywhere):
        here = _here(app, args)
        if here is not None:
            print_memories(here, args.json)
            return EXIT_OK
    memories = use_cases(app).list(user=args.user, directory=args.dir, db=args.db,
                                   include_retired=args.all)
    if args.dir and not memories and (code := _unknown_dir(app, args)) is not None:
        return code
    print_memories(memories, args.json)
    return EXIT_OK


def cmd_search(app: App, args: argparse.Namespace) -> int:
    """``search QUERY``: print the best matches; exit 5 when no project is found for
    DIR."""
    if args.limit < 1:
        print("opencode-memoryd: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    hits = use_cases(app).search(query=args.query, directory=args.dir, db=args.db,
                                 limit=args.limit, include_retired=args.all)
    if (args.dir and not any(h["scope"] == "project" for h in hits)
            and (code := _unknown_dir(app, args)) is not None):
        return code
    print_memories(hits, args.json)
    return EXIT_OK


def cmd_show(app: App, args: argparse.Namespace) -> int:
    """``show ID``: one memory and its lineage.

    Raises:
        NotFoundError: no memory has that id (exit 5).
    """
    shown = use_cases(app).show(memory_id=args.id)
    if shown is None:
        raise NotFoundError(f"no memory with id {args.id}; `list` or `search` shows the ids")
    if args.json:
        print(json.dumps(shown, indent=2))
        return EXIT_OK
    m, lin = shown["memory"], shown["lineage"]
    print(f"{m['id']}  [{m['type']}, {m['scope']}, {m.get('status', 'active')}]")
    print(f"  {m['content']}")
    print(f"  project:   {m.get('project_root') or m.get('project_id') or '-'}")
    print(f"  said:      {m.get('said_at') or m['created_at']}")
    if m.get("stale"):
        print(f"  {stale_note(m['stale'])}")
    print(f"  created:   {m['created_at']}   updated: {m['updated_at']}   source: {m['source']}")
    pending = "   pending your confirmation (`confirm ID`)" if m.get("pending") else ""
    print(f"  asserted by: {m.get('provenance') or '-'}{pending}")
    print(f"  sessions:  {', '.join(lin['sessions'] or [])}")
    print(f"  messages:  {', '.join(lin['message_ids'] or [])}")
    for x in lin["merged_from"]:
        print(f"  merged from {x['id']}: {x['content']}")
    if lin.get("superseded_by"):
        print(f"  superseded by {lin['superseded_by']} ({m.get('retired_reason') or ''})")
    for e in lin["dreams"]:
        print(f"  dream {e.get('run_id')} {e.get('started_at')} {e.get('status')}")
    return EXIT_OK
