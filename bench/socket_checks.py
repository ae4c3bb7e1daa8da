"""What the socket owner checks cost a client: ``control_client.ping`` to a real control
server in a fresh 0700 folder, with the checks (folder and file ``lstat``, then
``SO_PEERCRED`` on the connection) and with them replaced by no-ops, and
``peer.check_path`` alone.

Each form runs ``--pings`` pings, ``--rounds`` times; the median microseconds per ping
are printed. The server runs in this process (its log is silenced).

Run: ``.venv/bin/python bench/socket_checks.py [--pings 2000] [--rounds 3]``. Asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import structlog

from opencode_memoryd.serve.control import client as control_client
from opencode_memoryd.serve.control import peer
from opencode_memoryd.serve.control.server import ControlServer


def _per_call_us(fn: object, n: int) -> float:
    assert callable(fn)
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    """Print the median microseconds per ping with and without the checks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    root = Path(tempfile.mkdtemp(prefix="sc", dir="/tmp"))
    path = root / "run" / "control.sock"
    try:
        with ControlServer(path, {}):
            def ping() -> None:
                control_client.ping(path)

            checked = [_per_call_us(ping, args.pings) for _ in range(args.rounds)]
            names = vars(control_client)
            kept = names["check_path"], names["check_peer"]
            names["check_path"] = lambda _path: None
            names["check_peer"] = lambda _sock, _path: None
            try:
                bare = [_per_call_us(ping, args.pings) for _ in range(args.rounds)]
            finally:
                names["check_path"], names["check_peer"] = kept
            alone = _per_call_us(lambda: peer.check_path(path), args.pings)
    finally:
        shutil.rmtree(root)
    print(f"ping with the checks: {statistics.median(checked):.1f} us; without: "
          f"{statistics.median(bare):.1f} us; check_path alone: {alone:.1f} us "
          f"({args.pings} pings x {args.rounds} rounds)")


if __name__ == "__main__":
    main()
