"""LLM prompt tokens: incremental extraction vs a full re-read, and our own time per session.

For every multi-turn session of the sample fixture (a database written by the real
OpenCode 1.18.33), the session is replayed into a copy of the database one turn at a time,
and after each turn `maintain` runs against an OpenAI-compatible fake server on 127.0.0.1.

* incremental: the prompt tokens our pipeline really sent (it reads after the mark);
* full re-read: the prompt tokens the same prompt would cost if every run re-sent the whole
  session so far (built with the same prompt builder, counted with the same estimator);
* our time: wall time of the session's processing minus the time spent inside the LLM call.

Then a generated 40-turn session (``--turns``): the real fixture's schema (an empty copy of
it), written turn by turn as OpenCode 1.18 writes them (``tests/opencode_writer.py``), every
turn tool-heavy (a ``bash`` run with a long output, a ``read`` of a file, an ``edit``, and a
patch part) after a short request; the same two counts, and the prompt tokens per turn.
Goal: incremental <= 1/3 of the full re-read.

Run: ``.venv/bin/python bench/incremental_tokens.py`` (prints a table and the ratio).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402
from opencode_memoryd import logs  # noqa: E402
from opencode_memoryd.capture.processor import Limits, SessionProcessor  # noqa: E402
from opencode_memoryd.conversation.transcript import chunk_turns, estimate_tokens  # noqa: E402
from opencode_memoryd.conversation.turns import drop_fork_copies, group_turns  # noqa: E402
from opencode_memoryd.extract.llm_extractor import LlmExtractor, build_prompt  # noqa: E402
from opencode_memoryd.llm.chat import ChatClient  # noqa: E402
from opencode_memoryd.models import TranscriptLine  # noqa: E402
from opencode_memoryd.redaction.engine import redact  # noqa: E402
from opencode_memoryd.source.reader import OpenCodeDB  # noqa: E402
from opencode_memoryd.state.db import StateDB  # noqa: E402
from opencode_memoryd.store.edge import EdgeStore  # noqa: E402
from opencode_writer import OpenCodeWriter, empty_copy  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "opencode-sample.db"


class TimedExtractor:
    """Wraps an extractor and accumulates the seconds spent inside it."""

    def __init__(self, inner: LlmExtractor) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    def extract(self, lines: Any, *, project_root: str | None = None) -> Any:
        t = time.perf_counter()
        try:
            return self.inner.extract(lines, project_root=project_root)
        finally:
            self.seconds += time.perf_counter() - t


def prompt_tokens(lines: list[TranscriptLine], project_root: str) -> int:
    system, user = build_prompt(lines, project_root=project_root, max_memories=12)
    return estimate_tokens(system) + estimate_tokens(user)


def full_reread_tokens(db: OpenCodeDB, s: Any) -> int:
    """The prompt tokens of the whole session so far in one prompt (the full re-read)."""
    full = 0
    everything = drop_fork_copies(db.messages_after(s.id, None), s.time_created)
    for chunk in chunk_turns(group_turns(everything), max_tokens=10**9, tool_output_chars=160):
        lines = [TranscriptLine(x.message_id, x.role, redact(x.text).text) for x in chunk.lines]
        if any(x.role == "user" for x in lines):
            full += prompt_tokens(lines, s.project_root)
    return full


_FILES = ("src/billing/ledger.py", "src/api/routes.py", "tests/test_ledger.py",
          "src/worker/queue.py", "docs/deploy.md")


def tool_turn(i: int) -> tuple[str, list[dict[str, Any]], str]:
    """Turn ``i`` of the generated session: (request, tool parts, reply)."""
    path = _FILES[i % len(_FILES)]
    request = (f"The test test_case_{i} fails after the refactor of {path}; find out why "
               f"and fix it. We use pytest with -x and keep line length at 100.")
    output = "\n".join(f"tests/test_ledger.py::test_case_{i}_{k} {'PASSED' if k % 7 else 'FAILED'}"
                       for k in range(60))
    source = "\n".join(f"    def step_{k}(self, amount: int) -> int:\n        return amount * {k}"
                       for k in range(40))
    tools: list[dict[str, Any]] = [
        {"tool": "bash", "state": {"status": "completed",
                                   "input": {"command": f"pytest -x tests -k case_{i}"},
                                   "output": output, "title": "pytest",
                                   "metadata": {"exit": 1}, "time": {"start": 0, "end": 1}}},
        {"tool": "read", "state": {"status": "completed", "input": {"filePath": path},
                                   "output": source, "title": path, "metadata": {},
                                   "time": {"start": 0, "end": 1}}},
        {"tool": "edit", "state": {"status": "completed",
                                   "input": {"filePath": path, "oldString": "amount * 3",
                                             "newString": "amount * 4"},
                                   "output": "Edit applied.", "title": path, "metadata": {},
                                   "time": {"start": 0, "end": 1}}},
        {"type": "patch", "hash": f"{i:040x}", "files": [path]},
    ]
    reply = (f"The failure came from step_3 in {path}: it multiplied by 3 where the ledger "
             f"expects 4. I changed it and test_case_{i} passes now.")
    return request, tools, reply


def generated_session(work: Path, fake: FakeOpenAI, turns: int) -> None:
    """The generated tool-heavy session: incremental vs full re-read, tokens per turn."""
    db_path = work / "generated.db"
    empty_copy(FIXTURE, db_path)
    writer = OpenCodeWriter(db_path, seed=7)
    sid = writer.new_session(project_id="p" * 40, directory="/srv/ledger",
                             worktree="/srv/ledger", title="Ledger refactor")
    state = StateDB(work / "generated.state.db")
    store = EdgeStore(work / "generated.qdrant")
    chat = ChatClient(base_url=fake.base_url, api_key=None, model="bench", max_retries=0)
    extractor = LlmExtractor(chat, max_memories=12, max_chars=400)
    incremental = full = 0
    per_turn: list[int] = []
    try:
        for i in range(turns):
            writer.append_tool_turn(sid, *tool_turn(i))
            before = len(fake.chat_requests)
            with OpenCodeDB(db_path) as db:
                s = next(x for x in db.sessions() if x.id == sid)
                SessionProcessor(db, state, store, extractor, Limits(settle_ms=0),
                                 clock=lambda: datetime.now(UTC)).process(s)
                sent = sum(estimate_tokens(str(m["content"])) for body in
                           fake.chat_requests[before:] for m in body["messages"])
                incremental += sent
                per_turn.append(sent)
                full += full_reread_tokens(db, s)
    finally:
        writer.close()
        state.close()
        store.close()
    ratio = incremental / max(full, 1)
    print(f"\ngenerated session: {turns} tool-heavy turns (bash, read, edit, patch)")
    print(f"  incremental {incremental} prompt tokens, full re-read {full}: incremental / "
          f"full = {ratio:.3f} (goal <= 0.333: {'met' if ratio <= 1 / 3 else 'NOT met'})")
    print(f"  prompt tokens per turn: mean {statistics.mean(per_turn):.0f}, p50 "
          f"{statistics.median(per_turn):.0f}, max {max(per_turn)}; first 5: "
          f"{per_turn[:5]}, last 5: {per_turn[-5:]}")
    print(f"  full re-read per turn: mean {full / turns:.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--turns", type=int, default=40, help="turns of the generated session")
    args = ap.parse_args()
    logs.configure(log_dir=None, console_level="warning")
    work = Path(tempfile.mkdtemp(prefix="ocm-bench-"))
    try:
        with OpenCodeDB(FIXTURE) as src:
            sessions = [s for s in src.sessions()
                        if sum(1 for m in src.messages_after(s.id, None)
                               if m.role == "user") >= 2]
        limits = Limits(settle_ms=0)
        rows = []
        own_ms: list[float] = []
        with FakeOpenAI() as fake:
            for s in sessions:
                db_path = work / f"{s.id}.db"
                shutil.copyfile(FIXTURE, db_path)
                with sqlite3.connect(FIXTURE) as c:
                    msgs = c.execute("SELECT id, session_id, time_created, time_updated, data "
                                     "FROM message WHERE session_id=? ORDER BY time_created, id",
                                     (s.id,)).fetchall()
                    parts = c.execute("SELECT * FROM part WHERE session_id=?", (s.id,)).fetchall()
                with sqlite3.connect(db_path) as c:
                    c.execute("DELETE FROM part WHERE session_id=?", (s.id,))
                    c.execute("DELETE FROM message WHERE session_id=?", (s.id,))
                user_idx = [i for i, m in enumerate(msgs) if '"role":"user"' in m[4]
                            or '"role": "user"' in m[4]]
                bounds = [*user_idx[1:], len(msgs)]
                state = StateDB(work / f"{s.id}.state.db")
                store = EdgeStore(work / f"{s.id}.qdrant")
                chat = ChatClient(base_url=fake.base_url, api_key=None, model="bench",
                                  max_retries=0)
                extractor = TimedExtractor(LlmExtractor(chat, max_memories=12, max_chars=400))
                incremental = 0
                full = 0
                start = 0
                for end in bounds:
                    with sqlite3.connect(db_path) as c:
                        c.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                                      msgs[start:end])
                        ids = {m[0] for m in msgs[start:end]}
                        c.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                                      [p for p in parts if p[1] in ids])
                    start = end
                    before = len(fake.chat_requests)
                    extractor.seconds = 0.0
                    with OpenCodeDB(db_path) as db:
                        proc = SessionProcessor(db, state, store, extractor, limits,
                                                clock=lambda: datetime.now(UTC))
                        t = time.perf_counter()
                        proc.process(s)
                        own_ms.append((time.perf_counter() - t - extractor.seconds) * 1000)
                        for body in fake.chat_requests[before:]:
                            incremental += sum(estimate_tokens(str(m["content"]))
                                               for m in body["messages"])
                        full += full_reread_tokens(db, s)
                state.close()
                store.close()
                rows.append((s.id, len(bounds), incremental, full))
        print(f"{'session':32} {'turns':>5} {'incremental':>12} {'full re-read':>13} {'ratio':>6}")
        for sid, turns, inc, full in rows:
            print(f"{sid:32} {turns:>5} {inc:>12} {full:>13} {full / max(inc, 1):>6.2f}")
        tot_inc = sum(r[2] for r in rows)
        tot_full = sum(r[3] for r in rows)
        print(f"{'total':32} {sum(r[1] for r in rows):>5} {tot_inc:>12} {tot_full:>13} "
              f"{tot_full / max(tot_inc, 1):>6.2f}")
        print(f"incremental / full = {tot_inc / max(tot_full, 1):.3f} "
              f"(full re-read costs {tot_full / max(tot_inc, 1):.2f}x)")
        own_ms.sort()
        p95 = own_ms[max(0, int(len(own_ms) * 0.95) - 1)]
        print(f"our time per session run, excluding the LLM: p50 "
              f"{statistics.median(own_ms):.1f} ms, p95 {p95:.1f} ms, "
              f"n={len(own_ms)} runs")
        with FakeOpenAI() as fake:
            generated_session(work, fake, args.turns)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
