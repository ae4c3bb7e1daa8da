"""How soon ``opencode-memoryd run`` serves commands after it is started.

The daemon runs as a real child process (``python -m opencode_memoryd --config CFG run``,
rules mode) in a throw-away HOME/XDG tree, tailing a copy of
``tests/fixtures/opencode-sample.db`` (or ``--db``). From the ``exec`` on, ``daemon.json``
is polled for the control socket and a ``status`` request is sent on it (plain HTTP over
the Unix socket, no client library) until one is answered; that moment is "serving". The
daemon's CPU time (user + system, from ``/proc``) at that moment is printed too: unlike the
wall time, it hardly depends on what else the machine runs. ``--runs`` starts (default 7),
each on a fresh state; then ``python -c pass`` the same number of times, for scale.

Run: ``.venv/bin/python bench/daemon_start.py``. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _daemon_common import FIXTURE, Sandbox, control_call, daemon_info

CONFIG = "[extraction]\nmode = \"rules\"\n"


def one_start(db: Path) -> tuple[float, float]:
    """(seconds until the first ``status`` is answered, daemon CPU seconds by then)."""
    root = Path(tempfile.mkdtemp(prefix="ocm-start-"))
    d = None
    try:
        box = Sandbox(root, CONFIG)
        shutil.copyfile(db, box.opencode_db)
        d = box.start_daemon()
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
        if d is not None:
            d.stop()
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--db", type=Path, default=FIXTURE,
                    help="the OpenCode database to tail (default: the sample fixture)")
    args = ap.parse_args(argv)
    walls, cpus = [], []
    for _ in range(args.runs):
        wall, cpu = one_start(args.db)
        walls.append(wall)
        cpus.append(cpu)
    bare = []
    for _ in range(args.runs):
        t = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.monotonic() - t)
    med = statistics.median(walls)
    print(f"daemon start -> first command answered ({args.runs} starts, {args.db.name}):")
    print(f"  wall: median {med:.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s "
          f"(goal: <= 1 s: {'met' if med <= 1 else 'NOT met'})")
    print(f"  daemon CPU by then: median {statistics.median(cpus):.2f} s")
    print(f"  python -c pass: median {statistics.median(bare) * 1000:.0f} ms "
          f"(start-up = {med / statistics.median(bare):.0f}x that)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
