"""Backfill in rules mode: ``maintain --all`` and the daemon's first start on a big database.

A database of ``--sessions`` one-turn sessions over 200 projects is built as in
``daemon_cpu.py`` (``build_big_db``), except that every ``--directive-every``-th session's
user text is a "remember that …" directive (so a share of the sessions stores a memory and
the store is written to); it is kept in and reused from ``--db-cache``. Everything runs as
real child processes (``python -m opencode_memoryd``) in a throw-away HOME/XDG tree, rules
mode, other settings at their defaults.

1. **maintain**: ``opencode-memoryd maintain --all --json`` on an empty state: wall time,
   sessions per second, CPU and peak RSS of the process (``wait4``), memories added.
2. **daemon first start**: ``opencode-memoryd run`` on an empty state, until every session
   is read (``marks`` holds one row per session and the queue is empty) or ``--timeout``:
   when commands are served (the first ``status`` answered on the control socket, timed
   from the ``exec``), the latency of a ``status`` call every second during the catch-up,
   when the first full pass was done, sessions per second over the whole catch-up, CPU,
   peak RSS (``VmHWM``) and threads.
3. **fsyncs** (``--fsync-sessions`` n, skipped with 0, needs ``strace``): ``maintain
   --all`` under ``strace -f -c -e trace=fsync,fdatasync,msync,sync_file_range`` on
   databases of n and 2n sessions of three kinds: no human text (the user text is
   ``synthetic``), human text that stores nothing, and a directive every tenth session.
   Printed: the sync calls of each run and the difference per session (what one more
   session costs; opening and closing the store and state file is the rest).

Each number is printed with its goal. Run: ``.venv/bin/python bench/backfill.py``
(100,000 sessions: about 15 minutes on 2 cores); ``--sessions 10000`` for a quick look.
Prints numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _daemon_common import (
    Daemon,
    Sandbox,
    StateReader,
    control_call,
    daemon_info,
    peak_rss_mb,
)
from daemon_cpu import build_big_db, copy_db, session_count

CONFIG = "[extraction]\nmode = \"rules\"\n"

_NOUN = ("ledger", "gateway", "indexer", "scheduler", "mailer", "renderer", "uploader",
         "billing", "search", "metrics", "exporter", "crawler", "resolver", "notifier")


def directive_text(every: int) -> Any:
    """Session ``i``'s user text: a directive every ``every`` sessions, else a request."""

    def text(i: int) -> str:
        if every and i % every == 0:
            return (f"remember that the {_NOUN[i % len(_NOUN)]} service number {i} listens "
                    f"on port {1024 + i % 60000}")
        return f"Fix the failing test number {i} in module m{i % 97}"

    return text


def ensure_db(path: Path, n: int, every: int, *, synthetic: bool = False,
              quiet: bool = False) -> None:
    if path.exists() and session_count(path) == n:
        if not quiet:
            print(f"  reused {path}")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    build_big_db(path, n, 200, user_text=directive_text(every), synthetic=synthetic)
    if not quiet:
        print(f"  built {path} in {time.monotonic() - t:.1f} s "
              f"({path.stat().st_size / 2**20:.0f} MiB)")


def goal(ok: bool) -> str:
    return "met" if ok else "NOT met"


def run_measured(cmd: list[str], env: dict[str, str], timeout: float
                 ) -> tuple[int, str, float, float, float]:
    """Run ``cmd``; return (exit code, stdout, wall s, CPU s, peak RSS MiB)."""
    with tempfile.TemporaryFile() as out:
        t = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        deadline = t + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return (proc.returncode, text, wall, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


# -- 1. maintain -------------------------------------------------------------------------


def bench_maintain(db: Path, n: int, timeout: float) -> None:
    print(f"1. maintain --all, rules mode, {n} sessions, empty state")
    root = Path(tempfile.mkdtemp(prefix="ocm-backfill-"))
    try:
        box = Sandbox(root, CONFIG)
        copy_db(db, box.opencode_db)
        cmd = [sys.executable, "-m", "opencode_memoryd", "--config", str(box.config),
               "maintain", "--all", "--json"]
        code, out, wall, cpu, rss = run_measured(cmd, box.full_env(), timeout)
        totals: dict[str, Any] = {}
        if code == 0:
            totals = json.loads(out).get("totals", {})
            done = int(totals.get("sessions", 0))
        else:  # killed at the timeout: what it read so far
            reader = StateReader(box.state_db)
            done = reader.marks_count()
            reader.close()
            print(f"  stopped after {timeout:.0f} s")
        rate = done / wall if wall else 0.0
        print(f"  exit code {code}; {done} sessions in {wall:.1f} s = {rate:.0f} sessions/s "
              f"(goal >= 200: {goal(rate >= 200)}); CPU {cpu:.1f} s "
              f"({100 * cpu / wall:.0f} % of one core); peak RSS {rss:.0f} MiB; "
              f"memories added {totals.get('added')}, failed {totals.get('failed')}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- 2. the daemon's first start -----------------------------------------------------------


def bench_first_start(db: Path, n: int, timeout: float) -> None:
    print(f"2. daemon first start, rules mode, {n} sessions, empty state (at most "
          f"{timeout:.0f} s)")
    root = Path(tempfile.mkdtemp(prefix="ocm-backfill-"))
    d: Daemon | None = None
    reader: StateReader | None = None
    try:
        box = Sandbox(root, CONFIG)
        copy_db(db, box.opencode_db)
        d = box.start_daemon()
        reader = StateReader(box.state_db)
        serving = first_pass = done = None
        status_lat: list[float] = []
        next_status = 0.0
        last_marks, progress = 0, []
        end = d.started + timeout
        while time.monotonic() < end:
            d.check_alive()
            now = time.monotonic()
            if now >= next_status:
                sock = daemon_info(box).get("socket")
                if sock:
                    t = time.monotonic()
                    try:
                        code, _ = control_call(Path(sock), "status", timeout=30)
                    except OSError:
                        code = 0
                    if code == 200:
                        status_lat.append(time.monotonic() - t)
                        if serving is None:
                            serving = time.monotonic() - d.started
                        next_status = time.monotonic() + 1.0
            if first_pass is None and d.caught_up():
                first_pass = time.monotonic() - d.started
            marks = reader.marks_count()
            if marks != last_marks:
                last_marks = marks
                progress.append((time.monotonic() - d.started, marks))
            if marks >= n and reader.queue_len() == 0:
                done = time.monotonic() - d.started
                break
            time.sleep(0.02 if serving is None else 0.2)
        elapsed = done if done is not None else time.monotonic() - d.started
        cpu, hwm, threads = d.cpu_seconds(), peak_rss_mb(d.pid), d.threads()
        marks = reader.marks_count()
        print(f"  commands served after {serving:.2f} s (goal <= 1 s: {goal(serving <= 1)})"
              if serving is not None else "  commands never served")
        if status_lat:
            print(f"  status call during the catch-up: p50 "
                  f"{1000 * statistics.median(status_lat):.0f} ms, max "
                  f"{1000 * max(status_lat):.0f} ms (n={len(status_lat)})")
        print(f"  first full pass done after "
              f"{f'{first_pass:.1f} s' if first_pass is not None else 'not yet'}")
        rate = marks / elapsed if elapsed else 0.0
        if done is not None:
            print(f"  all {n} sessions read after {done:.1f} s = {rate:.0f} sessions/s "
                  f"(goal >= 200: {goal(rate >= 200)}; 100k in <= 10 min: "
                  f"{goal(100_000 / max(rate, 1e-9) <= 600)})")
        else:
            print(f"  after {elapsed:.0f} s: {marks}/{n} sessions read = {rate:.0f} "
                  f"sessions/s (goal >= 200: {goal(rate >= 200)})")
        step = max(1, len(progress) // 8)
        print("  progress (s: sessions read): "
              + " ".join(f"{t:.0f}:{m}" for t, m in progress[::step]))
        print(f"  CPU {cpu:.1f} s ({100 * cpu / elapsed:.0f} % of one core); peak RSS "
              f"{hwm:.0f} MiB (goal <= 200: {goal(hwm <= 200)}); {threads} threads")
        code, stop_s = d.stop()
        print(f"  SIGTERM -> exit code {code} after {stop_s:.2f} s")
    finally:
        if reader is not None:
            reader.close()
        if d is not None:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


# -- 3. fsyncs -------------------------------------------------------------------------------


def _count_syncs(db: Path) -> tuple[int, int]:
    """``maintain --all`` on a copy of ``db`` under strace: (exit code, sync calls)."""
    root = Path(tempfile.mkdtemp(prefix="ocm-backfill-"))
    try:
        box = Sandbox(root, CONFIG)
        copy_db(db, box.opencode_db)
        summary = root / "strace.txt"
        cmd = ["strace", "-f", "-c", "-o", str(summary), "-e",
               "trace=fsync,fdatasync,msync,sync_file_range", sys.executable, "-m",
               "opencode_memoryd", "--config", str(box.config), "maintain", "--all", "--json"]
        r = subprocess.run(cmd, env=box.full_env(), capture_output=True, text=True,
                           timeout=1800)
        calls = 0
        for line in summary.read_text().splitlines():
            parts = line.split()
            if parts and parts[-1] in ("fsync", "fdatasync", "msync", "sync_file_range"):
                calls += int(parts[3])
        return r.returncode, calls
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_fsyncs(work: Path, n: int) -> None:
    """Sync calls (fsync, fdatasync, msync) of ``maintain --all`` on ``n`` and ``2n``
    sessions: the difference divided by ``n`` is what one more session costs (the rest is
    opening and closing the store and the state file)."""
    if shutil.which("strace") is None:
        print("3. fsyncs: strace not found, skipped")
        return
    print(f"3. sync calls of maintain --all, rules mode, {n} and {2 * n} sessions, empty state")
    for label, synthetic, every in (("no human text", True, 0),
                                     ("human text, nothing to store", False, 0),
                                     ("human text, every 10th stores a memory", False, 10)):
        counts = []
        for size in (n, 2 * n):
            db = work / f"fsync-{int(synthetic)}-{every}-{size}.db"
            ensure_db(db, size, every, synthetic=synthetic, quiet=True)
            counts.append(_count_syncs(db))
        (c1, s1), (c2, s2) = counts
        per = (s2 - s1) / n
        note = (f" (goal: none per session: {'met' if per < 0.01 else 'NOT met'})"
                if synthetic else "")
        print(f"  {label}: exit codes {c1}/{c2}; {s1} and {s2} sync calls: "
              f"{per:.3f} per session{note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--directive-every", type=int, default=10,
                    help="every n-th session stores a memory (0: none; default 10)")
    ap.add_argument("--db-cache", type=Path, default=None,
                    help="keep the big database here and reuse it next time")
    ap.add_argument("--timeout", type=float, default=1200,
                    help="longest wait for maintain and for the daemon's catch-up, s")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: "
                    "maintain, daemon, fsync")
    ap.add_argument("--fsync-sessions", type=int, default=1000,
                    help="sessions of the fsync databases (0: skip part 3)")
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ocm-backfill-db-"))
    try:
        db = args.db_cache or work / f"backfill-{args.sessions}.db"
        print(f"database: {args.sessions} sessions, a directive every "
              f"{args.directive_every or 'never'}; {os.cpu_count()} CPUs")
        ensure_db(db, args.sessions, args.directive_every)
        if "maintain" not in skip:
            print()
            bench_maintain(db, args.sessions, args.timeout)
        if "daemon" not in skip:
            print()
            bench_first_start(db, args.sessions, args.timeout)
        if "fsync" not in skip and args.fsync_sessions > 0:
            print()
            bench_fsyncs(work, args.fsync_sessions)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
