"""Latency of ``opencode-memoryd run``: how fast a commit is noticed, and how fast it is stored.

The daemon runs as a real child process (``python -m opencode_memoryd --config CFG run``)
in a throw-away HOME/XDG tree, tailing a copy of ``tests/fixtures/opencode-sample.db`` at
``$XDG_DATA_HOME/opencode/opencode.db``; turns are written into it with
``tests/opencode_writer.py`` exactly as OpenCode writes them (many small WAL commits per
turn). The daemon's state file is read through a separate read-only connection
(``file:…?mode=ro``), polled every 3 ms.

1. **commit → session marked dirty** (rules mode, ``settle_seconds = 0.2``,
   ``quiet_period_seconds = 30`` so no extraction runs meanwhile). After the start-up
   catch-up has drained, N times: append a turn to a session (every fifth time a new one)
   and time from the commit that changes the session row (the ``INSERT INTO session`` of a
   new session, else the first ``time_updated`` bump of the turn, which is what the daemon
   keys on; the turn's earlier message inserts do not change the session) until that
   session's ``queue`` row appears or its ``last_change_ms`` moves. A poller thread runs
   during the write, so a detection while the rest of the turn is still being written is
   seen at once. Also shown: the daemon's own detection stamp (``last_change_ms``) minus
   the commit time, i.e. without the ``queue`` commit and our polling.
2. **finished and quiet → stored, excluding the LLM** (rules mode, so no LLM call;
   ``quiet_period_seconds = 0.5``). N times: append a finished turn holding a
   "remember that …" directive and time from (the turn's last write + quiet period) until
   the session's ``marks`` row reaches the turn's last message id. That overhead includes
   detection, debounce scheduling, reading, rules extraction, the store write and the
   state commits; nothing is subtracted. The raw commit → stored time is shown as well,
   plus how many turns produced a stored memory (from the ``items`` outbox).

Run: ``.venv/bin/python bench/daemon_latency.py`` (about 2 minutes; ``-n`` and
``--stored-n`` change the sample counts). Prints the numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _daemon_common import (
    FIXTURE,
    Daemon,
    Sandbox,
    StateReader,
    TimedWriter,
    poll,
    summary_ms,
)
from opencode_writer import OpenCodeWriter

POLL_SECONDS = 0.003

_ADJ = ("amber", "brisk", "cobalt", "dusty", "eager", "frosty", "gentle", "hollow", "ivory",
        "jolly", "keen", "lunar", "mellow", "nimble", "olive", "plucky", "quiet", "rustic")
_NOUN = ("ledger", "gateway", "indexer", "scheduler", "mailer", "renderer", "uploader",
         "billing", "search", "metrics", "exporter", "crawler", "resolver", "notifier")
_TEAM = ("falcon", "otter", "heron", "badger", "lynx", "marten", "osprey", "walrus", "yak")


def config(quiet: float) -> str:
    return ("[opencode]\nsettle_seconds = 0.2\n"
            "[extraction]\nmode = \"rules\"\n"
            f"[daemon]\nquiet_period_seconds = {quiet}\n")


def top_level_sessions(db: Path) -> tuple[list[str], str, str]:
    """The fixture's top-level session ids (sub-agent sessions are not tailed on their
    own) and a (project id, directory) for new sessions."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM session WHERE parent_id IS NULL "
                                       "ORDER BY time_created")]
        project, directory = c.execute(
            "SELECT project_id, directory FROM session WHERE parent_id IS NULL AND "
            "project_id != 'global' ORDER BY time_created LIMIT 1").fetchone()
    return ids, project, directory


def wait_caught_up(d: Daemon, reader: StateReader, timeout: float) -> float:
    """Wait for start-up and for the catch-up queue to drain; return seconds since start."""
    d.wait_ready()
    poll(lambda: reader.queue_len() == 0, timeout=timeout, interval=0.05, alive=d.check_alive)
    return time.monotonic() - d.started


def bench_dirty(n: int, rng: random.Random) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ocm-lat-"))
    d: Daemon | None = None
    writer: TimedWriter | None = None
    readers: list[StateReader] = []
    try:
        box = Sandbox(root, config(30))
        shutil.copyfile(FIXTURE, box.opencode_db)
        sessions, project, directory = top_level_sessions(box.opencode_db)
        d = box.start_daemon()
        reader = StateReader(box.state_db)
        poller_reader = StateReader(box.state_db)
        readers += [reader, poller_reader]
        catch_up = wait_caught_up(d, reader, timeout=120)
        print(f"  start-up + catch-up of the sample ({len(sessions)} sessions, quiet 30 s): "
              f"{catch_up:.1f} s")
        writer = TimedWriter(box.opencode_db, seed=rng.randrange(1 << 30))
        cpu0, t0 = d.cpu_seconds(), time.monotonic()
        visible: list[float] = []
        stamped: list[float] = []
        missed = 0
        for i in range(n):
            new = i % 5 == 4
            sid_box: list[str] = [] if new else [sessions[i % len(sessions)]]
            prev = None if new else poller_reader.queue_row(sid_box[0])
            seen: dict[str, Any] = {}

            def watch(sid_box: list[str] = sid_box, prev: Any = prev,
                      seen: dict[str, Any] = seen) -> None:
                end = time.monotonic() + 15
                while not sid_box:
                    if time.monotonic() > end:
                        return
                    time.sleep(0.0005)
                sid = sid_box[0]
                while time.monotonic() < end:
                    row = poller_reader.queue_row(sid)
                    if row is not None and row != prev:
                        seen["t"], seen["row"] = time.time(), row
                        return
                    time.sleep(POLL_SECONDS)

            th = threading.Thread(target=watch, daemon=True)
            th.start()
            writer.session_commit = None
            if new:
                sid = writer.new_session(project_id=project, directory=directory,
                                         title=f"bench {i}")
                sid_box.append(sid)
                sessions.append(sid)
            writer.append_turn(sid_box[0], f"Please rename variable number {i} in the parser",
                               "Renamed.")
            th.join()
            commit = writer.session_commit
            assert commit is not None
            if "t" not in seen:
                missed += 1
                d.check_alive()
            else:
                visible.append(seen["t"] - commit)
                stamped.append(seen["row"][0] / 1000 - commit)
            time.sleep(rng.uniform(0.15, 0.35))
        cpu = d.cpu_seconds() - cpu0
        elapsed = time.monotonic() - t0
        code, stop_s = d.stop()
        return {"visible": visible, "stamped": stamped, "missed": missed, "cpu": cpu,
                "elapsed": elapsed, "exit": code, "stop_s": stop_s,
                "stderr": d.stderr_tail(8) if code != 0 else ""}
    finally:
        if writer is not None:
            writer.close()
        for r in readers:
            r.close()
        if d is not None:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


def directive(i: int, rng: random.Random) -> str:
    return (f"remember that the {rng.choice(_ADJ)} {rng.choice(_NOUN)} service of release "
            f"{i}.{rng.randrange(100)} listens on port {rng.randrange(1024, 65535)} and "
            f"belongs to team {rng.choice(_TEAM)}-{rng.randrange(1000)}")


def bench_stored(n: int, quiet: float, rng: random.Random) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ocm-lat-"))
    d: Daemon | None = None
    writer: OpenCodeWriter | None = None
    reader: StateReader | None = None
    try:
        box = Sandbox(root, config(quiet))
        shutil.copyfile(FIXTURE, box.opencode_db)
        sessions, project, directory = top_level_sessions(box.opencode_db)
        d = box.start_daemon()
        reader = StateReader(box.state_db)
        catch_up = wait_caught_up(d, reader, timeout=120)
        print(f"  start-up + catch-up of the sample ({len(sessions)} sessions, quiet {quiet} s):"
              f" {catch_up:.1f} s")
        writer = OpenCodeWriter(box.opencode_db, seed=rng.randrange(1 << 30))
        overhead: list[float] = []
        raw: list[float] = []
        missed = 0
        with_memory = 0
        for i in range(n):
            if i % 5 == 4:
                sid = writer.new_session(project_id=project, directory=directory,
                                         title=f"bench {i}")
                sessions.append(sid)
            else:
                sid = sessions[i % len(sessions)]
            ids = writer.append_turn(sid, directive(i, rng), "Noted.")
            last_write = time.time()
            try:
                _, stored = poll(lambda s=sid, m=ids["assistant"]: reader.mark(s) == m,
                                 timeout=30, interval=POLL_SECONDS, alive=d.check_alive)
            except TimeoutError:
                missed += 1
                continue
            overhead.append(stored - (last_write + quiet))
            raw.append(stored - last_write)
            rows = reader.query("SELECT status, result FROM items WHERE session_id=? AND "
                                "last_id=?", (sid, ids["assistant"]))
            if rows and rows[0][0] == "stored" and json.loads(rows[0][1])["candidates"]:
                with_memory += 1
            time.sleep(rng.uniform(0.1, 0.3))
        code, stop_s = d.stop()
        return {"overhead": overhead, "raw": raw, "missed": missed, "with_memory": with_memory,
                "exit": code, "stop_s": stop_s,
                "stderr": d.stderr_tail(8) if code != 0 else ""}
    finally:
        if writer is not None:
            writer.close()
        if reader is not None:
            reader.close()
        if d is not None:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=50, help="commit → dirty samples (default 50)")
    ap.add_argument("--stored-n", type=int, default=40,
                    help="finished → stored samples (default 40)")
    ap.add_argument("--quiet", type=float, default=0.5,
                    help="quiet period of the stored measurement, s (default 0.5)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)

    print("1. commit -> session marked dirty (rules mode, settle 0.2 s, quiet 30 s)")
    r = bench_dirty(args.n, rng)
    print(f"  seen in the queue table (polled every {POLL_SECONDS * 1000:.0f} ms):")
    print(f"    {summary_ms(r['visible'])}")
    print("  daemon's own detection stamp (queue.last_change_ms - commit time):")
    print(f"    {summary_ms(r['stamped'])}")
    print(f"  not detected within 15 s: {r['missed']}")
    print(f"  daemon CPU over the {r['elapsed']:.1f} s of writes: {r['cpu']:.2f} s")
    print(f"  SIGTERM -> exit: code {r['exit']} after {r['stop_s']:.2f} s")
    if r["stderr"]:
        print("  stderr tail:\n" + r["stderr"])

    print(f"\n2. finished and quiet -> stored, rules mode (no LLM), quiet {args.quiet} s")
    s = bench_stored(args.stored_n, args.quiet, rng)
    print("  overhead = stored - (last write + quiet period):")
    print(f"    {summary_ms(s['overhead'])}")
    print("  raw commit (last write of the turn) -> stored:")
    print(f"    {summary_ms(s['raw'])}")
    print(f"  turns whose directive became a stored memory: {s['with_memory']}/"
          f"{len(s['raw'])}; not stored within 30 s: {s['missed']}")
    print(f"  SIGTERM -> exit: code {s['exit']} after {s['stop_s']:.2f} s")
    if s["stderr"]:
        print("  stderr tail:\n" + s["stderr"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
