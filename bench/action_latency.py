"""Latency of the note at a tool call through the daemon's socket, as the OpenCode plugin asks
for it (``GET /v1/action?session&directory&project&tool&path&command&error``).

The store and the OpenCode database are those of ``bench/context_latency.py`` (the realistic
memories of ``bench/dream_scale.py``: 10 projects of Zipf-like sizes, the user scope ~8%).
A real ``opencode-memoryd run`` serves them. Each of the biggest project's fresh sessions
asks for its block and for the index of the memories' words first (untimed, as the plugin
does at a session's first message), then makes
:data:`CALLS_PER_SESSION` tool calls, taken in turn from :data:`CALLS`: files read or edited
(their folders and types), commands run, and failed commands with their error output; each
call is one request on a fresh connection, as the plugin's ``fetch`` makes it. So the
session's given-set grows as in a real session, and nothing is kept between requests but
the index of the scopes' words (kept until the store is written).

The first tool call comes right after the index was asked for: its time is printed apart
("cold"; it waits for the index at most 0.3 s), as is what one rebuild costs after a store
write (done in the background: the kept index answers meanwhile). For comparison,
``GET /v1/ping`` (the socket and HTTP alone) and the same calls to the use case in this
process. Printed per size: p50 / p95 / p99 / max milliseconds (goal: p95 <= 10 ms), the
share of calls that got a note and the entries given. The daemon runs with ``[embedding]
provider = "none"``: the look-up embeds nothing, and the local model would make the start
re-embed the seeded store.

Run: ``.venv/bin/python bench/action_latency.py [--sizes 1000,10000] [--requests 300]``.
Nothing leaves 127.0.0.1; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "daemon"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402

from _daemon_common import pct  # noqa: E402
from context_latency import Setup, percentile_line, running_daemon  # noqa: E402
from opencode_memoryd.compose import App  # noqa: E402
from opencode_memoryd.config.loader import load_config  # noqa: E402
from opencode_memoryd.usecases.action import ActionRecall  # noqa: E402
from opencode_memoryd.usecases.service import open_local  # noqa: E402

GOAL_P95_MS = 10.0
CALLS_PER_SESSION = 10
#: (tool, path under the project's root, command, error output), taken in turn
CALLS: tuple[tuple[str, str, str, str], ...] = (
    ("read", "services/billing/handlers.py", "", ""),
    ("bash", "", "pnpm install", ""),
    ("edit", "db/migrations/0042_add_index.sql", "", ""),
    ("bash", "", "npm run test:unit -- --runInBand", ""),
    ("edit", "packages/gateway/src/rate_limiter.ts", "", ""),
    ("bash", "", "alembic upgrade head", ""),
    ("read", "config/scheduler.yaml", "", ""),
    ("bash", "", "npm run build",
     "Error: Cannot find module 'undici'\nRequire stack:\n- /app/index.js\ncode: 'ENOENT'"),
    ("write", "apps/notifier/worker.py", "", ""),
    ("bash", "", "pytest -q tests/test_ingest.py",
     "E   ModuleNotFoundError: No module named 'kafka'\n1 error in 0.31s"),
)
WARMUP_SESSIONS = 1


def call_params(setup: Setup, i: int) -> dict[str, str]:
    """The i-th call: its session (one per :data:`CALLS_PER_SESSION` calls) and arguments."""
    sid, _ = setup.fresh[i // CALLS_PER_SESSION]
    tool, path, command, error = CALLS[i % len(CALLS)]
    root = setup.roots["big"]
    return {"session": sid, "directory": root, "project": setup.keys["big"], "tool": tool,
            "path": f"{root}/{path}" if path else "", "command": command, "error": error}


def measure(setup: Setup, sock: Path, n: int) -> tuple[float, list[float], int, int]:
    """``(cold ms, timed ms, calls with a note, entries)`` over ``n`` timed calls after one
    warm-up session."""
    warm = WARMUP_SESSIONS * CALLS_PER_SESSION
    times: list[float] = []
    cold = 0.0
    noted = entries = 0
    for i in range(warm + n):
        asked = call_params(setup, i)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)),
                          trust_env=False) as http:
            if i % CALLS_PER_SESSION == 0:  # the session's block, as the plugin asks it
                block = {k: asked[k] for k in ("directory", "session", "project")}
                http.get("http://opencode-memoryd/v1/context?" + urlencode(block),
                         timeout=60).raise_for_status()
                # and, at its first message, the index for the tool calls to come
                http.get("http://opencode-memoryd/v1/action?" + urlencode(block),
                         timeout=60).raise_for_status()
            url = "http://opencode-memoryd/v1/action?" + urlencode(
                {k: v for k, v in asked.items() if v})
            t = time.perf_counter()
            r = http.get(url, timeout=60)
            ms = (time.perf_counter() - t) * 1000
        r.raise_for_status()
        result = r.json()["result"]
        if i == 0:
            cold = ms
        if i >= warm:
            times.append(ms)
            noted += bool(result["text"])
            entries += int(result["entries"])
    return cold, times, noted, entries


def ping(sock: Path, n: int) -> list[float]:
    """``n`` timed ``GET /v1/ping`` (no use case: the socket and HTTP alone), in ms."""
    times = []
    for _ in range(n):
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)),
                          trust_env=False) as http:
            t = time.perf_counter()
            http.get("http://opencode-memoryd/v1/ping", timeout=60).raise_for_status()
            times.append((time.perf_counter() - t) * 1000)
    return times


def in_process(setup: Setup, n: int) -> list[float]:
    """The same calls to the use case in this process (no socket), in ms."""
    with open_local(setup.app) as service:
        times = []
        for i in range(WARMUP_SESSIONS * CALLS_PER_SESSION + n):
            asked = call_params(setup, i)
            if i % CALLS_PER_SESSION == 0:
                service.context(directory=asked["directory"], session=asked["session"],
                                project=asked["project"])
            t = time.perf_counter()
            service.action(**asked)
            if i >= WARMUP_SESSIONS * CALLS_PER_SESSION:
                times.append((time.perf_counter() - t) * 1000)
    return times


def rebuild_ms(setup: Setup) -> float:
    """One index build of the biggest project's scopes in this process (what the
    background rebuild after a store write costs), in milliseconds."""
    with open_local(setup.app) as service:
        actions = ActionRecall(service._context, service.store)
        scope = service._context.scope(directory=setup.roots["big"],
                                       session=setup.sessions["big"], project=setup.keys["big"])
        assert scope is not None
        actions._build(tuple(scope[0]), -1)  # the token ids a rebuild after a write reuses
        one = next(iter(service.store.scroll(scope[0][0])))
        service.store.upsert([one])  # a write
        t = time.perf_counter()
        actions._build(tuple(scope[0]), service.store.generation)
        return (time.perf_counter() - t) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    sessions = WARMUP_SESSIONS + -(-args.requests // CALLS_PER_SESSION)
    print(f"notes at tool calls through the socket, {args.requests} calls "
          f"({CALLS_PER_SESSION} a session, +{WARMUP_SESSIONS} warm-up session), "
          f"goal p95 <= {GOAL_P95_MS:.0f} ms")
    for size in sizes:
        root = Path(tempfile.mkdtemp(prefix="action-bench-"))
        try:
            setup = Setup(root, size, args.seed, fresh=sessions)
            # the look-up embeds nothing; keyword search spares the daemon's start a
            # re-embedding of the seeded store (the blocks asked first are untimed)
            with setup.box.config.open("a") as cfg:
                cfg.write('[embedding]\nprovider = "none"\n')
            setup.app = App(config=load_config(setup.box.config, setup.env), env=setup.env)
            big = setup.scope_sizes[setup.keys["big"]]
            print(f"\n{size} memories (seeded in {setup.seed_seconds:.1f} s): biggest project "
                  f"{big}, user scope {setup.scope_sizes[None]}")
            with running_daemon(setup) as sock:
                cold, times, noted, entries = measure(setup, sock, args.requests)
                floor = ping(sock, args.requests)
            print(f"  action  {percentile_line(times)}  "
                  f"{'meets' if pct(times, 0.95) <= GOAL_P95_MS else 'MISSES'} the goal")
            print(f"  ping    {percentile_line(floor)}  (the socket's floor on this machine now)")
            print(f"  first tool call (waits for the index at most 0.3 s) {cold:.1f} ms; a "
                  "rebuild after a "
                  f"store write (in the background) {rebuild_ms(setup):.1f} ms")
            print(f"  in-process {percentile_line(in_process(setup, args.requests))}  "
                  "(the use case alone, a new daemon-less run)")
            print(f"  {noted} of {len(times)} calls got a note, {entries} entries in all")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
