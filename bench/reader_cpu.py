"""CPU of the OpenCode reader's per-session calls, through the session's storage.

A database of ``--sessions`` one-turn sessions is built as in ``daemon_cpu.py``
(``build_big_db``; kept in and reused from ``--db-cache``). In one process, each repetition
looks up the newest row of every session (``last_messages``), then for each session reads
its messages (``messages_after`` from the start) and asks whether a turn is in flight
(``in_flight``): the calls capture makes for every session, each of which first asks which
storage holds the session. Printed: the best process CPU time of ``--repeat``
repetitions, in all and per session. Compare two checkouts by running each with
``PYTHONPATH=<checkout>/daemon``. Prints numbers; asserts nothing about time.

Run: ``.venv/bin/python bench/reader_cpu.py`` (3,000 sessions, a few seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from daemon_cpu import build_big_db, session_count
from opencode_memoryd.source.reader import OpenCodeDB


def one_pass(db: OpenCodeDB, ids: list[str]) -> int:
    """The calls capture makes for every session; returns the messages read."""
    db.last_messages(ids)
    n = 0
    for sid in ids:
        n += len(db.messages_after(sid, None))
        db.in_flight(sid, now_ms=0, abandoned_ms=1)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--db-cache", type=Path, default=None,
                    help="keep the database here and reuse it next time")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ocm-reader-cpu-") as tmp:
        path = args.db_cache or Path(tmp) / f"reader-{args.sessions}.db"
        if not (path.exists() and session_count(path) == args.sessions):
            path.parent.mkdir(parents=True, exist_ok=True)
            build_big_db(path, args.sessions, 200)
        with OpenCodeDB(path) as db:
            ids = [s.id for s in db.sessions()]
            best = float("inf")
            n = 0
            for _ in range(args.repeat):
                started = time.process_time()
                n = one_pass(db, ids)
                best = min(best, time.process_time() - started)
    print(f"{len(ids)} sessions, {n} messages: best CPU {best * 1000:.0f} ms of "
          f"{args.repeat} ({best / max(len(ids), 1) * 1e6:.0f} us per session)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
