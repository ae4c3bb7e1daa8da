"""Resident memory of ``opencode-memoryd run`` with the default local embedding model loaded.

The daemon runs as a real child process (rules mode, other settings at their defaults) in
a throw-away HOME/XDG tree (``bench/_daemon_common.py``), tailing a copy of
``tests/fixtures/opencode-sample.db``. Once its catch-up is over (the memories of the
sample are stored, each embedded), ``--searches`` searches (default 200) are sent on its
control socket (``POST /v1/search``: each query embedded by the daemon), then its RSS
(``VmRSS``) and peak RSS (``VmHWM``) are read from ``/proc``. The same run with
``[embedding] provider = "none"`` (BM25 alone) is printed beside it, for scale.

Run: ``.venv/bin/python bench/daemon_rss.py [--searches 200]``. Prints numbers; asserts
nothing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from _daemon_common import FIXTURE, Daemon, Sandbox, control_call, daemon_info, peak_rss_mb

QUESTIONS = ("which package manager", "how do I run the tests", "where are secrets stored",
             "which database do we use", "what is the deploy process")


def run(provider: str, searches: int) -> str:
    """One daemon's numbers, formatted."""
    config = ('[extraction]\nmode = "rules"\n[embedding]\n'
              f'provider = "{provider}"\n')
    with tempfile.TemporaryDirectory(prefix="memoryd-rss-") as tmp:
        box = Sandbox(Path(tmp), config)
        shutil.copyfile(FIXTURE, box.opencode_db)
        daemon: Daemon = box.start_daemon()
        try:
            ready = daemon.wait_ready()
            sock = Path(daemon_info(box)["socket"])
            end = time.monotonic() + 120
            while time.monotonic() < end:  # the catch-up's extraction, each memory embedded
                status, body = control_call(sock, "status")
                info = body.get("result") or {}
                if (status == 200 and info.get("store", {}).get("points")
                        and not info.get("daemon", {}).get("pending_count")):
                    break
                time.sleep(0.2)
            at_rest = daemon.rss_mb()
            for i in range(searches):
                status, _ = control_call(sock, "search", {"query": QUESTIONS[i % len(QUESTIONS)]})
                assert status == 200
            _, body = control_call(sock, "status")
            info = body.get("result") or {}
            points = info.get("store", {}).get("points")
            embedder = (info.get("store", {}).get("embedder") or {}).get("name", "none")
            return (f"{provider:>6}: embedder {embedder}, {points} points; ready in "
                    f"{ready:.1f} s; RSS after catch-up {at_rest:.0f} MiB, after {searches} "
                    f"searches {daemon.rss_mb():.0f} MiB, peak {peak_rss_mb(daemon.pid):.0f} MiB")
        finally:
            daemon.stop()
            daemon.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=200, help="searches sent before reading RSS")
    args = ap.parse_args(argv)
    for provider in ("local", "none"):
        print(run(provider, args.searches), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
