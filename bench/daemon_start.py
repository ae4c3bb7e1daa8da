"""How soon ``opencode-memoryd run`` serves commands after it is started.

The daemon runs as a real child process (``python -m opencode_memoryd --config CFG run``,
rules mode) in a throw-away HOME/XDG tree, tailing a copy of
``tests/fixtures/opencode-sample.db`` (or ``--db``). From the ``exec`` on, ``daemon.json``
is polled for the control socket and a ``status`` request is sent on it (plain HTTP over
the Unix socket, no client library) until one is answered; that moment is "serving". The
daemon's CPU time (user + system, from ``/proc``) at that moment is printed too: unlike the
wall time, it hardly depends on what else the machine runs. ``--runs`` starts (default 7),
each on a fresh state; then ``python -c pass`` the same number of times, for scale. The
package's bytecode is compiled first (``compileall``), as an installed package has it:
under ``PYTHONDONTWRITEBYTECODE`` every start would compile what it imports otherwise.

``--backfill 10000,100000`` adds, for each size, ``--runs`` first starts on a generated
database of that many one-turn sessions (built as ``bench/backfill.py`` builds it, kept in
``--db-cache``): the daemon's first pass and the backfill it queues start at the same time
as the first command, which must still be answered within the goal. The load average
(``/proc/loadavg``, 1 minute) is printed beside each series: other processes on the
machine show in the wall times, less in the CPU seconds.

Run: ``.venv/bin/python bench/daemon_start.py [--runs 7] [--backfill 10000,100000]``.
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _daemon_common import FIXTURE, ROOT, Sandbox, control_call, daemon_info
from backfill import ensure_db
from daemon_cpu import copy_db

CONFIG = "[extraction]\nmode = \"rules\"\n"


def load_average() -> str:
    """The 1-minute load average of the machine (``/proc/loadavg``), as text."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def one_start(db: Path) -> tuple[float, float]:
    """(seconds until the first ``status`` is answered, daemon CPU seconds by then)."""
    with tempfile.TemporaryDirectory(prefix="ocm-start-") as tmp:
        box = Sandbox(Path(tmp), CONFIG)
        copy_db(db, box.opencode_db)
        d = box.start_daemon()
        try:
            while True:
                d.check_alive()
                sock = daemon_info(box).get("socket")
                if sock:
                    try:
                        if control_call(Path(sock), "status", timeout=30)[0] == 200:
                            return time.monotonic() - d.started, d.cpu_seconds()
                    except OSError:
                        pass
                if time.monotonic() - d.started > 60:
                    raise TimeoutError(f"not serving after 60 s\n{d.stderr_tail()}")
                time.sleep(0.005)
        finally:
            d.stop()
            d.kill()


def series(label: str, db: Path, runs: int) -> float:
    """``runs`` starts on ``db``; print their numbers; return the median wall seconds."""
    before = load_average()
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = one_start(db)
        walls.append(wall)
        cpus.append(cpu)
    med = statistics.median(walls)
    print(f"{label} ({runs} starts, load {before} -> {load_average()}):")
    print(f"  first command answered after: median {med:.2f} s, min {min(walls):.2f} s, "
          f"max {max(walls):.2f} s (goal: <= 1 s: {'met' if med <= 1 else 'NOT met'})")
    print(f"  daemon CPU by then: median {statistics.median(cpus):.2f} s, "
          f"max {max(cpus):.2f} s")
    return med


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--db", type=Path, default=FIXTURE,
                    help="the OpenCode database to tail (default: the sample fixture)")
    ap.add_argument("--backfill", default="",
                    help="comma-separated session counts: also start on a generated "
                         "database of each size (a backfill starts with the daemon)")
    ap.add_argument("--db-cache", type=Path, default=None,
                    help="folder keeping the generated databases between runs")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.backfill.split(",") if s.strip()]
    compileall.compile_dir(ROOT / "daemon" / "opencode_memoryd", quiet=1)
    med = series(f"daemon start -> first command answered, {args.db.name}", args.db,
                 args.runs)
    with tempfile.TemporaryDirectory(prefix="ocm-start-db-") as work:
        cache = args.db_cache or Path(work)
        for n in sizes:
            db = cache / f"backfill-{n}.db"
            ensure_db(db, n, 10, quiet=True)
            series(f"daemon first start with a backfill of {n} sessions", db, args.runs)
    bare = []
    for _ in range(args.runs):
        t = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.monotonic() - t)
    print(f"python -c pass: median {statistics.median(bare) * 1000:.0f} ms "
          f"(the sample start-up = {med / statistics.median(bare):.0f}x that; "
          f"load {load_average()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
