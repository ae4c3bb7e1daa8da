"""The daemon against a live replay of the sample sessions, in OpenCode's write pattern."""

from __future__ import annotations

import json
import random
import re
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    MANIFEST,
    SAMPLE_DB,
    cli_json,
    read_marks,
    start_daemon,
    wait_until,
    write_config,
)
from fake_openai import FakeOpenAI
from opencode_writer import OpenCodeWriter, empty_copy, replay_session

pytestmark = pytest.mark.slow

LINE = re.compile(r"^\[(msg_\w+)\] (user|assistant|tool): (.*)$", re.MULTILINE)
TOP_LEVEL = [s for s in MANIFEST["sessions"] if s["kind"] != "subagent"]


class Model:
    """A scripted model that also checks, at request time, that no turn is in flight."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.mid_turn: list[str] = []
        self.prompts: list[list[str]] = []
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        lines = LINE.findall(text)
        ids = list(dict.fromkeys(mid for mid, _, _ in lines))
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as c:
            for mid in ids:
                row = c.execute("SELECT data FROM message WHERE id=?", (mid,)).fetchone()
                data = json.loads(row[0]) if row else {}
                if data.get("role") == "assistant" and not data.get("time", {}).get(
                        "completed"):
                    self.mid_turn.append(mid)
        with self.lock:
            self.prompts.append(ids)
            self.times.append(time.time())
        memories = [{"content": f"Rule: {t.split(':', 1)[-1].strip()}", "type": "project",
                     "scope": "project", "message_ids": [mid]}
                    for mid, role, t in lines if role == "user" and "remember" in t.lower()]
        return {"memories": memories}


def _config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    return write_config(tmp_path / "d.toml", f"""
[opencode]
settle_seconds = 0.2
abandoned_turn_seconds = 31536000
[extraction]
mode = "llm"
# extraction alone: the summaries' own model calls are tested in test_summaries.py
[summaries]
session_summaries = false
project_brief = false
[llm]
base_url = "{fake.base_url}"
model = "m"
max_retries = 0
timeout_seconds = 5
[daemon]
quiet_period_seconds = 1
max_wait_seconds = 60
sweep_interval_seconds = 3
""")


def _wait_marks(state_db: Path, expected: dict[str, str], timeout: float = 60) -> bool:
    return wait_until(lambda: all(read_marks(state_db).get(k) == v
                                  for k, v in expected.items()), timeout, 0.2)


def _queue_empty(state_db: Path) -> bool:
    """Whether the daemon's queue holds no session (read-only): no extraction pending."""
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as c:
            return c.execute("SELECT count(*) FROM queue").fetchone()[0] == 0
    except sqlite3.Error:
        return False


def _replay_all(db: Path, gap: float) -> dict[str, list[str]]:
    """Replay every fixture session, one after another, ``gap`` seconds apart (shorter
    than the quiet period: sessions are extracted while later ones are written)."""
    src = sqlite3.connect(SAMPLE_DB)
    w = OpenCodeWriter(db)
    written: dict[str, list[str]] = {}
    try:
        for s in MANIFEST["sessions"]:
            written[s["id"]] = replay_session(w, src, s["id"], pause=0.01)
            time.sleep(gap)
    finally:
        w.close()
        src.close()
    return written


def test_each_session_extracted_once_never_mid_turn_and_resumed_for_new_turns(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    empty_copy(SAMPLE_DB, db)
    model = Model(db)
    with FakeOpenAI(responder=model) as fake:
        cfg = _config(tmp_path, fake)
        proc = start_daemon(cfg, isolated_env)
        try:
            written = _replay_all(db, gap=0.3)
            last = {s["id"]: written[s["id"]][-1] for s in TOP_LEVEL if written[s["id"]]}
            assert _wait_marks(state_db, last), read_marks(state_db)
            first_round = len(model.prompts)
            # resume a session later: only its new turn is sent
            w = OpenCodeWriter(db)
            sid = "ses_dfec43a4cffe5HkHVz7wUC8pgF"
            ids = w.append_turn(sid, "remember that the design system is called Bolt", "OK")
            w.close()
            assert _wait_marks(state_db, {sid: ids["assistant"]})
            assert wait_until(lambda: _queue_empty(state_db))  # nothing left to send
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
            assert proc.returncode == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    assert model.mid_turn == []
    sent = [mid for p in model.prompts for mid in p]
    assert len(sent) == len(set(sent)), "a message was sent to the model twice"
    # one extraction per session with human text (the empty session and pure sub-agent
    # sessions cost nothing)
    assert first_round <= len([s for s in TOP_LEVEL if s["user_turns"]])
    assert model.prompts[-1] == [ids["user"], ids["assistant"]]
    memories = cli_json("--config", str(cfg), "list")
    assert len(memories) == 4  # 3 directives (fork copy not stored twice) + the new one


def test_kill_9_during_replay_loses_and_repeats_nothing(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    empty_copy(SAMPLE_DB, db)
    model = Model(db)
    rng = random.Random(11)
    prompted = threading.Event()
    with FakeOpenAI(responder=model) as fake:
        fake.on_request = lambda r: prompted.set() if r.path.endswith(
            "/chat/completions") else None
        cfg = _config(tmp_path, fake)
        procs = [start_daemon(cfg, isolated_env)]
        replayed: dict[str, list[str]] = {}
        replay = threading.Thread(target=lambda: replayed.update(_replay_all(db, gap=0.3)))
        replay.start()
        kills = 0
        # kill -9 the daemon over and over while the sessions are written, and at least 4
        # times: about half of the kills land as its prompt reaches the model (the reply
        # races the kill), the others at a random moment (start-up, catch-up, store or
        # state writes)
        while replay.is_alive() or kills < 4:
            if rng.random() < 0.5:
                prompted.wait(timeout=3)
            else:
                time.sleep(rng.uniform(0.2, 2.0))
            procs[-1].send_signal(signal.SIGKILL)
            procs[-1].wait()
            kills += 1
            prompted.clear()
            procs.append(start_daemon(cfg, isolated_env))
        replay.join()
        last = {s["id"]: replayed[s["id"]][-1] for s in TOP_LEVEL if replayed[s["id"]]}
        try:
            assert _wait_marks(state_db, last, timeout=90), read_marks(state_db)
            procs[-1].send_signal(signal.SIGTERM)
            procs[-1].communicate(timeout=20)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    assert kills >= 3
    memories = cli_json("--config", str(cfg), "list")
    contents = sorted(m["content"] for m in memories)
    assert len(contents) == len(set(contents)) == 3
    cited = {mid for m in memories for mid in m["message_ids"]}
    assert cited == {d["message_id"] for d in MANIFEST["remember_directives"]
                     if not d["forked_copy"]}
    # no LLM call repeated for stored work: once an answer is recorded in the outbox, no
    # later prompt carries the same turns
    from datetime import datetime
    with sqlite3.connect(state_db) as c:
        items = c.execute("SELECT last_id, created_at FROM items").fetchall()
    assert items
    for last_id, created in items:
        recorded = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        later = [t for ids, t in zip(model.prompts, model.times, strict=True)
                 if last_id in ids and t > recorded + 0.001]
        assert later == [], last_id
