"""Delivery in the genuine OpenCode 1.18.33: does each step's model request carry the memories
that step needs, and nothing the user retired or another project's?

The scenario is ``bench/data/delivery_scenario.json`` (checked by ``bench/_delivery_data.py``):
three git projects and the user scope over four days. Day 1 the user states facts (some for
all projects), day 2 corrects four of them ("we moved off Poetry: it's uv now") and then
forgets one with ``opencode-memoryd forget``; days 3 and 4 are work sessions whose steps need
the facts: (a) ``start``, the session's first request; (b) ``ask``, the first request of a
prompt that asks ("which test runner do we use?"); (c) ``action``, the request that carries
the result of a tool call that touches the file or runs the command a memory is about
(``npm install`` after "we switched from Yarn to pnpm"); (d) ``error``, the request that
carries a failing command's output. Days 1 and 2 are weeks before the work days; each
project also holds 40 memories of the sessions between (and the user scope 12), made by
``bench/dream_scale.py``'s templates and seeded before the daemon starts, so a session's block
(newest first within its sections, at most 30 entries) cannot hold everything.

What runs, all in a throw-away folder (HOME and the XDG folders point into it, for this
process too; apart from npm fetching OpenCode's plugin dependency once, as ``tests/e2e/``
does, nothing leaves 127.0.0.1): the genuine OpenCode (``tests/e2e/opencode_sandbox.py``),
talking to the scripted stand-in model of
``tests/e2e/stub_model.py``, which keeps every request body; ``opencode-memoryd run`` in
its default config except rules mode, ``settle_seconds = 0`` and ``[log] level = "debug"``
(plus ``--embedding none`` when asked), warmed with a search before the first session, and
wired into OpenCode with the real ``install-opencode``. Each day OpenCode runs under
libfaketime with its clock set back (``days_back`` of the scenario); the daemon keeps the
real clock. After each day ``opencode-memoryd maintain --all`` captures what was said (the
daemon would after its quiet period). The commands the stand-in model runs are shims on the
agent's PATH with canned output (``shims`` of the scenario).

Measured, wherever in the body a memory sits (system prompt, user parts, tool results: the
body's strings are searched whole):

* delivery recall per step kind and overall: the (step, fact) pairs whose request carries
  the fact's stored text, with every miss listed;
* forbidden lines: requests carrying a superseded fact (sessions after the correction), a
  forgotten one (after the forget) or a memory of another project (every session);
* the stable prefix: per session, the block (the ``context`` part) byte-identical in every
  request, and whether the whole system prompt is;
* tokens added per request: the characters of the parts opencode-memoryd added (between its
  marker lines, any kind) / 4, no tokenizer;
* per-hook latency: the daemon's ``control.handled`` log lines (route, ms) written while
  OpenCode ran, p50/p95/max per route; and what each chat request waited for the system-
  prompt hooks, timed inside OpenCode (``tests/e2e/standins/hook_timer_plugin.js``);
* capture: which facts were stored as expected, and which were retired.

A second scenario, ``bench/data/delivery_scenario_gull.json`` (``--scenario``), plays other
projects (a Go service, an Astro site on Bun, a Python data project), other phrasings of
facts and corrections, folder layouts and other failing commands (a ``just`` recipe, a Bun
script, dbt, ``go test``), so that what the bench measures is not tuned to one file.

Run: ``.venv/bin/python bench/delivery.py [--scenario FILE] [--embedding local|none]
[--json FILE] [--keep]``
(needs ``tests/e2e/install-opencode.sh`` run once, npm and libfaketime). Prints a table,
then the JSON summary (``--json``: with every forbidden line too). 20 ``opencode run`` turns:
7-8 minutes on 2 cores shared with other work (load 10), most of it OpenCode's own start
per turn. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "daemon"))
sys.path.insert(0, str(ROOT / "bench"))

from _delivery_data import (  # noqa: E402
    KINDS,
    SCENARIO,
    Scenario,
    Session,
    added_parts,
    body_text,
    load,
)
from e2e.memoryd_side import Memoryd, memory  # noqa: E402
from e2e.opencode_install import (  # noqa: E402
    find_opencode,
    install_plugin_dependency,
    missing_requirement,
    opencode_version,
)
from e2e.opencode_sandbox import OpenCodeSandbox  # noqa: E402
from e2e.stub_model import ModelRequest, Step, StubModel, call_tool, reply  # noqa: E402

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
TIMER_PLUGIN = ROOT / "tests" / "e2e" / "standins" / "hook_timer_plugin.js"


@dataclass
class Played:
    """One session as played: its requests per turn (title requests left out)."""

    session: Session
    project_id: str
    turns: list[list[ModelRequest]] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, round(q * len(ranked) + 0.5) - 1))]


def write_shims(folder: Path, shims: dict[str, list[dict[str, Any]]], path: str) -> None:
    """One bash script per program: the canned output and exit code of each known argument
    string, else the real program on ``path`` (or "command not found", 127)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, cases in shims.items():
        real = shutil.which(name, path=path)
        lines = ["#!/bin/bash", 'case "$*" in']
        for c in cases:
            lines.append(f"  {shlex.quote(c['args'])}) printf '%s\\n' {shlex.quote(c['out'])}; "
                         f"exit {int(c['code'])};;")
        lines.append("esac")
        lines.append(f'exec {shlex.quote(real)} "$@"' if real else
                     f"echo {shlex.quote(name + ': command not found')} >&2; exit 127")
        script = folder / name
        script.write_text("\n".join(lines) + "\n")
        script.chmod(0o755)


def background(sc: Scenario, ids: dict[str, str], roots: dict[str, Path]) -> list[Any]:
    """The memories of the sessions the scenario does not play, seeded into the store:
    ``dream_scale``'s template facts, per project and for the user, said between
    ``background.days_back`` days ago (after the corrections, before the work sessions)."""
    import dream_scale as ds

    rng = random.Random(sc.background.get("seed", 25))
    far, near = sc.background.get("days_back", (19, 3))
    now = datetime.now(UTC)
    pms = sc.background.get("pm") or {"tern-api": "uv run", "tern-web": "pnpm",
                                      "tern-ops": "make"}

    def when() -> datetime:
        return now - timedelta(days=rng.uniform(near, far))

    out = []
    for name, pid in ids.items():
        seen: set[str] = set()
        profile = {"pm": pms.get(name, "make"), "org": name}
        while len(seen) < sc.background.get("per_project", 40):
            f = ds._project_fact(rng, profile)
            if f.content not in seen:
                seen.add(f.content)
                out.append(memory(f.content, type_=f.type, project=pid, root=roots[name],
                                  when=when()))
    seen = set()
    while len(seen) < sc.background.get("user", 12):
        f = ds._user_fact(rng)
        if f.content not in seen:
            seen.add(f.content)
            out.append(memory(f.content, type_=f.type, scope="user", when=when()))
    return out


def seed(side: Memoryd, memories: list[Any]) -> None:
    """Upsert ``memories`` with the daemon's own embedder (the store the daemon opens)."""
    from opencode_memoryd.compose import App
    from opencode_memoryd.config.loader import load_config

    app = App(config=load_config(side.config_path, side.env), env=side.env)
    store = app.open_store()
    try:
        store.upsert(memories)
    finally:
        store.close()


def step_of(spec: dict[str, Any], project: Path) -> Step:
    """A scenario step as the stand-in model's answer (``{project}`` in tool arguments
    becomes the project's folder)."""
    if "tool" in spec:
        args = {k: v.replace("{project}", str(project)) if isinstance(v, str) else v
                for k, v in spec["args"].items()}
        return call_tool(spec["tool"], **args)
    return reply(spec["reply"])


class Bench:
    """Plays the scenario and keeps what is needed to score it."""

    def __init__(self, sc: Scenario, root: Path, embedding: str) -> None:
        self.sc = sc
        self.root = root
        binary = find_opencode()
        assert binary is not None
        self.version = opencode_version(binary)
        warm = install_plugin_dependency(root / "warm-config", self.version)
        self.model = StubModel().__enter__()
        self.sandbox = OpenCodeSandbox(root / "sandbox", binary, self.model, warm)
        for var in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                    "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"):
            os.environ[var] = self.sandbox.env[var]  # nothing here reaches the real home
        shims = root / "shims"
        write_shims(shims, sc.shims, self.sandbox.env["PATH"])
        self.sandbox.env["PATH"] = f"{shims}:{self.sandbox.env['PATH']}"
        self.dirs = {name: self.sandbox.make_project(root / "projects" / name, files)
                     for name, files in sc.projects.items()}
        self.ids = {name: subprocess.run(
            ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=d, capture_output=True,
            text=True, check=True).stdout.split()[0] for name, d in self.dirs.items()}
        config = '[log]\nlevel = "debug"\n'
        if embedding != "local":
            config += f'\n[embedding]\nprovider = "{embedding}"\n'
        # the stand-in timer plugin times the system hooks of every request (ours included)
        self.timer_log = root / "hook-timer.jsonl"
        self.sandbox.config["plugin"] = [TIMER_PLUGIN.as_uri()]
        self.sandbox.env["HOOK_TIMER_LOG"] = str(self.timer_log)
        self.side = Memoryd(self.sandbox, config)
        self.seeded = background(sc, self.ids, self.dirs)
        self.played: list[Played] = []
        self.windows: list[tuple[datetime, datetime]] = []
        self.forgot: dict[str, str] = {}
        self.timings: dict[str, float] = {}

    def start(self) -> None:
        """Seed the store, start and warm the daemon, install it into OpenCode."""
        began = time.monotonic()
        seed(self.side, self.seeded)
        self.timings["seed_seconds"] = time.monotonic() - began
        began = time.monotonic()
        self.side.start()
        self.side.cli("search", "--dir", str(next(iter(self.dirs.values()))),
                      "warm up the model")
        self.timings["daemon_start_warm_seconds"] = time.monotonic() - began
        self.side.install_opencode()

    def play(self) -> None:
        """Every day's sessions, then capture; after day 2's capture, the forgets."""
        for day in sorted({s.day for s in self.sc.sessions}):
            self.sandbox.env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME=f"-{self.sc.days_back[day]}d",
                                    FAKETIME_DONT_FAKE_MONOTONIC="1")
            for s in (s for s in self.sc.sessions if s.day == day):
                self.play_session(s)
            self.side.cli("maintain", "--all", "--db", str(self.sandbox.db_path))
            for f in self.sc.facts.values():
                if f.forgotten_after_day == day:
                    hit = self.stored(f.memory)
                    if hit is not None:
                        self.side.cli("forget", hit["id"])
                        self.forgot[f.key] = hit["id"]

    def play_session(self, s: Session) -> None:
        """Play one session's turns in its project, keeping each turn's chat requests."""
        project = self.dirs[s.project]
        played = Played(s, self.ids[s.project])
        session_id = None
        for turn in s.turns:
            self.model.script(turn.text, *(step_of(x, project) for x in turn.steps))
            began = datetime.now(UTC)
            run = self.sandbox.run(turn.text, session_id, cwd=project, timeout=180)
            self.windows.append((began, datetime.now(UTC)))
            session_id = session_id or run.session_id
            played.turns.append(run.chat_requests)
        self.played.append(played)

    def stored(self, content: str, memories: list[dict[str, Any]] | None = None
               ) -> dict[str, Any] | None:
        """The stored memory (tombstones too; from ``memories`` when given) whose text is
        ``content``, case and spaces aside."""
        def norm(t: str) -> str:
            return " ".join(t.split()).casefold()
        pool = memories if memories is not None else list(self.side.memories().values())
        hits = [m for m in pool if norm(m["content"]) == norm(content)]
        return hits[0] if hits else None

    def close(self) -> None:
        """Stop the daemon and the stand-in model; remove the sandbox's runtime folder."""
        self.side.close()
        self.sandbox.close()
        self.model.__exit__()


def checked_request(requests: list[ModelRequest], kind: str,
                    after_step: int | None) -> ModelRequest | None:
    """The request a check reads: the turn's first (``start``, ``ask``), or the one that
    carries the result of the tool call of step ``after_step`` (``action``, ``error``)."""
    want = 0 if kind in ("start", "ask") else (after_step or 0) + 1
    return next((r for r in requests if r.step == want), None)


def score(bench: Bench) -> dict[str, Any]:
    """Everything the bench reports, as one JSON-ready dict."""
    sc = bench.sc
    memories = list(bench.side.memories().values())
    facts = {k: bench.stored(f.memory, memories) for k, f in sc.facts.items()}
    text = {k: (m["content"] if m else sc.facts[k].memory) for k, m in facts.items()}
    pairs = []
    for p in bench.played:
        for i, turn in enumerate(p.session.turns):
            for c in turn.checks:
                req = checked_request(p.turns[i], c.kind, c.after_step)
                body = body_text(req.body) if req is not None else ""
                pairs += [{"session": p.session.key, "turn": i + 1, "kind": c.kind,
                           "fact": need, "memory": text[need], "request_found": req is not None,
                           "delivered": text[need] in body} for need in c.needs]
    recall = {}
    for kind in (*KINDS, "all"):
        got = [x for x in pairs if kind in ("all", x["kind"])]
        hit = sum(x["delivered"] for x in got)
        recall[kind] = {"pairs": len(got), "delivered": hit,
                        "recall": round(hit / len(got), 4) if got else None}
    forbidden: dict[str, list[dict[str, Any]]] = {"superseded": [], "forgotten": [],
                                                  "other-project": []}
    sessions, added, by_kind = [], [], {}
    earlier = 0  # requests that carried a fact before it was retired: the search finds them
    for p in bench.played:
        own = {m["content"] for m in memories
               if m["scope"] == "user" or m.get("project_id") == p.project_id}
        other = {m["content"] for m in memories
                 if m["scope"] == "project" and m.get("project_id") != p.project_id} - own
        retired = [(k, r) for k in sc.facts if (r := sc.retired_on(k)) and r[1] < p.session.day]
        later = [k for k in sc.facts if (r := sc.retired_on(k)) and r[1] >= p.session.day]
        requests = [r for turn in p.turns for r in turn]
        for n, r in enumerate(requests):
            body = body_text(r.body)
            where = {"session": p.session.key, "request": n + 1}
            forbidden["other-project"] += [where | {"memory": c} for c in sorted(other)
                                           if c in body]
            for k, (kind, _) in retired:
                if text[k] in body:
                    forbidden[kind].append(where | {"memory": text[k]})
            earlier += sum(text[k] in body for k in later)
            parts = added_parts(body)
            added.append(sum(len(t) for _, t in parts) / 4)
            for kind, t in parts:
                by_kind.setdefault(kind, []).append(len(t) / 4)
        blocks = [next((t for k, t in added_parts("\n".join(r.system)) if k == "context"), None)
                  for r in requests]
        prefixes = ["\n".join(r.system)[: "\n".join(r.system).index(b) + len(b)] if b else None
                    for r, b in zip(requests, blocks, strict=True)]
        sessions.append({"session": p.session.key, "requests": len(requests),
                         "block_in_every_request": all(b is not None for b in blocks),
                         "block_identical": len(set(blocks)) == 1 and blocks[0] is not None,
                         "prefix_identical": len(set(prefixes)) == 1 and prefixes[0] is not None,
                         "system_identical": len({tuple(r.system) for r in requests}) == 1})
    capture = {k: {"stored": m is not None, "status": (m or {}).get("status"),
                   "retired_reason": (m or {}).get("retired_reason"),
                   "expected": "retired" if sc.retired_on(k) else "active"}
               for k, m in facts.items()}
    return {
        "opencode": bench.version, "recall": recall,
        "misses": [x for x in pairs if not x["delivered"]],
        "forbidden": {k: len(v) for k, v in forbidden.items()},
        "forbidden_lines": forbidden,
        "retired_facts_seen_before_retirement": earlier,
        "stable_prefix": sessions,
        "tokens_added_per_request": summary(added) | {
            "by_part": {k: summary(v) for k, v in by_kind.items()},
            "method": "characters of opencode-memoryd's marked parts / 4 (no tokenizer)"},
        "hook_latency_ms": hook_latency(bench),
        "capture": capture,
        "memories": {"stored": len(memories), "seeded": len(bench.seeded)},
        "timings": {k: round(v, 1) for k, v in bench.timings.items()},
    }


def summary(values: list[float]) -> dict[str, float | int]:
    """n, mean, p50, p95 and max of ``values``, rounded."""
    return {"n": len(values), "mean": round(statistics.fmean(values), 1) if values else 0.0,
            "p50": round(percentile(values, 0.5), 1), "p95": round(percentile(values, 0.95), 1),
            "max": round(max(values, default=0.0), 1)}


def hook_latency(bench: Bench) -> dict[str, Any]:
    """Milliseconds: ``daemon``, per control-socket route, the daemon's own handling time
    (``control.handled``) of the requests that arrived while OpenCode ran (so the bench's
    own commands are left out); ``system_hooks``, what each chat request waited for the
    system-prompt hooks (ours), timed inside OpenCode by ``tests/e2e/standins/
    hook_timer_plugin.js``."""
    waited = []
    if bench.timer_log.exists():
        for line in bench.timer_log.read_text().splitlines():
            timed = json.loads(line)
            if timed.get("model") == "stub-coder":
                waited.append(float(timed["ms"]))
    ms: dict[str, list[float]] = {}
    for log in sorted(bench.side.state_dir.glob("*.log*")):
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
                at = datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
            except (ValueError, KeyError, TypeError):
                continue
            if event.get("event") != "control.handled":
                continue
            if any(a <= at <= b for a, b in bench.windows):
                ms.setdefault(str(event.get("route")), []).append(float(event["ms"]))
    return {"daemon": {route: summary(v) for route, v in sorted(ms.items())},
            "system_hooks": summary(waited)}


def table(result: dict[str, Any]) -> str:
    """The human-readable report."""
    out = [f"OpenCode {result['opencode']}; scenario {result.get('scenario')}; memories "
           f"stored {result['memories']['stored']} (seeded {result['memories']['seeded']})",
           "",
           f"{'step kind':<10}{'pairs':>7}{'delivered':>11}{'recall':>9}"]
    for kind, r in result["recall"].items():
        pct = "-" if r["recall"] is None else f"{100 * r['recall']:.1f} %"
        out.append(f"{kind:<10}{r['pairs']:>7}{r['delivered']:>11}{pct:>9}")
    out.append("")
    out += ["misses:"] + [f"  {m['session']} turn {m['turn']} {m['kind']}: {m['fact']} "
                          f"{m['memory']!r}" + ("" if m["request_found"] else " (no request)")
                          for m in result["misses"]] if result["misses"] else ["misses: none"]
    f = result["forbidden"]
    out.append(f"forbidden lines: superseded {f['superseded']}, forgotten {f['forgotten']}, "
               f"other-project {f['other-project']} (facts later retired, seen before: "
               f"{result['retired_facts_seen_before_retirement']})")
    for kind, lines in result["forbidden_lines"].items():
        out += [f"  {kind}: {x['session']} request {x['request']}: {x['memory']!r}"
                for x in lines[:10]]
    sp = result["stable_prefix"]
    out.append(f"stable prefix: block byte-identical in every request in "
               f"{sum(s['block_identical'] for s in sp)}/{len(sp)} sessions, prefix up to the "
               f"block's end in {sum(s['prefix_identical'] for s in sp)}/{len(sp)}, whole system "
               f"prompt in {sum(s['system_identical'] for s in sp)}/{len(sp)}")
    t = result["tokens_added_per_request"]
    out.append(f"tokens added per request (chars/4): mean {t['mean']}, p50 {t['p50']}, "
               f"p95 {t['p95']}, max {t['max']} over {t['n']} requests; by part: " + ", ".join(
                   f"{k} mean {v['mean']} (n {v['n']})" for k, v in t["by_part"].items()))
    hooks = result["hook_latency_ms"]
    out.append("hook latency (ms): in the daemon " + "; ".join(
        f"{route} n {v['n']} p50 {v['p50']} p95 {v['p95']} max {v['max']}"
        for route, v in hooks["daemon"].items()))
    sh = hooks["system_hooks"]
    out.append(f"  system-prompt hooks as OpenCode waits: n {sh['n']} p50 {sh['p50']} "
               f"p95 {sh['p95']} max {sh['max']}")
    wrong = [k for k, c in result["capture"].items()
             if not c["stored"] or (c["status"] == "active") != (c["expected"] == "active")]
    out.append(f"capture: {len(result['capture']) - len(wrong)}/{len(result['capture'])} facts "
               f"stored and active/retired as expected" + (f"; not: {wrong}" if wrong else ""))
    out.append("timings (s): " + ", ".join(f"{k} {v}" for k, v in result["timings"].items()))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--embedding", choices=("local", "none"), default="local",
                    help="[embedding] provider of the daemon (default: local, the default)")
    ap.add_argument("--scenario", type=Path, default=SCENARIO,
                    help="the scenario file (default: bench/data/delivery_scenario.json; "
                         "another: bench/data/delivery_scenario_gull.json)")
    ap.add_argument("--json", type=Path, help="also write the JSON summary to this file")
    ap.add_argument("--keep", action="store_true", help="keep the throw-away folder")
    args = ap.parse_args(argv)
    reason = missing_requirement()
    if reason is not None or not Path(FAKETIME_LIB).exists():
        print(f"delivery: {reason or f'libfaketime is missing ({FAKETIME_LIB})'}",
              file=sys.stderr)
        return 2
    sc = load(args.scenario)
    root = Path(tempfile.mkdtemp(prefix="delivery-"))
    began = time.monotonic()
    bench = None
    try:
        bench = Bench(sc, root, args.embedding)
        bench.start()
        played = time.monotonic()
        bench.play()
        bench.timings["play_seconds"] = time.monotonic() - played
        bench.timings["total_seconds"] = time.monotonic() - began
        result = score(bench) | {"embedding": args.embedding, "scenario": args.scenario.name}
    finally:
        if bench is not None:
            bench.close()
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(table(result))
    summary_json = {k: v for k, v in result.items() if k != "forbidden_lines"}
    print(json.dumps(summary_json, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
