"""CPU cost of ``opencode-memoryd run``: at rest, and while OpenCode streams into a big database.

The daemon runs as a real child process (``python -m opencode_memoryd --config CFG run``,
rules mode, ``settle_seconds = 0.2``, ``quiet_period_seconds = 1``, other settings at their
defaults) in a throw-away HOME/XDG tree; its CPU time is the user + system time of all its
threads, read from ``/proc/<pid>/stat``; the state file is read through read-only
connections.

1. **Idle**: the daemon tails a copy of ``tests/fixtures/opencode-sample.db``. Once its
   catch-up is over (``queue`` empty) and its start-up work too (less than 5 ms of CPU in
   a second; the MCP SDK, for one, is imported 3 s after the start), the CPU it uses during
   ``--idle-seconds`` (60) of no activity, and its wake-ups (context switches of all
   threads). Then it is restarted with
   nothing changed, and the sessions it queues again at start-up are counted.
2. **Big database**: 100,000 sessions (``--sessions``) over 200 projects, each with one
   finished turn (a user and an assistant message with a text part each) in OpenCode's
   shape (``session.time_updated`` later than the last message's ``time_created``, since
   OpenCode bumps the session after writing a message), bulk inserted with ``executemany``
   into an ``empty_copy`` of the fixture; kept in and reused from ``--db-cache`` if given.
3. **First start on it** (empty state): how the catch-up progresses during
   ``--catchup-seconds`` (30): sessions queued, sessions extracted, CPU, the rates over
   the second half, a naive estimate of the whole catch-up, and whether the daemon exits
   within ``--stop-timeout`` (15 s) of SIGTERM at that point.
4. **Streaming into it**: this needs a caught-up daemon, and the full catch-up takes far
   longer than this benchmark may (see 3). So the marks are written as a finished
   ``maintain --all`` leaves them (``--prepopulate seed``, the default: one bulk insert
   into the state file, whose schema the daemon's own ``StateDB`` creates) or computed by
   really running ``opencode-memoryd maintain --all`` once (``--prepopulate maintain``:
   about 3 minutes more on 2 cores; its time is reported). The rows stay in OpenCode's
   shape: at start-up the daemon compares each session's newest message with its mark.
   The daemon then starts caught up; after a short idle baseline, a writer appends
   finished turns (each with a "remember that …" directive) to random existing sessions
   at ``--rate`` turns/s (20) for ``--stream-seconds`` (30). Reported: the daemon's CPU
   over the window (and per 5 s, and by thread: the worker, the main loop, the file
   watcher …; with ``--profile FILE``, py-spy's samples of the window as collapsed stacks),
   the writes/s achieved, commit → session marked dirty
   under that load (one write probed at a time: its ``queue`` row polled every 5 ms), how
   many written sessions had their mark reach the last written message by the end of the
   window + quiet period and within a further ``--drain-seconds`` (30), and last write →
   stored under that load (from ``marks.updated_at``, the daemon's clock when it began
   storing the chunk).

The daemon is stopped with SIGTERM after each part and its exit code reported.

Run: ``.venv/bin/python bench/daemon_cpu.py`` (about 3 minutes on 2 cores). Shorter:
``--idle-seconds 10 --catchup-seconds 10 --sessions 20000``. Prints numbers; asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _daemon_common import (
    FIXTURE,
    Daemon,
    Sandbox,
    StateReader,
    TimedWriter,
    control_call,
    daemon_info,
    pct,
    poll,
    summary_ms,
)
from opencode_memoryd.models import iso_utc
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.state.db import StateDB
from opencode_writer import OpenCodeWriter, empty_copy

_B62 = string.digits + string.ascii_letters
_ADJ = ("amber", "brisk", "cobalt", "dusty", "eager", "frosty", "gentle", "hollow", "ivory",
        "jolly", "keen", "lunar", "mellow", "nimble", "olive", "plucky", "quiet", "rustic")
_NOUN = ("ledger", "gateway", "indexer", "scheduler", "mailer", "renderer", "uploader",
         "billing", "search", "metrics", "exporter", "crawler", "resolver", "notifier")


def config(quiet: float) -> str:
    return ("[opencode]\nsettle_seconds = 0.2\n"
            "[extraction]\nmode = \"rules\"\n"
            f"[daemon]\nquiet_period_seconds = {quiet}\n")


# -- 1. idle --------------------------------------------------------------------------


#: The idle window opens once the daemon used less than this CPU (s) over SETTLE_SPAN_S:
#: its start-up goes on after the catch-up (the MCP SDK is imported 3 s after the start).
SETTLE_CPU_S = 0.005
SETTLE_SPAN_S = 1.0
SETTLE_MAX_S = 30.0


def settle(d: Daemon) -> str:
    """Wait (at least 2 s, at most :data:`SETTLE_MAX_S`) until the daemon is quiet: less
    than :data:`SETTLE_CPU_S` of CPU over :data:`SETTLE_SPAN_S`. Says how it ended."""
    time.sleep(2)  # the last extraction's aftermath
    deadline = time.monotonic() + SETTLE_MAX_S
    while time.monotonic() < deadline:
        before = d.cpu_seconds()
        time.sleep(SETTLE_SPAN_S)
        if d.cpu_seconds() - before < SETTLE_CPU_S:
            return f"under {SETTLE_CPU_S * 1000:.0f} ms CPU over {SETTLE_SPAN_S:.0f} s"
    return f"still busy after {SETTLE_MAX_S:.0f} s more: measuring anyway"


def bench_idle(seconds: float, quiet: float) -> None:
    print(f"1. idle: sample database, {seconds:.0f} s without activity")
    root = Path(tempfile.mkdtemp(prefix="ocm-cpu-"))
    d: Daemon | None = None
    reader: StateReader | None = None
    try:
        box = Sandbox(root, config(quiet))
        shutil.copyfile(FIXTURE, box.opencode_db)
        d = box.start_daemon()
        reader = StateReader(box.state_db)
        ready = d.wait_ready()
        poll(lambda: reader.queue_len() == 0, timeout=120, interval=0.05, alive=d.check_alive)
        caught_up = time.monotonic() - d.started
        cpu_start = d.cpu_seconds()
        print(f"  ready after {ready:.1f} s, catch-up over after {caught_up:.1f} s "
              f"(CPU so far {cpu_start:.2f} s, start-up included)")
        settled = settle(d)
        print(f"  start-up work over after {time.monotonic() - d.started:.1f} s "
              f"(CPU so far {d.cpu_seconds():.2f} s; {settled})")
        cpu0, ctx0, t0 = d.cpu_seconds(), d.context_switches(), time.monotonic()
        time.sleep(seconds)
        d.check_alive()
        cpu, wall = d.cpu_seconds() - cpu0, time.monotonic() - t0
        ctx = d.context_switches() - ctx0
        share, rate = 100 * cpu / wall, ctx / wall
        print(f"  CPU {cpu:.2f} s over {wall:.1f} s = {share:.2f} % of one core (goal <= 0.1 %: "
              f"{'met' if share <= 0.1 else 'NOT met'}); {rate:.1f} wake-ups/s (goal <= 5: "
              f"{'met' if rate <= 5 else 'NOT met'}); {d.threads()} threads; "
              f"RSS {d.rss_mb():.0f} MiB")
        code, stop_s = d.stop()
        print(f"  SIGTERM -> exit code {code} after {stop_s:.2f} s")
        # a restart with nothing new: does the daemon skip the sessions it has read?
        marked = reader.marks_count()
        d = box.start_daemon()
        d.wait_ready()
        requeued = reader.queue_len()
        print(f"  restart with nothing changed ({marked} sessions have marks): {requeued} "
              "sessions queued again at start-up")
        code, stop_s = d.stop()
        print(f"  SIGTERM -> exit code {code} after {stop_s:.2f} s")
    finally:
        if reader is not None:
            reader.close()
        if d is not None:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


# -- 2. the big database ---------------------------------------------------------------


def build_big_db(dst: Path, n_sessions: int, n_projects: int, seed: int = 7, *,
                 user_text: Callable[[int], str] | None = None,
                 synthetic: bool = False) -> None:
    """Write ``n_sessions`` one-turn sessions over ``n_projects`` projects into ``dst``.

    ``user_text(i)`` is the text of session ``i``'s user message (default: a request no
    rule stores); with ``synthetic`` it is marked ``synthetic`` (no human text)."""
    rng = random.Random(seed)
    tmp = dst.with_name(dst.name + ".building")
    empty_copy(FIXTURE, tmp)
    conn = sqlite3.connect(tmp, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    now = int(time.time() * 1000)
    start = now - 30 * 86_400_000
    span = 30 * 86_400_000 - 3_600_000  # the newest session is an hour old
    counter = 0

    def new_id(prefix: str, ms: int) -> str:  # OpenCode's shape, as OpenCodeWriter.new_id
        nonlocal counter
        counter += 1
        value = (ms * 4096 + counter) & ((1 << 48) - 1)
        return f"{prefix}_{value:012x}" + "".join(rng.choices(_B62, k=14))

    projects = [(f"{rng.getrandbits(160):040x}", f"/tmp/projects/bench/p{i:03d}")
                for i in range(n_projects)]
    sessions, messages, parts = [], [], []
    for i in range(n_sessions):
        t = start + span * i // n_sessions
        project, worktree = projects[rng.randrange(n_projects)]
        sid = new_id("ses", t)
        umid, amid = new_id("msg", t + 1000), new_id("msg", t + 1500)
        user = {"role": "user", "time": {"created": t + 1000}, "agent": "build",
                "model": {"providerID": "stub", "modelID": "stub-model"},
                "summary": {"diffs": []}}
        assistant = {"role": "assistant", "parentID": umid, "agent": "build", "mode": "build",
                     "modelID": "stub-model", "providerID": "stub",
                     "path": {"cwd": worktree, "root": worktree}, "cost": 0,
                     "tokens": {"total": 0, "input": 0, "output": 0, "reasoning": 0,
                                "cache": {"read": 0, "write": 0}},
                     "time": {"created": t + 1500, "completed": t + 4000}, "finish": "stop"}
        sessions.append((sid, project, sid[-8:], worktree, f"Session {i}", t, t + 4100))
        messages.append((umid, sid, t + 1000, t + 4050, json.dumps(user)))
        messages.append((amid, sid, t + 1500, t + 4000, json.dumps(assistant)))
        text = (user_text(i) if user_text is not None
                else f"Fix the failing test number {i} in module m{i % 97}")
        part: dict[str, Any] = {"type": "text", "text": text}
        if synthetic:
            part["synthetic"] = True
        parts.append((new_id("prt", t + 1001), umid, sid, t + 1001, t + 1001,
                      json.dumps(part)))
        parts.append((new_id("prt", t + 1600), amid, sid, t + 1600, t + 3900, json.dumps(
            {"type": "text", "text": "Done: the test passes now."})))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO project (id, worktree, vcs, time_created, time_updated, "
                     "sandboxes) VALUES (?, ?, 'git', ?, ?, '[]')",
                     [(p, w, start, start) for p, w in projects])
    conn.executemany("INSERT INTO session (id, project_id, parent_id, slug, directory, path, "
                     "title, version, time_created, time_updated) VALUES "
                     "(?, ?, NULL, ?, ?, '', ?, '1.18.33', ?, ?)", sessions)
    conn.executemany("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                     "VALUES (?, ?, ?, ?, ?)", messages)
    conn.executemany("INSERT INTO part (id, message_id, session_id, time_created, "
                     "time_updated, data) VALUES (?, ?, ?, ?, ?, ?)", parts)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    tmp.replace(dst)
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)


def session_count(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return int(c.execute("SELECT count(*) FROM session").fetchone()[0])
    except sqlite3.Error:
        return -1


def copy_db(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    for suffix in ("-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)


# -- 3. first start on the big database ----------------------------------------------------


def bench_catch_up(big: Path, n: int, seconds: float, quiet: float,
                   stop_timeout: float) -> None:
    print(f"3. first start on the {n}-session database (empty state), observed for "
          f"{seconds:.0f} s")
    root = Path(tempfile.mkdtemp(prefix="ocm-cpu-"))
    d: Daemon | None = None
    reader: StateReader | None = None
    try:
        box = Sandbox(root, config(quiet))
        copy_db(big, box.opencode_db)
        d = box.start_daemon()
        reader = StateReader(box.state_db)
        ready_at = done_at = serving_at = None
        samples: list[tuple[float, int, int, float]] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            while serving_at is None and time.monotonic() < end:  # the first command served
                d.check_alive()
                sock = daemon_info(box).get("socket")
                try:
                    if sock and control_call(Path(sock), "status", timeout=30)[0] == 200:
                        serving_at = time.monotonic() - d.started
                except OSError:
                    time.sleep(0.01)
            time.sleep(1)
            d.check_alive()
            t = time.monotonic() - d.started
            queued, marked = reader.queue_len(), reader.marks_count()
            samples.append((t, max(queued, 0) + marked, marked, d.cpu_seconds()))
            if ready_at is None and d.caught_up():
                ready_at = t
            if ready_at is not None and queued == 0:
                done_at = t
                break
        t, seen, marked, cpu = samples[-1]
        print(f"  after {t:.0f} s: {seen} sessions queued so far, {marked} extracted (marks); "
              f"first command answered: {f'{serving_at:.2f} s' if serving_at else 'not yet'} "
              f"(goal <= 1 s: {'met' if serving_at and serving_at <= 1 else 'NOT met'}); "
              f"first full pass done: "
              f"{f'{ready_at:.1f} s' if ready_at else 'not yet'}; CPU {cpu:.1f} s "
              f"({100 * cpu / t:.0f} % of one core); RSS {d.rss_mb():.0f} MiB")
        if done_at is not None:
            print(f"  catch-up finished after {done_at:.1f} s")
        else:
            half = [s for s in samples if s[0] >= t / 2] or samples
            dt = max(t - half[0][0], 1e-9)
            q_rate = (seen - half[0][1]) / dt
            x_rate = (marked - half[0][2]) / dt
            print(f"  rates over the last {dt:.0f} s: {q_rate:.0f} sessions queued/s, "
                  f"{x_rate:.0f} sessions extracted/s")
            if x_rate > 0:
                print(f"  naive estimate of the full catch-up at that extraction rate: "
                      f"{(n - marked) / x_rate / 60 + t / 60:.0f} min (not waited for)")
        code, stop_s = d.stop(timeout=stop_timeout)
        if code is None:
            still = "" if d.caught_up() else " during the first full pass"
            print(f"  SIGTERM{still} -> no exit within {stop_s:.0f} s; killed")
        else:
            print(f"  SIGTERM -> exit code {code} after {stop_s:.2f} s")
    finally:
        if reader is not None:
            reader.close()
        if d is not None:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


# -- 4. streaming into a caught-up daemon ---------------------------------------------------


def seed_marks(box: Sandbox) -> int:
    """Write every session's mark as a finished ``maintain --all`` leaves it: the
    ``(time_created, id)`` of its last message."""
    StateDB(box.state_db).close()  # the daemon's own code creates the schema
    source = source_identity(box.opencode_db)
    now = iso_utc(datetime.now(UTC))
    last: dict[str, tuple[int, str]] = {}
    with sqlite3.connect(f"file:{box.opencode_db}?mode=ro", uri=True) as src:
        for sid, created, mid in src.execute(
                "SELECT session_id, time_created, id FROM message ORDER BY session_id, "
                "time_created, id"):
            last[sid] = (created, mid)
    with sqlite3.connect(box.state_db, isolation_level=None) as c:
        c.execute("BEGIN IMMEDIATE")
        c.executemany("INSERT INTO marks (source_id, session_id, time_created, message_id, "
                      "updated_at) VALUES (?, ?, ?, ?, ?)",
                      [(source, sid, t, mid, now) for sid, (t, mid) in last.items()])
        c.execute("COMMIT")
    return len(last)


def directive(i: int, rng: random.Random) -> str:
    return (f"remember that the {rng.choice(_ADJ)} {rng.choice(_NOUN)} job number {i} runs "
            f"at {rng.randrange(24):02d}:{rng.randrange(60):02d} on host "
            f"build-{rng.randrange(10000)}")


def parse_iso(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def bench_stream(big: Path, n: int, args: argparse.Namespace) -> None:
    quiet = args.quiet
    print(f"4. streaming into the {n}-session database: {args.rate:g} turns/s for "
          f"{args.stream_seconds:.0f} s (quiet {quiet:g} s)")
    root = Path(tempfile.mkdtemp(prefix="ocm-cpu-"))
    d: Daemon | None = None
    readers: list[StateReader] = []
    writer: OpenCodeWriter | None = None
    try:
        box = Sandbox(root, config(quiet))
        copy_db(big, box.opencode_db)
        t = time.monotonic()
        if args.prepopulate == "maintain":
            r = box.cli("maintain", "--all", "--json", timeout=1800)
            if r.returncode != 0:
                raise RuntimeError(f"maintain --all failed ({r.returncode}): {r.stderr[-2000:]}")
            totals = json.loads(r.stdout).get("totals", {})
            print(f"  marks by `opencode-memoryd maintain --all`: {time.monotonic() - t:.1f} s "
                  f"(totals {totals})")
        else:
            k = seed_marks(box)
            print(f"  {k} marks seeded into the state file in {time.monotonic() - t:.1f} s")
        reader = StateReader(box.state_db)
        readers.append(reader)
        with sqlite3.connect(f"file:{box.opencode_db}?mode=ro", uri=True) as c:
            ids = [r[0] for r in c.execute("SELECT id FROM session")]
        d = box.start_daemon()
        ready = d.wait_ready(timeout=600)
        queued = reader.queue_len()
        poll(lambda: reader.queue_len() == 0, timeout=600, interval=0.1, alive=d.check_alive)
        caught = time.monotonic() - d.started
        print(f"  daemon ready after {ready:.1f} s with {queued} sessions queued; queue empty "
              f"after {caught:.1f} s; CPU so far {d.cpu_seconds():.1f} s; "
              f"RSS {d.rss_mb():.0f} MiB")
        time.sleep(1)
        cpu0, t0 = d.cpu_seconds(), time.monotonic()
        time.sleep(args.baseline_seconds)
        base = d.cpu_seconds() - cpu0
        print(f"  idle baseline with {n} sessions: CPU {base:.2f} s over "
              f"{time.monotonic() - t0:.1f} s = "
              f"{100 * base / (time.monotonic() - t0):.1f} % of one core")

        rng = random.Random(args.seed)
        writer = TimedWriter(box.opencode_db, seed=args.seed)
        probe_reader = StateReader(box.state_db)
        readers.append(probe_reader)
        probe_lat: list[float] = []
        probe_missed = [0]
        probe_idle = threading.Event()
        probe_idle.set()

        def probe(sid: str, prev: Any, commit: float) -> None:
            # commit -> the session's queue row appears (or moves), for one write at a time
            try:
                end = time.monotonic() + 30
                while time.monotonic() < end:
                    row = probe_reader.queue_row(sid)
                    if row is not None and row != prev:
                        probe_lat.append(time.time() - commit)
                        return
                    time.sleep(0.005)
                probe_missed[0] += 1
            finally:
                probe_idle.set()

        written: dict[str, tuple[str, float]] = {}  # sid -> (last assistant id, last write)
        timeline: list[tuple[float, float]] = []
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.wait(1.0):
                try:
                    timeline.append((time.monotonic(), d.cpu_seconds()))
                except OSError:
                    return

        window_start_iso = iso_utc(datetime.now(UTC))
        # when each (session, message) mark became visible in the state file (committed)
        visible: dict[tuple[str, str], float] = {}
        stop_marks = threading.Event()
        marks_reader = StateReader(box.state_db)
        readers.append(marks_reader)

        def watch_marks() -> None:
            while True:  # one last look once stopped: a mark committed just before counts
                stopped = stop_marks.wait(0.05)
                for sid, mid in marks_reader.query(
                        "SELECT session_id, message_id FROM marks WHERE updated_at >= ?",
                        (window_start_iso,)):
                    visible.setdefault((sid, mid), time.time())
                if stopped:
                    return

        marks_thread = threading.Thread(target=watch_marks, daemon=True)
        marks_thread.start()
        spy = None
        if args.profile is not None:  # py-spy samples the daemon over the window
            spy = subprocess.Popen(
                [args.py_spy, "record", "--pid", str(d.pid), "--rate", "250", "--threads",
                 "--nonblocking", "--format", "raw", "--output", str(args.profile),
                 "--duration", str(int(args.stream_seconds))],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        threads0 = d.thread_cpu()
        cpu0, t0 = d.cpu_seconds(), time.monotonic()
        timeline.append((t0, cpu0))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        turns = 0
        lag_max = 0.0
        turn_writes: list[float] = []
        while True:
            due = t0 + turns / args.rate
            if due >= t0 + args.stream_seconds:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            else:
                lag_max = max(lag_max, now - due)
            sid = rng.choice(ids)
            probing = probe_idle.is_set()
            if probing:
                probe_idle.clear()
                prev = probe_reader.queue_row(sid)
            writer.session_commit = None
            w0 = time.monotonic()
            out = writer.append_turn(sid, directive(turns, rng), "Noted.")
            turn_writes.append(time.monotonic() - w0)
            written[sid] = (out["assistant"], time.time())
            if probing:
                threading.Thread(target=probe, args=(sid, prev, writer.session_commit),
                                 daemon=True).start()
            turns += 1
        t_end = time.monotonic()
        cpu_window = d.cpu_seconds() - cpu0
        wall = t_end - t0
        stop_sampling.set()
        sampler.join()
        if spy is not None:
            spy.wait(timeout=60)
            print(f"  profile of the window: {args.profile} (py-spy, collapsed stacks)")
        timeline.append((t_end, cpu0 + cpu_window))
        d.check_alive()
        print(f"  writer: {turns} turns in {wall:.1f} s = {turns / wall:.1f} turns/s "
              f"(~{turns * 10 / wall:.0f} commits/s), {len(written)} distinct sessions; "
              f"writer's worst lag behind schedule {lag_max * 1000:.0f} ms")
        print(f"  time to write one turn (~10 commits): {summary_ms(turn_writes)}")
        probe_idle.wait(35)
        print(f"  commit -> session marked dirty under this load (one probed write at a time, "
              f"queue polled every 5 ms): {summary_ms(probe_lat)}; not seen in 30 s: "
              f"{probe_missed[0]}")
        p95 = pct(probe_lat, 0.95) * 1000 if probe_lat else float("nan")
        print(f"    goal: p95 <= 200 ms: {p95:.0f} ms, {'met' if p95 <= 200 else 'NOT met'}")
        share = 100 * cpu_window / wall
        print(f"  daemon CPU over the window: {cpu_window:.2f} s = "
              f"{share:.1f} % of one core (goal <= 10 %: {'met' if share <= 10 else 'NOT met'})"
              f"; RSS {d.rss_mb():.0f} MiB")
        buckets = []
        for a, b in zip(timeline[::5], timeline[5::5], strict=False):
            buckets.append(f"{100 * (b[1] - a[1]) / (b[0] - a[0]):.0f}")
        print(f"  CPU % of one core per 5 s: {' '.join(buckets)}")
        per_thread = sorted(((cpu - threads0.get(tid, ("", 0.0))[1], tid, name)
                             for tid, (name, cpu) in d.thread_cpu().items()), reverse=True)
        print("  CPU by thread over the window (s, thread id and kernel name): "
              + ", ".join(f"{c:.2f} {tid} {name}" for c, tid, name in per_thread[:5]
                          if c > 0))

        def extracted() -> dict[str, str]:
            """Written sessions whose mark reached their last written message."""
            rows = reader.query("SELECT session_id, message_id, updated_at FROM marks "
                                "WHERE updated_at >= ?", (window_start_iso,))
            return {sid: at for sid, mid, at in rows
                    if sid in written and written[sid][0] == mid}

        time.sleep(max(0.0, t_end + quiet - time.monotonic()))
        at_quiet = len(extracted())
        print(f"  written sessions extracted by end of window + quiet period: "
              f"{at_quiet}/{len(written)}; queue length then {reader.queue_len()}")
        drain_cpu0 = d.cpu_seconds()
        deadline = t_end + quiet + args.drain_seconds
        done = extracted()
        progress = []
        while len(done) < len(written) and time.monotonic() < deadline:
            time.sleep(0.5)
            d.check_alive()
            done = extracted()
            progress.append(f"{time.monotonic() - t_end:.0f}s:{len(done)}")
        print(f"  drain progress (s after the window: extracted): {' '.join(progress[::4])}")
        after = time.monotonic() - t_end
        left = [sid for sid in written if sid not in done]
        if left:
            rows = [reader.query("SELECT due_ms, attempts, last_error FROM queue WHERE "
                                 "session_id=?", (sid,)) for sid in left]
            now_ms = time.time() * 1000
            queued = [r[0] for r in rows if r]
            print(f"  not extracted: {len(left)}; of them queued: {len(queued)} (due in "
                  f"{min((q[0] - now_ms) / 1000 for q in queued) if queued else 0:.1f} .. "
                  f"{max((q[0] - now_ms) / 1000 for q in queued) if queued else 0:.1f} s; "
                  f"errors {sorted({str(q[2]) for q in queued})[:3]})")
        print(f"  ... after {after:.1f} s from the end of the window: {len(done)}/"
              f"{len(written)} extracted (CPU meanwhile {d.cpu_seconds() - drain_cpu0:.1f} s)")
        lat = [parse_iso(done[sid]) - written[sid][1] for sid in done]
        print("  last write of a session's last turn -> its mark's updated_at (daemon clock "
              f"when it began storing), among those extracted: {summary_ms(lat)}")
        stop_marks.set()
        marks_thread.join()
        seen = [visible[(sid, mid)] - at for sid, (mid, at) in written.items()
                if (sid, mid) in visible]
        print("  last write of a session's last turn -> its mark committed (visible in the "
              f"state file, polled every 50 ms): {summary_ms(seen)}")
        p95 = pct(seen, 0.95) if seen else float("nan")
        print(f"    goal: p95 <= quiet period + 2 s = {quiet + 2:g} s: {p95:.2f} s, "
              f"{'met' if p95 <= quiet + 2 and len(seen) == len(written) else 'NOT met'}"
              f" ({len(seen)}/{len(written)} stored)")
        code, stop_s = d.stop()
        print(f"  SIGTERM -> exit code {code} after {stop_s:.2f} s")
        if code != 0:
            print("  stderr tail:\n" + d.stderr_tail())
    finally:
        if writer is not None:
            writer.close()
        for r in readers:
            r.close()
        if d is not None:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--projects", type=int, default=200)
    ap.add_argument("--db-cache", type=Path, default=None,
                    help="keep the big database here and reuse it next time")
    ap.add_argument("--catchup-seconds", type=float, default=30,
                    help="how long the first start is observed (0 = skip part 3)")
    ap.add_argument("--stop-timeout", type=float, default=15,
                    help="how long to wait for the exit after SIGTERM in part 3")
    ap.add_argument("--prepopulate", choices=("seed", "maintain"), default="seed")
    ap.add_argument("--quiet", type=float, default=1.0)
    ap.add_argument("--rate", type=float, default=20.0, help="turns per second")
    ap.add_argument("--stream-seconds", type=float, default=30)
    ap.add_argument("--baseline-seconds", type=float, default=5)
    ap.add_argument("--drain-seconds", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", type=Path, default=None,
                    help="sample the daemon with py-spy during the stream window into this "
                         "file (collapsed stacks; py-spy's own CPU is not the daemon's)")
    ap.add_argument("--py-spy", default=str(Path(sys.executable).parent / "py-spy"),
                    help="the py-spy executable for --profile")
    args = ap.parse_args(argv)

    started = time.monotonic()
    if args.idle_seconds > 0:
        bench_idle(args.idle_seconds, args.quiet)
    work = Path(tempfile.mkdtemp(prefix="ocm-cpu-db-"))
    try:
        big = args.db_cache or work / f"sessions-{args.sessions}.db"
        print(f"\n2. database with {args.sessions} sessions over {args.projects} projects")
        if big.exists() and session_count(big) == args.sessions:
            print(f"  reused {big}")
        else:
            big.parent.mkdir(parents=True, exist_ok=True)
            t = time.monotonic()
            build_big_db(big, args.sessions, args.projects)
            print(f"  built in {time.monotonic() - t:.1f} s "
                  f"({big.stat().st_size / 2**20:.0f} MiB)")
        if args.catchup_seconds > 0:
            print()
            bench_catch_up(big, args.sessions, args.catchup_seconds, args.quiet,
                           args.stop_timeout)
        print()
        bench_stream(big, args.sessions, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
