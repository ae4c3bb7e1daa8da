"""Start-up of ``opencode-memoryd mcp``: spawn → ``initialize`` answered, as OpenCode sees it.

OpenCode spawns the MCP server for every directory it opens and for every ``opencode run``,
then sends ``initialize`` and waits (its MCP timeout defaults to 5 s, and a server that
misses it is dropped without a word), so this is time added to the start of every OpenCode
process. Each run spawns the command OpenCode's config would run (``<venv>/bin/opencode-memoryd
mcp``, this checkout's code first on ``PYTHONPATH``) in a throw-away HOME, writes one
JSON-RPC ``initialize`` request on its stdin at once (the newline-delimited stdio framing of
MCP) and times until the answer line arrives; then it sends ``notifications/initialized``,
closes stdin and waits for the exit. First with no daemon (``initialize`` must not need
one: the relay answers it itself), then with a running daemon (``opencode-memoryd run``
on a copy of the sample OpenCode database), whose SDK server answers through the relay.

Printed: p50 / p95 / max over ``--runs`` runs of each (goal p95 <= 300 ms), and a
breakdown:

* the bare interpreter (``python -c pass``) and ``python -S -c pass``;
* importing the ``mcp`` SDK parts the server uses (``mcp.server.lowlevel``,
  ``mcp.server.stdio``) alone, and importing ``opencode_memoryd.cli.main`` alone (both
  p50 over the same runs, wall time of a fresh interpreter);
* ``python -X importtime`` of one real start-up: the heaviest top-level imports by
  cumulative time, and the totals of some packages wherever they are first imported
  (``-X importtime`` itself adds some overhead).

Run: ``.venv/bin/python bench/mcp_startup.py [--runs 10]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _daemon_common import FIXTURE, Sandbox, home_dirs, pct  # noqa: E402

GOAL_P95_MS = 300.0
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
#: Packages whose import time is shown wherever they are first imported.
WATCHED = ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio", "httpx", "sqlalchemy",
           "structlog", "opencode_memoryd.compose", "opencode_memoryd.cli.main",
           "opencode_memoryd.serve.mcp.server", "jsonschema", "starlette", "uvicorn")


def program() -> list[str]:
    """What ``install-opencode`` puts in the MCP entry: the console script next to this
    interpreter, else ``python -m opencode_memoryd``."""
    script = Path(sys.executable).parent / "opencode-memoryd"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "opencode_memoryd"]


def one_start(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Seconds from spawn to the ``initialize`` answer, and the server's stderr."""
    with tempfile.TemporaryFile() as errlog:  # a pipe could fill up and block the server
        t = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errlog)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        seconds = time.perf_counter() - t
        answer = json.loads(line) if line else {}
        if "result" in answer:
            proc.stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
        proc.stdin.close()  # the server exits at the end of its input
        proc.stdout.read()
        proc.wait(timeout=30)
        errlog.seek(0)
        err = errlog.read().decode(errors="replace")
    if "result" not in answer:
        raise RuntimeError(f"no initialize answer: {line!r}\n{err[-2000:]}")
    return seconds, err


def wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    """p50 wall milliseconds of running ``argv`` to completion."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        times.append((time.perf_counter() - t) * 1000)
    return pct(times, 0.5)


_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def import_times(stderr: str) -> list[tuple[int, int, str]]:
    """``(cumulative µs, depth, module)`` of each ``-X importtime`` line, in order."""
    out = []
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as tmp:
        root = Path(tmp)
        env = {**home_dirs(root), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "PYTHONPATH": str(ROOT / "daemon")}
        cwd = root / "project"
        cwd.mkdir()
        cmd = [*program(), "mcp"]
        one_start(cmd, env, cwd)  # warm the OS file cache and the .pyc files
        times = [one_start(cmd, env, cwd)[0] * 1000 for _ in range(args.runs)]
        print(f"opencode-memoryd mcp: spawn -> initialize answered, {args.runs} runs "
              f"({' '.join(cmd[:1])} ...): p50 {pct(times, 0.5):.0f} ms, "
              f"p95 {pct(times, 0.95):.0f} ms, max {max(times):.0f} ms "
              f"(goal p95 <= {GOAL_P95_MS:.0f} ms)")
        box = Sandbox(root / "with-daemon", "[extraction]\nmode = \"rules\"\n")
        box.opencode_db.write_bytes(FIXTURE.read_bytes())
        daemon = box.start_daemon()
        try:
            daemon.wait_ready()
            denv = {**box.full_env(), "OPENCODE_MEMORYD_CONFIG": str(box.config)}
            one_start(cmd, denv, cwd)
            times = [one_start(cmd, denv, cwd)[0] * 1000 for _ in range(args.runs)]
        finally:
            daemon.stop()
            daemon.kill()
        print(f"  the same with a daemon running: p50 {pct(times, 0.5):.0f} ms, "
              f"p95 {pct(times, 0.95):.0f} ms, max {max(times):.0f} ms")
        py = sys.executable
        print("breakdown (p50 wall time of a fresh interpreter):")
        print(f"  python -c pass                      {wall([py, '-c', 'pass'], env, 5):6.0f} ms")
        print(f"  python -S -c pass (no site)         "
              f"{wall([py, '-S', '-c', 'pass'], env, 5):6.0f} ms")
        sdk = "import mcp.server.lowlevel, mcp.server.stdio"
        print(f"  import the mcp SDK server parts     {wall([py, '-c', sdk], env, 5):6.0f} ms")
        cli = "import opencode_memoryd.cli.main"
        print(f"  import opencode_memoryd.cli.main    {wall([py, '-c', cli], env, 5):6.0f} ms")
        _, err = one_start([py, "-X", "importtime", "-m", "opencode_memoryd", "mcp"], env, cwd)
        lines = import_times(err)
        total = sum(c for c, depth, _ in lines if depth == 0)
        print(f"python -X importtime of one start-up: {total / 1000:.0f} ms of imports in all; "
              "heaviest top-level imports (cumulative):")
        top = sorted(((c, name) for c, depth, name in lines if depth == 0), reverse=True)[:10]
        for c, name in top:
            print(f"  {c / 1000:7.1f} ms  {name}")
        print("where these packages were first imported (cumulative, nested ones included):")
        for name in WATCHED:
            hit = next(((c, d) for c, d, n in lines if n == name), None)
            if hit is not None:
                print(f"  {hit[0] / 1000:7.1f} ms  {name} (depth {hit[1]})")
            else:
                print(f"  {'-':>7}     {name} (not imported)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
