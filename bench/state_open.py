"""Wall time of opening and closing a state file that is already current.

Every command and the daemon open the state file (``StateDB``). A file whose schema steps
are all recorded is only read (one read transaction on ``schema_migrations``); a version
that ran its DDL in a write transaction on every open paid a ``BEGIN IMMEDIATE`` and a
durable commit (an fsync) each time. The file is created once in a throw-away folder, then
opened and closed ``--runs`` times; the median and 95th percentile are printed in
milliseconds, with the load average (``/proc/loadavg``) before and after.

Run: ``.venv/bin/python bench/state_open.py [--runs 200]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from opencode_memoryd.state.db import StateDB


def load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 1)[0]
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="state-open-") as folder:
        path = Path(folder) / "state.db"
        StateDB(path).close()
        before = load()
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            StateDB(path).close()
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    print(f"open + close of a current state file, {args.runs} runs: median "
          f"{statistics.median(times):.2f} ms, p95 {p95:.2f} ms "
          f"(load {before} -> {load()})")


if __name__ == "__main__":
    main()
