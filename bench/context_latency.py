"""Latency of the context block through the daemon's socket, as the OpenCode plugin asks for it.

For each store size (``--sizes``, default 1k and 10k memories) a store is seeded with the
realistic memories of ``bench/dream_scale.py`` (10 projects of Zipf-like sizes, the user
scope ~8%, project/reference/feedback/user types, duplicates and superseded facts, dates over
six months) in a throw-away HOME. A copy of ``tests/fixtures/opencode-sample.db`` gets one
OpenCode session in the biggest project's folder and one in the smallest's, and one more
session of the biggest project per request of the "new session" case (their first user
message is the task), so the daemon resolves folders and sessions exactly as for a real
OpenCode. Then ``opencode-memoryd run`` starts as a real child process and, after a few
warm-up requests, ``GET /v1/context?directory&session&project&worktree&query`` is sent
``--requests`` times per case over the Unix socket with a fresh connection each time
(``httpx`` with the ``uds`` transport; the plugin's Bun ``fetch`` also connects per
request). Cases: the biggest project with the plugin's query (the session's first message),
asked again and again for one session (the daemon's kept block); a new session of the
biggest project at every request, each with its own first message (what the plugin really
sends: one request per session, so nothing kept for that session helps); the biggest project
with no session and no query (no search: "Relevant to the task" is skipped); and the
smallest project with its query. The daemon runs with ``[dream] enabled = false``: a dream
over 10k memories holds the interpreter for seconds, and this bench measures serving, not
dreaming (``bench/dream_scale.py`` measures dreams).

Then the per-message recall part (``GET /v1/recall?directory&session&project&message_id&text``,
what the plugin asks once per user message): "a new message each" sends a new message id
and text at every request, ten messages per session of the biggest project (each session's
block asked first, untimed, as the plugin does), so nothing kept for that message helps and
each session's parts (confirmed through ``/v1/recall_given``, as the plugin confirms a
part it added) grow what later ones leave out; "the same message again" repeats one
message id; "text embedded before" sends the texts of "a new message each" again as new
messages of other sessions: all the work of a new part but the embedding of its text,
which the embedder keeps (the engine's own time, reported apart). "first after start"
restarts the daemon ``--starts`` times and times the first part it answers once it serves
(the session's block asked first).

Printed per size and case: p50 / p95 / p99 / max milliseconds (goal: p95 <= 20 ms), the
block's characters and entries; the store's seeding time. With ``--profile`` (default on
when a p95 misses 20 ms) the daemon is stopped and the same use case runs in this process
over the same store, timed by phase (OpenCode database look-ups for the session and for the
folder's project, store scrolls, store searches, selection and rendering), then the top
functions of a ``cProfile`` run by cumulative time.

Under each new-part case, "of which in the daemon" is the time the daemon logged for
each part (its ``recall_part`` line: from taking the request to the answer, without the
socket, HTTP and JSON). A bare ``GET /v1/ping`` is timed the same way after the recall
cases (the socket and HTTP floor of the machine at that moment). With ``--profile`` or
when a recall case misses 20 ms, one part is also timed in this process by phase (the
session's scope, the ids it has, the store's searches and of them the query's embedding
and the Qdrant queries, the relevance rule, the state file) and cProfiled.

Seeding embeds every memory with the configured model (the local one: ~13 minutes for 10k
on 2 busy cores). ``--store-cache DIR`` keeps each built store under ``DIR``, keyed by the
size, the embedder and a hash of the seeded memories, and later runs copy it instead: the
same data and the same vectors, in seconds.

Run: ``.venv/bin/python bench/context_latency.py [--sizes 1000,10000] [--requests 200]
[--starts 5] [--store-cache DIR] [--recall-only] [--profile]``. Nothing leaves 127.0.0.1;
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import hashlib
import io
import json
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "daemon"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402

from _daemon_common import FIXTURE, Daemon, Sandbox, pct  # noqa: E402
from dream_scale import build_memories, seed_store  # noqa: E402
from opencode_memoryd.compose import App  # noqa: E402
from opencode_memoryd.config.loader import load_config  # noqa: E402
from opencode_memoryd.config.paths import store_dir  # noqa: E402
from opencode_memoryd.models import Memory  # noqa: E402
from opencode_memoryd.usecases import context as context_mod  # noqa: E402
from opencode_memoryd.usecases import recall as recall_mod  # noqa: E402
from opencode_memoryd.usecases.recall import closing_digest  # noqa: E402
from opencode_memoryd.usecases.reembed import reembed  # noqa: E402
from opencode_memoryd.usecases.service import open_local  # noqa: E402
from opencode_writer import OpenCodeWriter  # noqa: E402

GOAL_P95_MS = 20.0
WARMUP = 10
TASKS = {  # the first user message of each session: the plugin's query
    "big": "the checkout tests fail after the PostgreSQL upgrade, which port does it use",
    "small": "where is the runbook for the ledger incidents",
}


def store_key(app: App, memories: list[Memory]) -> str:
    """The cache key of a built store: the embedder (name and dimensions, or BM25 alone)
    and a hash of every seeded memory, so a store is reused only for the same data and the
    same vectors."""
    embedder = app.build_embedder()
    vectors = f"{embedder.name}-{embedder.dimensions}" if embedder else "bm25"
    digest = hashlib.sha256("\n".join(map(repr, memories)).encode()).hexdigest()[:16]
    return f"{len(memories)}-{re.sub(r'[^A-Za-z0-9_.-]', '_', vectors)}-{digest}"


def seed_or_copy(app: App, path: Path, memories: list[Memory], cache: Path | None) -> bool:
    """Fill the store at ``path`` with ``memories`` and their vectors: a copy of the store
    kept under ``cache`` for the same key (:func:`store_key`), else seeded and embedded here
    (the daemon's first start would embed them the same way), then kept there when
    ``cache`` is given. Returns whether the store came from the cache."""
    kept = cache / store_key(app, memories) if cache else None
    if kept is not None and (kept / "store.json").exists():
        shutil.copytree(kept, path, dirs_exist_ok=True)
        return True
    seed_store(path, memories)
    if kept is None:
        return False
    reembed(app)  # what the daemon does on its first start, done once for the cache
    partial = kept.with_name(kept.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(path, partial)
    partial.rename(kept)
    return False


def percentile_line(values: list[float]) -> str:
    return (f"p50 {pct(values, 0.5):6.1f}  p95 {pct(values, 0.95):6.1f}  "
            f"p99 {pct(values, 0.99):6.1f}  max {max(values):6.1f} ms")


class Setup:
    """A seeded store, an OpenCode database with two sessions, and the config."""

    def __init__(self, root: Path, size: int, seed: int, fresh: int = 0,
                 store_cache: Path | None = None) -> None:
        self.box = Sandbox(root, "")
        seeded = build_memories(size, seed=seed, projects=10, dup_share=0.1, sup_share=0.05)
        projects = sorted((k for k in seeded.scope_sizes if k), key=seeded.scope_sizes.get)
        self.keys = {"big": projects[-1], "small": projects[0]}
        self.scope_sizes = seeded.scope_sizes
        self.roots = {name: str(seeded.roots[key]) for name, key in self.keys.items()}
        db = self.box.opencode_db
        shutil.copyfile(FIXTURE, db)
        writer = OpenCodeWriter(db)
        self.sessions = {}
        self.fresh: list[tuple[str, str]] = []  # (session id, first message), one a request
        try:
            for name, key in self.keys.items():
                sid = writer.new_session(project_id=key, directory=self.roots[name],
                                         worktree=self.roots[name], title=f"{name} task")
                writer.append_turn(sid, TASKS[name], "Looking into it.")
                self.sessions[name] = sid
            for i in range(fresh):
                task = f"{FRESH_TASKS[i % len(FRESH_TASKS)]} (ticket {1000 + i})"
                sid = writer.new_session(project_id=self.keys["big"],
                                         directory=self.roots["big"],
                                         worktree=self.roots["big"], title=f"task {i}")
                writer.append_turn(sid, task, "Looking into it.")
                self.fresh.append((sid, task))
        finally:
            writer.close()
        self.box.config.write_text(f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{db}"]\n'
                                   '[extraction]\nmode = "rules"\n'
                                   '[daemon]\nquiet_period_seconds = 3600\n'
                                   '[dream]\nenabled = false\n')
        self.env = self.box.full_env() | {"PYTHONPATH": str(ROOT / "daemon")}
        cfg = load_config(self.box.config, self.env)
        self.app = App(config=cfg, env=self.env)
        t = time.perf_counter()
        self.cached = seed_or_copy(self.app, store_dir(cfg, self.env), seeded.memories,
                                   store_cache)
        self.seed_seconds = time.perf_counter() - t

    def recall_params(self, case: str, i: int = 0) -> dict[str, str]:
        n = 0 if case == RECALL_CASES[1] else i
        # the texts of the first case (kept by the embedder: 256 queries), other sessions
        again = case == RECALL_CASES[2]
        sid, _ = self.fresh[n // MESSAGES_PER_SESSION + (len(self.fresh) // 2 if again else 0)]
        text = f"{RECALL_TEXTS[n % len(RECALL_TEXTS)]} (ticket {2000 + n})"
        return {"directory": self.roots["big"], "session": sid, "project": self.keys["big"],
                "message_id": f"msg_bench_{'e' if again else ''}{n:05d}", "text": text}

    def params(self, case: str, i: int = 0) -> dict[str, str]:
        name = "small" if case == "small" else "big"
        if case == FRESH_CASE:
            sid, task = self.fresh[i]
            return {"directory": self.roots[name], "session": sid, "project": self.keys[name],
                    "worktree": self.roots[name], "query": task}
        with_task = case != "big, no session or query"
        return {"directory": self.roots[name],
                "session": self.sessions[name] if with_task else "",
                "project": self.keys[name], "worktree": self.roots[name],
                "query": TASKS[name] if with_task else ""}


FRESH_CASE = "big, a new session each"
CASES = ("big, plugin request", FRESH_CASE, "big, no session or query", "small")
#: first messages of the fresh sessions (a ticket number makes each one differ)
FRESH_TASKS = (
    "the checkout tests fail after the PostgreSQL upgrade, which port does it use",
    "how do we deploy the billing service to staging",
    "add a retry to the webhook consumer, what is our convention for backoff",
    "why does the nightly import job time out",
    "rename the ledger module and keep the public API stable",
)


RECALL_CASES = ("recall, a new message each", "recall, the same message again",
                "recall, text embedded before")
MESSAGES_PER_SESSION = 10
#: later user messages of the sessions (a ticket number makes each one differ)
RECALL_TEXTS = (
    "now check which database port the staging config uses",
    "what is our convention for naming migrations",
    "the webhook consumer logs too much, how do we configure logging",
    "which package manager do we use for the frontend",
    "where do the release notes go",
    "run the integration tests the way CI does",
)


#: Longest wait (s) for a daemon to serve after its start.
READY_SECONDS = 1800.0


@contextmanager
def running_daemon(setup: Setup) -> Iterator[Path]:
    # this checkout's code (PYTHONPATH), unlike Sandbox.start_daemon
    err = setup.box.stderr_path.open("ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "opencode_memoryd", "--config",
                                 str(setup.box.config), "run"], env=setup.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    finally:
        err.close()
    daemon = Daemon(proc, setup.box)
    try:
        # serving, and its start-up pass over the databases done; the first start re-embeds
        # the seeded store for the local model (minutes at 10k memories on 2 busy cores)
        daemon.wait_ready(timeout=READY_SECONDS)
        info = setup.box.state_dir / "daemon.json"
        yield Path(json.loads(info.read_text())["socket"])
    finally:
        daemon.stop()


def daemon_side(log: Path, start: int) -> list[float]:
    """The ``ms`` of each ``recall_part`` line the daemon logged past byte ``start`` of its
    log: a part's time inside the daemon (from taking the request's lock to the answer),
    without the socket, HTTP and JSON around it."""
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    return [float(m.group(1)) for line in text.splitlines() if "recall_part" in line
            for m in [re.search(r'(?:\s|")ms"?[=:] ?([0-9.]+)', line)] if m]


def measure(sock: Path, params: Callable[[int], dict[str, str]], n: int,
            route: str = "context") -> tuple[list[float], dict[str, Any]]:
    times: list[float] = []
    result: dict[str, Any] = {}
    for i in range(WARMUP + n):
        asked = params(i)
        url = f"http://opencode-memoryd/v1/{route}?" + urlencode(asked)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)),
                          trust_env=False) as http:
            if route == "recall" and i % MESSAGES_PER_SESSION == 0:  # the session's block
                block = {k: asked[k] for k in ("directory", "session", "project")}
                http.get("http://opencode-memoryd/v1/context?" + urlencode(block),
                         timeout=30).raise_for_status()
            t = time.perf_counter()
            r = http.get(url, timeout=30)
            ms = (time.perf_counter() - t) * 1000
            r.raise_for_status()
            result = r.json()["result"]
            if route == "recall" and result["text"]:  # the plugin added it: confirmed
                given = {"session": asked["session"], "message_id": asked["message_id"],
                         "digest": closing_digest(result["text"])}
                http.get("http://opencode-memoryd/v1/recall_given?" + urlencode(given),
                         timeout=30).raise_for_status()
        if i >= WARMUP:
            times.append(ms)
    return times, result


def first_after_start(setup: Setup, starts: int) -> list[float]:
    """The first recall part a daemon answers, right after it serves (its session's block
    asked first, as the plugin does), over ``starts`` starts: ms each."""
    times = []
    for k in range(starts):
        with running_daemon(setup) as sock:
            sid, _ = setup.fresh[-1 - k]
            asked = {"directory": setup.roots["big"], "session": sid,
                     "project": setup.keys["big"], "message_id": f"msg_start_{k}",
                     "text": f"{RECALL_TEXTS[k % len(RECALL_TEXTS)]} (ticket {9000 + k})"}
            with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)),
                              trust_env=False) as http:
                block = {k: asked[k] for k in ("directory", "session", "project")}
                http.get("http://opencode-memoryd/v1/context?" + urlencode(block),
                         timeout=30).raise_for_status()
                t = time.perf_counter()
                http.get("http://opencode-memoryd/v1/recall?" + urlencode(asked),
                         timeout=30).raise_for_status()
                times.append((time.perf_counter() - t) * 1000)
    return times


def _kwargs(params: dict[str, str]) -> dict[str, str | None]:
    return {k: (v or None) for k, v in params.items()}


def phases(setup: Setup, params: Callable[[int], dict[str, str]], n: int) -> None:
    """Time ``build_context`` in this process by phase, then cProfile it; ``params(i)`` are
    the i-th request's parameters (requests ``0..n`` timed, ``n..2n`` profiled)."""
    spent: dict[str, float] = defaultdict(float)

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t
        return wrapper

    originals = {name: getattr(context_mod, name)
                 for name in ("_session_facts", "project_keys", "select", "render")}
    labels = {"_session_facts": "OpenCode db: the session (sub-agent? first message)",
              "project_keys": "OpenCode db: the folder's project",
              "select": "select (budget)", "render": "render"}
    with open_local(setup.app) as service:
        store = service.store
        scroll, search = store.scroll, store.search
        try:
            for name, fn in originals.items():
                setattr(context_mod, name, timed(labels[name], fn))
            store.scroll = timed(  # type: ignore[method-assign]
                "store: scroll the scopes", lambda *a, **k: list(scroll(*a, **k)))
            store.search = timed("store: search (relevant)", search)  # type: ignore[method-assign]
            service.context(**_kwargs(params(0)))  # warm
            spent.clear()
            t = time.perf_counter()
            for i in range(n):
                service.context(**_kwargs(params(1 + i)))
            total = time.perf_counter() - t
            print(f"    in-process build_context: {total / n * 1000:.1f} ms per call, of which")
            for name, seconds in sorted(spent.items(), key=lambda x: -x[1]):
                print(f"      {seconds / n * 1000:7.2f} ms  {name}")
            rest = total - sum(spent.values())
            print(f"      {rest / n * 1000:7.2f} ms  the rest (filters, merging, JSON dict)")
        finally:
            for name, fn in originals.items():
                setattr(context_mod, name, fn)
            store.scroll, store.search = scroll, search  # type: ignore[method-assign]
        prof = cProfile.Profile()
        prof.enable()
        for i in range(n):
            service.context(**_kwargs(params(1 + n + i)))
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(18)
    lines = [line for line in out.getvalue().splitlines() if line.strip()][-19:]
    print("    cProfile, cumulative (all calls of the loop):")
    for line in lines:
        print("      " + line[:150])


def _timed(spent: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t
    return wrapper


def recall_phases(setup: Setup, n: int) -> None:
    """Time ``Service.recall`` in this process by phase for ``n`` new messages (the
    session's block asked first, untimed), then cProfile ``n`` more: where a part's time
    goes apart from the socket and HTTP."""
    with open_local(setup.app) as service:
        spent: dict[str, float] = defaultdict(float)
        store = service.store
        embedder = store.embedder
        patched: list[tuple[Any, str, Any]] = []
        targets = [
            (service._context, "scope", "scope (OpenCode db stamp, project, agent's notes)"),
            (service._context, "first_message_pending", "first message pending? (OpenCode db)"),
            (service._context, "block_ids", "ids of the served blocks"),
            (service.state.recall, "given_recall_ids", "state: ids given (read)"),
            (service.state.recall, "offer_recall_part", "state: offer (write)"),
            (store, "search", "store: search (all of it)"),
            (store, "_query", "  of which Qdrant queries"),
            (embedder, "embed_query", "  of which embedding the query"),
            (recall_mod.Message, "of", "relevance: the message's words"),
            (recall_mod.Message, "supports", "relevance: each hit's words"),
        ]
        for obj, attr, label in targets:
            if obj is None:
                continue
            original = getattr(obj, attr)
            patched.append((obj, attr, obj.__dict__.get(attr)))
            wrapped = _timed(spent, label, original)
            setattr(obj, attr, classmethod(lambda cls, *a, _w=wrapped: _w(*a))
                    if isinstance(obj.__dict__.get(attr), classmethod) else wrapped)

        def ask(i: int) -> None:
            asked = setup.recall_params(RECALL_CASES[0], i)
            if i % MESSAGES_PER_SESSION == 0:
                service.context(directory=asked["directory"], session=asked["session"],
                                project=asked["project"])
            t = time.perf_counter()
            service.recall(**asked)
            spent["(total)"] += time.perf_counter() - t

        try:
            for i in range(WARMUP):
                ask(i)
            spent.clear()
            for i in range(WARMUP, WARMUP + n):
                ask(i)
        finally:
            for obj, attr, before in reversed(patched):
                if before is None:
                    delattr(obj, attr)
                else:
                    setattr(obj, attr, before)
        total = spent.pop("(total)")
        print(f"    in-process recall: {total / n * 1000:.1f} ms per part, of which")
        for name, seconds in spent.items():
            print(f"      {seconds / n * 1000:7.2f} ms  {name}")
        prof = cProfile.Profile()
        for i in range(WARMUP + n, WARMUP + 2 * n):
            asked = setup.recall_params(RECALL_CASES[0], i)
            if i % MESSAGES_PER_SESSION == 0:
                service.context(directory=asked["directory"], session=asked["session"],
                                project=asked["project"])
            prof.enable()
            service.recall(**asked)
            prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    lines = [line for line in out.getvalue().splitlines() if line.strip()][-26:]
    print("    cProfile of recall, cumulative:")
    for line in lines:
        print("      " + line[:150])


def recall_in_process(setup: Setup, n: int) -> None:
    """Time ``Service.recall`` in this process for ``n`` new messages (no socket, no HTTP):
    what the daemon spends on a part, apart from the machine's scheduling."""
    with open_local(setup.app) as service:
        times = []
        for i in range(WARMUP + n):
            asked = setup.recall_params(RECALL_CASES[0], i)
            if i % MESSAGES_PER_SESSION == 0:
                service.context(directory=asked["directory"], session=asked["session"],
                                project=asked["project"])
            t = time.perf_counter()
            service.recall(**asked)
            if i >= WARMUP:
                times.append((time.perf_counter() - t) * 1000)
    print(f"  {'recall, in-process':26} {percentile_line(times)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--starts", type=int, default=5,
                    help="daemon starts for the first recall part after a start (0: none)")
    ap.add_argument("--store-cache", type=Path, default=None, metavar="DIR",
                    help="keep each built store (memories and vectors) under DIR, keyed by "
                         "size, embedder and a hash of the data, and reuse it on later runs")
    ap.add_argument("--recall-only", action="store_true",
                    help="measure only the recall parts (and the bare ping), not the blocks")
    ap.add_argument("--profile", action="store_true",
                    help="profile every size (default: only a size whose p95 misses 20 ms)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"context block through the socket, {args.requests} requests per case "
          f"(+{WARMUP} warm-up), goal p95 <= {GOAL_P95_MS:.0f} ms")
    for size in sizes:
        root = Path(tempfile.mkdtemp(prefix="ctx-bench-"))
        try:
            setup = Setup(root, size, args.seed, fresh=WARMUP + args.requests,
                          store_cache=args.store_cache)
            big, small = (setup.scope_sizes[setup.keys[k]] for k in ("big", "small"))
            how = "copied from the cache" if setup.cached else "seeded"
            print(f"\n{size} memories ({how} in {setup.seed_seconds:.1f} s): biggest project "
                  f"{big}, smallest {small}, user scope {setup.scope_sizes[None]}")
            missed = []
            recall_missed = False
            with running_daemon(setup) as sock:
                for case in () if args.recall_only else CASES:
                    times, result = measure(sock, functools.partial(setup.params, case),
                                            args.requests)
                    print(f"  {case:26} {percentile_line(times)}  block {result['chars']} "
                          f"chars, {result['entries']} entries")
                    if pct(times, 0.95) > GOAL_P95_MS:
                        missed.append(case)
                for case in RECALL_CASES:
                    logged = setup.box.stderr_path.stat().st_size
                    times, result = measure(sock, functools.partial(setup.recall_params, case),
                                            args.requests, route="recall")
                    print(f"  {case:26} {percentile_line(times)}  part {result['chars']} "
                          f"chars, {result['entries']} entries")
                    inside = daemon_side(setup.box.stderr_path, logged)[-args.requests:]
                    if inside:
                        print(f"  {'  of which in the daemon':26} {percentile_line(inside)}")
                    if pct(times, 0.95) > GOAL_P95_MS:
                        recall_missed = True
                ping = measure(sock, lambda i: {}, args.requests, route="ping")[0]
                print(f"  {'bare ping (for comparison)':26} {percentile_line(ping)}")
            if args.starts:
                print(f"  {'recall, first after start':26} "
                      f"{percentile_line(first_after_start(setup, args.starts))}  "
                      f"({args.starts} starts)")
            recall_in_process(setup, args.requests)
            if recall_missed or args.profile:
                print("  where a recall part's time goes (a new message each):")
                recall_phases(setup, min(args.requests, 100))
            if missed or args.profile:
                case = missed[0] if missed else CASES[0]
                print(f"  where the time goes ({case}):")
                phases(setup, functools.partial(setup.params, case),
                       min(max(20, args.requests // 10), (WARMUP + args.requests - 1) // 2))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
