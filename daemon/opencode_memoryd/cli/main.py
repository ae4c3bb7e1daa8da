"""Command line: ``opencode-memoryd COMMAND``. The only place that picks exit codes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd import __version__, logs
from opencode_memoryd import config as cfgmod
from opencode_memoryd.compose import App, normalize_dir
from opencode_memoryd.errors import (
    ConfigError,
    MemorydError,
    SourceError,
    StateError,
    StoreError,
    UpstreamError,
)

log = structlog.get_logger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_SOURCE = 4
EXIT_CONFIG = 78
EXIT_INTERRUPTED = 130

#: How long a command waits (s) for a daemon that is starting to serve it.
DAEMON_START_WAIT_SECONDS = 60.0

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    operational failure: the LLM endpoint or the store failed, or a session could
       not be processed (its high-water mark did not move; the next run retries it)
  2    usage error
  3    unexpected internal error (the traceback is in the log file)
  4    OpenCode database missing, unreadable, or of an unrecognised schema
  78   configuration error (EX_CONFIG)
  130  interrupted
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="opencode-memoryd",
        description="Turn OpenCode sessions into durable memories in Qdrant.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--config", metavar="PATH",
                   help="config file (default: $OPENCODE_MEMORYD_CONFIG, else "
                        "$XDG_CONFIG_HOME/opencode-memoryd/config.toml)")
    p.add_argument("-v", "--verbose", action="store_true", help="log info events to stderr")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("run", help="run the daemon in the foreground (for systemd or launchd)",
                   description="Tail OpenCode's databases and extract sessions as they go "
                               "idle. Stays in the foreground; stops cleanly (exit 0) on "
                               "SIGTERM or SIGINT.",
                   epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)

    m = sub.add_parser("maintain", help="extract memories from sessions up to now, then exit",
                       epilog=EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    target = m.add_mutually_exclusive_group(required=True)
    target.add_argument("--dir", metavar="DIR",
                        help="the project folder: sessions whose project worktree is DIR or "
                             "whose directory is DIR or below it (DIR need not exist here)")
    target.add_argument("--all", action="store_true", help="every project")
    m.add_argument("--db", metavar="PATH", help="OpenCode database (default: discovered)")
    m.add_argument("--json", action="store_true", help="print the report as JSON")

    ls = sub.add_parser("list", help="list stored memories")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--dir", metavar="DIR", help="only the memories of DIR's project")
    which.add_argument("--user", action="store_true", help="only user-scope memories")
    ls.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    ls.add_argument("--all", action="store_true",
                    help="also the memories a dream retired (tombstones)")
    ls.add_argument("--json", action="store_true", help="print a JSON array")

    s = sub.add_parser("search", help="search memories (BM25, plus dense vectors if set up)")
    s.add_argument("query")
    s.add_argument("--dir", metavar="DIR",
                   help="DIR's project memories and user-scope memories only")
    s.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    s.add_argument("--limit", type=int, default=10, metavar="N", help="results (default 10)")
    s.add_argument("--all", action="store_true",
                   help="also match the memories a dream retired (tombstones)")
    s.add_argument("--json", action="store_true", help="print a JSON array")

    st = sub.add_parser("status", help="what is stored, where, and what the last runs did")
    st.add_argument("--json", action="store_true", help="print JSON")

    d = sub.add_parser("dream", help="consolidate a scope now: merge duplicates, retire "
                                     "stale facts (recorded in the dream journal)")
    dw = d.add_mutually_exclusive_group(required=True)
    dw.add_argument("--dir", metavar="DIR", help="dream DIR's project")
    dw.add_argument("--user", action="store_true", help="dream the user scope")
    dw.add_argument("--undo", metavar="RUN_ID", help="restore the memories as they were "
                                                     "before that dream")
    d.add_argument("--dry-run", action="store_true", help="plan and check, change nothing")
    d.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    d.add_argument("--json", action="store_true", help="print the journal entry as JSON")

    sh = sub.add_parser("show", help="one memory with its lineage (sessions, messages, "
                                     "dreams)")
    sh.add_argument("id")
    sh.add_argument("--json", action="store_true", help="print JSON")

    j = sub.add_parser("journal", help="print the dream journal (newest first)")
    jw = j.add_mutually_exclusive_group()
    jw.add_argument("--dir", metavar="DIR", help="only the dreams of DIR's project")
    jw.add_argument("--user", action="store_true", help="only the dreams of the user scope")
    j.add_argument("--db", metavar="PATH", help="OpenCode database used to resolve --dir")
    j.add_argument("--limit", type=int, default=20, metavar="N", help="entries (default 20)")
    j.add_argument("--json", action="store_true", help="print a JSON array")

    inst = sub.add_parser("install-service",
                          help="write the systemd user unit (Linux) or launchd agent (macOS)")
    inst.add_argument("--dry-run", action="store_true",
                      help="print the file and where it would go; write nothing")
    sub.add_parser("uninstall-service", help="remove the service file written by "
                                             "install-service")

    c = sub.add_parser("config", help="manage the config file")
    csub = c.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    ci = csub.add_parser("init", help="write a commented config file (never overwrites)")
    ci.add_argument("path", nargs="?", help="where (default: the config path)")
    csub.add_parser("show", help="print the effective config and its path")
    csub.add_parser("path", help="print the config path")
    return p


def _table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _progress(sessions: list[Any]) -> Any:
    if not sys.stderr.isatty():
        return sessions
    from tqdm import tqdm

    return tqdm(sessions, desc="sessions", unit="session", leave=False)


def _via_daemon(app: App, name: str, payload: dict[str, Any]) -> tuple[bool, Any]:
    """Ask a running daemon (which owns the embedded store) to do the work.

    Returns ``(True, result)`` when a daemon answered, ``(False, None)`` when none runs.
    """
    sock = app.daemon_socket() or _wait_for_starting_daemon(app)
    if sock is None:
        return False, None
    from opencode_memoryd.errors import DaemonUnreachableError, RemoteError
    from opencode_memoryd.serve.control import ControlClient

    with ControlClient(sock) as client:
        if client.ping() is None:
            return False, None
        try:
            return True, client.call(name, payload)
        except DaemonUnreachableError:
            return False, None
        except RemoteError as exc:
            raise _REMOTE_ERRORS.get(exc.type, MemorydError)(str(exc)) from exc


def _daemon_starting(app: App) -> int | None:
    """The pid of a daemon that is starting (``daemon.pid`` names a live
    ``opencode-memoryd`` / ``opencode_memoryd`` process, and it does not serve yet)."""
    try:
        pid = int((app.state_dir / "daemon.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
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
    pid = _daemon_starting(app)
    if pid is None:
        return None
    print(f"opencode-memoryd: waiting for the daemon (pid {pid}) to finish starting",
          file=sys.stderr)
    deadline = time.monotonic() + DAEMON_START_WAIT_SECONDS
    while time.monotonic() < deadline:
        sock = app.daemon_socket()
        if sock is not None:
            return sock
        if _daemon_starting(app) is None:
            return app.daemon_socket()
        time.sleep(0.2)
    return None


def _remote_upstream(message: str) -> UpstreamError:
    return UpstreamError(message, kind="remote", retryable=False)


_REMOTE_ERRORS: dict[str, Any] = {
    "SourceError": SourceError, "SourceSchemaError": SourceError, "StoreError": StoreError,
    "EmbedderMismatchError": StoreError, "StateError": StateError,
    "UpstreamError": _remote_upstream,
}


def _cmd_maintain(app: App, args: argparse.Namespace) -> int:
    directory = None if args.all else normalize_dir(args.dir)
    served, summary = _via_daemon(app, "maintain", {"directory": directory, "db": args.db})
    if not served:
        summary = app.maintain(directory=directory, db_override=args.db,
                               progress=_progress if args.all else None)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        rows = [
            (r["session_id"], r["turns_read"], r["added"], sum(r["skipped"].values()),
             r["llm_calls"], f"{r['tokens_in']}/{r['tokens_out']}",
             sum(r["redactions"].values()), r["error"] or "ok")
            for r in summary["sessions"] if r["turns_read"] or r["error"] or r["replayed_items"]
        ]
        t = summary["totals"]
        print(f"mode: {summary['mode']}  sessions: {t['sessions']}  turns read: "
              f"{t['turns_read']}  memories added: {t['added']}  skipped: {t['skipped']}  "
              f"LLM calls: {t['llm_calls']}  tokens in/out: {t['tokens_in']}/{t['tokens_out']}")
        if rows:
            print(_table(rows, ["session", "turns", "added", "skipped", "llm", "tokens",
                                "redacted", "result"]))
    return EXIT_FAILURE if summary["failed"] else EXIT_OK


def _print_memories(memories: Sequence[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(list(memories), indent=2))
        return
    if not memories:
        print("no memories")
        return
    for m in memories:
        where = "user" if m["scope"] == "user" else (m["project_root"] or m["project_id"])
        retired = ""
        if m.get("status") == "retired":
            retired = "  (retired" + (f", superseded by {m['superseded_by']}"
                                      if m.get("superseded_by") else "") + ")"
        print(f"{m['id']}  [{m['type']}, {where}]  {m['content']}{retired}")


def _cmd_list(app: App, args: argparse.Namespace) -> int:
    payload = {"user": args.user, "directory": args.dir, "db": args.db,
               "include_retired": args.all}
    served, memories = _via_daemon(app, "list", payload)
    if not served:
        with app.resources() as (_state, store):
            memories = app.list_memories(store, **payload)
    _print_memories(memories, args.json)
    return EXIT_OK


def _cmd_search(app: App, args: argparse.Namespace) -> int:
    if args.limit < 1:
        print("opencode-memoryd: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    payload = {"query": args.query, "directory": args.dir, "db": args.db,
               "limit": args.limit, "include_retired": args.all}
    served, hits = _via_daemon(app, "search", payload)
    if not served:
        with app.resources() as (_state, store):
            hits = app.search(store, args.query, directory=args.dir, db=args.db,
                              limit=args.limit, include_retired=args.all)
    _print_memories(hits, args.json)
    return EXIT_OK


def _cmd_status(app: App, args: argparse.Namespace) -> int:
    served, info = _via_daemon(app, "status", {})
    if not served:
        with app.resources() as (state, store):
            info = app.status_info(state, store)
        info["daemon"] = {"running": False}
    info["version"] = __version__
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    d = info["daemon"]
    print(f"opencode-memoryd {__version__}")
    if d.get("running"):
        print(f"daemon:      running (pid {d['pid']}, since {d['since']}, "
              f"{d['change_detection']})")
        if d.get("catching_up"):
            print("catching up: the first pass over the databases is still running")
        if d.get("paused"):
            print(f"paused:      {d['paused']['reason']} (until {d['paused']['until']})")
        print(f"pending:     {len(d['pending'])} session(s)"
              + "".join(f"\n             {p['session_id']} due {p['due']}"
                        + (f" ({p['last_error']})" if p.get("last_error") else "")
                        for p in d["pending"][:10]))
        for key, e in sorted(d.get("last_extraction", {}).items()):
            print(f"extracted:   {e['project_root']} at {e['at']} (+{e['added']})")
        print(f"tokens today: {d['tokens_today']}")
        if d.get("last_error"):
            print(f"last error:  {d['last_error']}")
    else:
        print("daemon:      not running")
    print(f"config:      {info['config_path']}"
          f"{'' if info['config_file_exists'] else ' (not present: defaults)'}")
    print(f"state:       {info['state_dir']}")
    print(f"extraction:  {info['extraction_mode']}")
    store_info = info["store"]
    print(f"store:       {store_info.get('backend')} "
          f"{store_info.get('path') or store_info.get('url') or ''}"
          f" ({store_info.get('points', '?')} points)")
    for db in info["databases"]:
        print(f"database:    {db['path']}  "
              + (db.get("error") or f"{db['schema']}, {db['sessions']} sessions"))
    if "databases_error" in info:
        print(f"database:    {info['databases_error']}")
    counts = info["memories"]
    total = sum(counts.values())
    print(f"memories:    {total}" + (" (" + ", ".join(f"{k}: {v}" for k, v in
                                                     sorted(counts.items())) + ")"
                                     if counts else ""))
    s = info["state"]
    print(f"sessions:    {s['sessions_tracked']} tracked; items stored {s['items_stored']}, "
          f"pending {s['items_pending']}; tokens in/out {s['tokens_in']}/{s['tokens_out']}")
    for r in info["last_runs"][:1]:
        t = r.get("summary") or {}
        print(f"last run:    {r['started_at']} {r['command']} "
              f"added {t.get('added', '?')}, failed {t.get('failed', '?')}"
              + ("" if r.get("ended_at") else " (did not finish)"))
    return EXIT_OK


def _cmd_config(app: App | None, args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if args.config_command == "path":
        print(args.config or cfgmod.config_path(env))
        return EXIT_OK
    if args.config_command == "init":
        target = Path(args.path or args.config or cfgmod.config_path(env)).expanduser()
        try:
            written = cfgmod.init_config(target)
        except FileExistsError:
            print(f"opencode-memoryd: {target} already exists; not overwritten",
                  file=sys.stderr)
            return EXIT_FAILURE
        print(f"wrote {written}")
        return EXIT_OK
    assert app is not None
    import tomli_w

    print(f"# {app.config_path}")
    print(tomli_w.dumps(app.config.model_dump(mode="json")))
    return EXIT_OK


def _dream_locally(app: App, payload: dict[str, Any]) -> dict[str, Any]:
    from opencode_memoryd.dream.journal import DreamJournal

    journal = DreamJournal(app.journal_path)
    with app.resources() as (state, store):
        dreamer = app.build_dreamer(state, store)
        for run_id in dreamer.recover():
            result = dreamer.result_of(run_id)
            if result is not None:
                journal.append(dict(result.to_journal()))
        if payload.get("undo"):
            entry = dict(dreamer.undo(str(payload["undo"])).to_journal())
            journal.append(entry)  # the run's "undone" entry, beside its "ok" one
            return entry
        return app.run_dream(dreamer, journal, payload.get("project_key"),
                             payload.get("project_root"), trigger="forced",
                             dry_run=bool(payload.get("dry_run")))


def _cmd_dream(app: App, args: argparse.Namespace) -> int:
    from opencode_memoryd.cli.journal_table import render_table

    payloads: list[dict[str, Any]] = []
    if args.undo:
        payloads.append({"undo": args.undo})
    elif args.user:
        payloads.append({"project_key": None, "project_root": None, "dry_run": args.dry_run})
    else:
        directory = normalize_dir(args.dir)
        keys = sorted(app.project_keys_for_dir(directory, args.db))
        if not keys:
            print(f"opencode-memoryd: no OpenCode project found for {directory}",
                  file=sys.stderr)
            return EXIT_FAILURE
        payloads += [{"project_key": k, "project_root": directory, "dry_run": args.dry_run}
                     for k in keys]
    entries = []
    for payload in payloads:
        served, entry = _via_daemon(app, "dream", payload)
        entries.append(entry if served else _dream_locally(app, payload))
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
    return EXIT_FAILURE if any(e.get("status") == "failed" for e in entries) else EXIT_OK


def _cmd_show(app: App, args: argparse.Namespace) -> int:
    from opencode_memoryd.dream.journal import DreamJournal

    served, shown = _via_daemon(app, "show", {"id": args.id})
    if not served:
        with app.resources() as (_state, store):
            shown = app.show_memory(store, DreamJournal(app.journal_path), args.id)
    if shown is None:
        print(f"opencode-memoryd: no memory with id {args.id}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(shown, indent=2))
        return EXIT_OK
    m, lin = shown["memory"], shown["lineage"]
    print(f"{m['id']}  [{m['type']}, {m['scope']}, {m.get('status', 'active')}]")
    print(f"  {m['content']}")
    print(f"  project:   {m.get('project_root') or m.get('project_id') or '-'}")
    print(f"  created:   {m['created_at']}   updated: {m['updated_at']}   source: {m['source']}")
    print(f"  sessions:  {', '.join(lin['sessions'] or [])}")
    print(f"  messages:  {', '.join(lin['message_ids'] or [])}")
    for x in lin["merged_from"]:
        print(f"  merged from {x['id']}: {x['content']}")
    if lin.get("superseded_by"):
        print(f"  superseded by {lin['superseded_by']} ({m.get('retired_reason') or ''})")
    for e in lin["dreams"]:
        print(f"  dream {e.get('run_id')} {e.get('started_at')} {e.get('status')}")
    return EXIT_OK


def _cmd_journal(app: App, args: argparse.Namespace) -> int:
    from opencode_memoryd.cli.journal_table import render_table
    from opencode_memoryd.dream.journal import DreamJournal

    journal = DreamJournal(app.journal_path)
    if args.dir:
        keys = sorted(app.project_keys_for_dir(normalize_dir(args.dir), args.db))
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


def _cmd_service(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from opencode_memoryd.install import service as service_files

    try:
        if args.command == "uninstall-service":
            u = service_files.uninstall(env=env)
            print(f"{'removed' if u.removed else 'not present'}: {u.path}")
            print(f"to stop it first: {u.disable_command}")
            return EXIT_OK
        r = service_files.install(dry_run=args.dry_run, env=env)
    except ValueError as exc:
        print(f"opencode-memoryd: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.dry_run:
        print(f"# would write {r.path}\n{r.content}")
    else:
        print(f"wrote {r.path}")
    print(f"enable it with: {r.enable_command}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run the CLI; returns the exit code (see ``--help``)."""
    env = dict(os.environ if env is None else env)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "config" and args.config_command in ("init", "path"):
            return _cmd_config(None, args, env)
        if args.command in ("install-service", "uninstall-service"):
            return _cmd_service(args, env)
        explicit = Path(args.config).expanduser() if args.config else None
        config = cfgmod.load_config(explicit, env)
        app_path = explicit or cfgmod.config_path(env)
        app = App(config=config, env=env, config_path=app_path)
        logs.configure(
            log_dir=app.state_dir,
            level=config.log.level,
            console_level="info" if args.verbose or args.command == "run" else "warning",
            max_bytes=config.log.file_max_bytes,
            backups=config.log.file_backups,
        )
        log.info("command_started", command=args.command, version=__version__,
                 config=str(app_path))
        if args.command == "run":
            from opencode_memoryd.serve.daemon import run

            return run(app)
        if args.command == "maintain":
            return _cmd_maintain(app, args)
        if args.command == "list":
            return _cmd_list(app, args)
        if args.command == "search":
            return _cmd_search(app, args)
        if args.command == "status":
            return _cmd_status(app, args)
        if args.command == "journal":
            return _cmd_journal(app, args)
        if args.command == "dream":
            return _cmd_dream(app, args)
        if args.command == "show":
            return _cmd_show(app, args)
        return _cmd_config(app, args, env)
    except ConfigError as exc:
        print(f"opencode-memoryd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SourceError as exc:
        print(f"opencode-memoryd: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except (UpstreamError, StoreError, StateError) as exc:
        print(f"opencode-memoryd: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except MemorydError as exc:
        print(f"opencode-memoryd: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception:  # a bug: say where the traceback went
        log.exception("internal_error")
        print("opencode-memoryd: internal error; the traceback is in "
              f"{logs.LOG_FILE_NAME} under the state dir", file=sys.stderr)
        return EXIT_INTERNAL
