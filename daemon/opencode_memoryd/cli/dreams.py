"""``dream`` and ``journal``: consolidate a scope now, and read the dream journal."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_FAILURE, EXIT_OK
from opencode_memoryd.cli.manage import as_agent
from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.errors import NotFoundError

if TYPE_CHECKING:
    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dream`` and ``journal`` to the CLI."""
    d = sub.add_parser("dream", help=COMMANDS["dream"])
    dw = d.add_mutually_exclusive_group(required=True)
    dw.add_argument("--dir", metavar="DIR", type=normalize_dir, help="dream DIR's project")
    dw.add_argument("--user", action="store_true", help="dream the user scope")
    dw.add_argument("--undo", metavar="RUN_ID", help="restore the memories as they were "
                                                     "before that dream")
    d.add_argument("--dry-run", action="store_true", help="plan and check, change nothing")
    d.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    d.add_argument("--json", action="store_true", help="print the journal entry as JSON")
    d.set_defaults(handler=cmd_dream)

    j = sub.add_parser("journal", help=COMMANDS["journal"])
    jw = j.add_mutually_exclusive_group()
    jw.add_argument("--dir", metavar="DIR", type=normalize_dir,
                    help="only the dreams of DIR's project")
    jw.add_argument("--user", action="store_true", help="only the dreams of the user scope")
    j.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    j.add_argument("--limit", type=int, default=20, metavar="N", help="entries (default 20)")
    j.add_argument("--json", action="store_true", help="print a JSON array")
    j.set_defaults(handler=cmd_journal)


def cmd_dream(app: App, args: argparse.Namespace) -> int:
    """``dream``: dream (or undo) and print the journal entries and their operations.

    Raises:
        SourceError: ``--dir`` selects nothing and no OpenCode database can be read
            (exit 4).
        NotFoundError: no project for ``--dir`` (:func:`_dir_projects`), or no such run
            (exit 5).
        DreamError: the run cannot be undone (exit 6).
        RefusedError: run inside OpenCode (``OPENCODE=1``: the agent), anything but a dry
            run (exit 6).
    """
    service = use_cases(app)
    caller = "agent" if as_agent(app) else "user"
    if args.undo:
        entries = [service.undo(run_id=args.undo, caller=caller)]
    else:
        scopes = ([(None, None)] if args.user
                  else _dir_projects(app, args.dir, args.db))
        entries = [service.dream(project_key=key, project_root=root, dry_run=args.dry_run,
                                 caller=caller) for key, root in scopes]
    from opencode_memoryd.cli.journal_table import render_table

    if args.json:
        print(json.dumps(entries if len(entries) > 1 else entries[0], indent=2))
    else:
        print(render_table(entries))
        for e in entries:
            for op in e.get("operations") or []:
                print(f"  {op.get('op')}: {', '.join(op.get('texts') or [])}"
                      + (f"  ({op['reason']})" if op.get("reason") else ""))
            for r in e.get("rejected") or []:
                print(f"  rejected: {r.get('reason')}")
            fresh = e.get("freshness") or {}
            if fresh:
                print("  freshness: " + (fresh["error"] if "error" in fresh else
                      f"{fresh.get('stale', 0)} may be out of date ({fresh.get('marked', 0)} "
                      f"newly marked, {fresh.get('cleared', 0)} cleared, "
                      f"{fresh.get('unknown', 0)} unknown)"))
    return EXIT_FAILURE if any(e.get("status") == "failed" for e in entries) else EXIT_OK


def _dir_projects(app: App, directory: str, db: str | None, *,
                  required: bool = True) -> list[tuple[str, str]]:
    """``(project key, project root)`` of the projects ``--dir DIR`` selects, resolved as
    ``list --dir`` resolves it (:func:`~opencode_memoryd.usecases.projects.resolve_dir`:
    the OpenCode sessions there, else the store's memories of DIR or a parent of it).

    Raises:
        SourceError: only when ``required`` and nothing was found: no OpenCode database,
            or one that cannot be read (exit 4).
        NotFoundError: only when ``required``: neither selects a project (exit 5; the
            message names the folders the store has memories for).
    """
    found = use_cases(app).resolve(directory=directory, db=db)
    projects = [(p["project_id"], p["project_root"] or found["directory"])
                for p in found["projects"]]
    if projects or not required:
        return projects
    from opencode_memoryd.usecases.projects import project_keys_for_dir

    project_keys_for_dir(app, found["directory"], db, strict=True)  # no database: exit 4
    roots = found["store_roots"]
    raise NotFoundError(f"no OpenCode project found for {found['directory']}, and no "
                        "memory of it" + (f"; memories are stored for {', '.join(roots[:10])}"
                                          if roots else ""))


def cmd_journal(app: App, args: argparse.Namespace) -> int:
    """``journal``: the dream journal, newest first (read from the file; ``--dir`` selects
    projects as ``list --dir`` does)."""
    from opencode_memoryd.cli.journal_table import render_table
    from opencode_memoryd.dream.journal import DreamJournal

    journal = DreamJournal(app.journal_path)
    if args.dir:
        keys = [key for key, _root in _dir_projects(app, args.dir, args.db, required=False)]
        entries = sorted((e for k in keys for e in journal.entries(project_key=k)),
                         key=lambda e: str(e.get("started_at")), reverse=True)
        entries = entries[: args.limit]
    else:
        entries = journal.entries(user=args.user, limit=args.limit) if args.user else \
            journal.entries(limit=args.limit)
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        print(render_table(entries))
    return EXIT_OK
