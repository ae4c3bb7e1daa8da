"""``status``: what is stored, where, and what the last runs did."""

from __future__ import annotations

import json

from opencode_memoryd import __version__
from opencode_memoryd.cli.commands import COMMANDS, declare
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_OK

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from opencode_memoryd.compose import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``status`` to the CLI (its arguments from
    :data:`~opencode_memoryd.cli.commands.SERVED`)."""
    declare(sub.add_parser("status", help=COMMANDS["status"]), "status"
            ).set_defaults(handler=cmd_status)


def cmd_status(app: App, args: argparse.Namespace) -> int:
    """``status``: the daemon, config, store, databases, memories and the last run."""
    info = use_cases(app).status()
    info["version"] = __version__
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    print(f"opencode-memoryd {__version__}")
    _print_daemon(info["daemon"])
    _print_store(info)
    return EXIT_OK


def _print_daemon(d: dict[str, Any]) -> None:
    if d.get("running"):
        print(f"daemon:      running (pid {d['pid']}, since {d['since']}, "
              f"{d['change_detection']})")
        for a in d.get("alerts", []):
            print(f"WARNING:     {a['message']} (since {a['since']})")
        if d.get("catching_up"):
            print("catching up: the first pass over the databases is still running")
        if d.get("paused"):
            print(f"paused:      {d['paused']['reason']} (until {d['paused']['until']})")
        print(f"pending:     {d.get('pending_count', len(d['pending']))} session(s)"
              + "".join(f"\n             {p['session_id']} due {p['due']}"
                        + (f" ({p['last_error']})" if p.get("last_error") else "")
                        for p in d["pending"][:10]))
        failing = d.get("failing") or {}
        for f in failing.get("sessions", [])[:5]:
            print(f"{'WARNING:' if f['given_up'] else 'failing:':<13}session {f['session_id']} "
                  f"{'given up after' if f['given_up'] else 'failed'} {f['attempts']} "
                  f"attempt(s): {f['last_error']}")
        for _key, e in sorted(d.get("last_extraction", {}).items()):
            total = e.get("added_since_start", e["added"])
            print(f"extracted:   {e['project_root']} at {e['at']} (+{total} since the daemon "
                  f"started; its last session +{e['added']})")
        if d.get("config_error"):
            print(f"WARNING:     {d['config_error']}; the daemon runs with the config it "
                  "started with and takes the file up once it is valid")
        elif d.get("config_changed"):
            print("config:      the config file was edited; the daemon restarts in place to "
                  "take it up")
        print(f"tokens today: {d['tokens_today']}")
        if d.get("last_error"):
            print(f"last error:  {d['last_error']}")
    else:
        print("daemon:      not running")


def _print_llm(llm: dict[str, Any], counts: dict[str, Any]) -> None:
    for m in llm.get("modes", []):
        print(f"structured:  {m['json_mode']} for {m['base_url']} (model {m['model']})"
              + ("" if m["detail"] == "works" else f": {m['detail']}"))
    given_up = int(counts.get("chunks_given_up", 0))
    if given_up:
        print(f"WARNING:     {given_up} chunk(s) given up after repeated identical failures "
              "(captured by the rules only); fix the cause, then run "
              "`opencode-memoryd maintain --all --retry-failed`")
        for f in llm.get("given_up", [])[:5]:
            print(f"             {f['session_id']} ({f['failures']}x): {f['reason']}")
    if counts.get("chunks_failing"):
        print(f"failing:     {counts['chunks_failing']} chunk(s) failed and will be retried")


def _print_search(store_info: dict[str, Any], embedding: dict[str, Any],
                  daemon: dict[str, Any]) -> None:
    e = store_info.get("embedder")
    print("search:      " + (f"BM25 + embedder {e['name']!r} ({e['dimensions']} dimensions)"
                             if e else "BM25 (keywords) alone"))
    if embedding.get("unavailable"):
        print(f"WARNING:     the local embedding model cannot run here: "
              f"{embedding['unavailable']}; search is BM25 alone")
    m = daemon.get("store_migration")
    if m and m.get("reembedded"):
        print(f"re-embedded: {m['points']} memories when the daemon started "
              f"({m['from']} -> {m['to']})")


def _print_store(info: dict[str, Any]) -> None:
    print(f"config:      {info['config_path']}"
          f"{'' if info['config_file_exists'] else ' (not present: defaults)'}")
    print(f"state:       {info['state_dir']}")
    print(f"extraction:  {info['extraction_mode']}")
    if info.get("user_id"):
        print(f"user:        {info['user_id']} (owner of your user-scope memories)")
    store_info = info["store"]
    print(f"store:       {store_info.get('backend')} "
          f"{store_info.get('path') or store_info.get('url') or ''}"
          f" ({store_info.get('points', '?')} points)")
    _print_search(store_info, info.get("embedding") or {}, info["daemon"])
    for db in info["databases"]:
        print(f"database:    {db['path']}  "
              + (db.get("error") or f"{db['schema']}, {db['sessions']} sessions"))
        if db.get("unread_tables"):
            print(f"WARNING:     {db['path']}: rows are written to tables this version "
                  f"cannot read ({', '.join(db['unread_tables'])}); their turns are not "
                  "captured: upgrade opencode-memoryd")
    if "databases_error" in info:
        print(f"database:    {info['databases_error']}")
    counts = info["memories"]
    total = sum(counts.values())
    print(f"memories:    {total}" + (" (" + ", ".join(f"{k}: {v}" for k, v in
                                                     sorted(counts.items())) + ")"
                                     if counts else ""))
    s = info["state"]
    failed_tokens = s.get("failed_tokens_in", 0) + s.get("failed_tokens_out", 0)
    print(f"sessions:    {s['sessions_tracked']} tracked; items stored {s['items_stored']}, "
          f"pending {s['items_pending']}; tokens in/out {s['tokens_in']}/{s['tokens_out']}"
          + (f" (+{failed_tokens} in failed calls)" if failed_tokens else ""))
    _print_llm(info.get("llm") or {}, s)
    for r in info["last_runs"][:1]:
        t = r.get("summary") or {}
        print(f"last run:    {r['started_at']} {r['command']} "
              f"added {t.get('added', '?')}, failed {t.get('failed', '?')}"
              + ("" if r.get("ended_at") else " (did not finish)"))
