"""No prompt the model answered is sent to it again: kill -9 loops on `maintain` and on
the daemon while OpenCode writes, a slow answer, a crash between recording an answer and
storing it, and a `maintain` asked of the daemon while its job waits for the model.

The kill loops: the fake model records every request (arrival, and when its answer went
out). Each round kills the process under test at the moment a prompt arrives
(synchronously, before the model answers: that prompt gets no answer), just after an
answer went out (the process races to record it), or at a random moment (start-up,
catch-up, while a prompt is in flight, store or state writes). The model takes a little
time to answer, as a real one does, so random kills often land while a prompt waits.

A prompt sent again is allowed only when its last send got no answer that could be kept:
the process that sent it died before the answer reached it, or died in the few
milliseconds between reading the answer and recording it in the outbox (no result of those
turns was recorded). Everything else is a re-paid prompt: a second send from the same
process (an SDK retry, two jobs of one session), or a send after the answer was recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLE_DB, cli, cli_json, read_marks, start_daemon, wait_until, write_config
from fake_openai import FakeOpenAI, Hang, RecordedRequest
from opencode_writer import empty_copy
from test_daemon_replay import LINE, TOP_LEVEL, Model, _replay_all, _wait_marks

pytestmark = pytest.mark.slow

#: kill rounds per loop (``KILL_LOOP_ROUNDS`` overrides, for longer runs by hand)
ROUNDS = int(os.environ.get("KILL_LOOP_ROUNDS", "12"))
#: the longest a process may live after an answer reached it and still lose that answer:
#: reading, checking and recording an answer takes milliseconds
RECORD_WINDOW_SECONDS = 2.0


class SlowModel(Model):
    """The replay test's scripted model, answering after 0-0.4 s, as a real model takes
    its time."""

    def __init__(self, db: Path, seed: int) -> None:
        super().__init__(db)
        self.rng = random.Random(seed)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().__call__(body)
        with self.lock:
            delay = self.rng.uniform(0.0, 0.4)
        time.sleep(delay)
        return answer


@dataclass
class Life:
    """One process under test: when it started and died (``time.monotonic()``)."""

    proc: subprocess.Popen[str]
    started: float
    died: float | None = None


class KillLoop:
    """Starts the process under test, kills it, and knows which process sent a request."""

    MODES = ("at a prompt", "just after an answer", "at a random moment")

    def __init__(self, start: Any, fake: FakeOpenAI) -> None:
        self.start_process = start
        self.lives: list[Life] = []
        self.armed: str | None = None
        self.fired = threading.Event()
        self.kills: Counter[str] = Counter()
        self.lock = threading.Lock()
        fake.on_request = lambda r: self._hook(r, "at a prompt")
        fake.on_answer = lambda r: self._hook(r, "just after an answer")

    def start(self) -> None:
        with self.lock:
            self.lives.append(Life(self.start_process(), time.monotonic()))

    def kill(self) -> None:
        """SIGKILL the current process (if alive) and wait until it is gone."""
        with self.lock:
            life = self.lives[-1]
        if life.proc.poll() is None:
            life.proc.send_signal(signal.SIGKILL)
        life.proc.wait()
        if life.died is None:
            life.died = time.monotonic()

    def _hook(self, request: RecordedRequest, mode: str) -> None:
        # runs in the fake's handler thread: before the answer, or just after it
        if not request.path.endswith("/chat/completions"):
            return
        with self.lock:
            if self.armed != mode:
                return
            self.armed = None
        self.kill()
        self.fired.set()

    def round(self, mode: str, rng: random.Random) -> None:
        """One kill: at the next prompt or just after the next answer (when one comes
        within 15 s and the process lives that long; else at once), or at a random
        moment."""
        if mode != "at a random moment":
            self.fired.clear()
            with self.lock:
                self.armed = mode
                proc = self.lives[-1].proc
            deadline = time.monotonic() + 15
            while (not self.fired.wait(timeout=0.2) and proc.poll() is None
                   and time.monotonic() < deadline):
                pass
            with self.lock:
                self.armed = None
            if self.fired.is_set():
                self.kills[mode] += 1
                return
        else:
            time.sleep(rng.uniform(0.05, 2.5))
        self.kill()
        self.kills["at a random moment"] += 1

    def sender(self, at: float) -> Life:
        return next(life for life in self.lives
                    if life.started <= at and (life.died is None or at < life.died))


def _facts(cfg: Path) -> list[dict[str, Any]]:
    """The stored facts (not the session summaries and project briefs written beside)."""
    return [m for m in cli_json("--config", str(cfg), "list")
            if m["type"] not in ("session-summary", "project-brief")]


def _is_extraction(request: RecordedRequest) -> bool:
    """Whether a chat request asks for memories (not a session summary or a brief)."""
    return str(request.json["messages"][0]["content"]).startswith("You extract durable")


def _items(state_db: Path) -> list[tuple[str, str, float]]:
    """``(first_id, last_id, recorded at (time.time()))`` of every outbox item."""
    with sqlite3.connect(state_db) as c:
        rows = c.execute("SELECT first_id, last_id, created_at FROM items").fetchall()
    return [(f, last, datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
            for f, last, at in rows]


def _check(loop: KillLoop, requests: list[RecordedRequest], items: list[tuple[str, str, float]],
           wall_offset: float) -> dict[str, int]:
    """Assert that no answered prompt was sent again; return the loop's numbers."""
    previous: dict[str, RecordedRequest] = {}
    numbers: Counter[str] = Counter(rounds=sum(loop.kills.values()), prompts=len(requests),
                                    **loop.kills)
    for r in requests:
        key = hashlib.sha256(json.dumps(r.json, sort_keys=True).encode()).hexdigest()
        f = previous.get(key)
        previous[key] = r
        if f is None:
            continue
        numbers["sent again"] += 1
        sender = loop.sender(f.received_at)
        assert sender is not loop.sender(r.received_at), "sent twice by one process"
        assert sender.died is not None
        text = "\n".join(str(m["content"]) for m in f.json["messages"] if m["role"] == "user")
        ids = {mid for mid, _, _ in LINE.findall(text)}
        again_at = r.received_at + wall_offset
        if _is_extraction(f):  # its answer's record: the outbox item of those turns
            recorded = [at for fi, la, at in items
                        if (fi in ids or la in ids) and at < again_at]
            assert recorded == [], "a prompt whose answer was recorded was sent again"
        if f.status == 200 and f.answered_at is not None and f.answered_at < sender.died:
            # the answer reached a live process, which died before recording it
            assert sender.died - f.answered_at < RECORD_WINDOW_SECONDS
            numbers["sent again: killed between the answer and its record"] += 1
        else:
            numbers["sent again: the last send got no answer"] += 1
    return dict(numbers)


def _setup(tmp_path: Path, env: dict[str, str], fake: FakeOpenAI) -> tuple[Path, Path]:
    data = Path(env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    empty_copy(SAMPLE_DB, db)
    cfg = write_config(tmp_path / "k.toml", f"""
[opencode]
settle_seconds = 0.2
abandoned_turn_seconds = 31536000
[extraction]
mode = "llm"
[llm]
base_url = "{fake.base_url}"
model = "m"
max_retries = 2
timeout_seconds = 5
[daemon]
quiet_period_seconds = 1
max_wait_seconds = 60
sweep_interval_seconds = 3
""")
    return db, cfg


def _maintain(cfg: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-m", "opencode_memoryd", "--config", str(cfg),
                             "maintain", "--all"], env=full, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("target", ["maintain", "daemon"])
def test_kill_9_loop_never_resends_an_answered_prompt(
        target: str, tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    rng = random.Random(7)
    wall_offset = time.time() - time.monotonic()
    db = Path(isolated_env["XDG_DATA_HOME"]) / "opencode" / "opencode.db"
    model = SlowModel(db, seed=7)
    with FakeOpenAI(responder=model) as fake:
        db, cfg = _setup(tmp_path, isolated_env, fake)
        start = ((lambda: start_daemon(cfg, isolated_env)) if target == "daemon"
                 else (lambda: _maintain(cfg, isolated_env)))
        loop = KillLoop(start, fake)
        replayed: dict[str, list[str]] = {}
        replay = threading.Thread(target=lambda: replayed.update(_replay_all(db, gap=0.3)))
        loop.start()
        replay.start()
        try:
            while replay.is_alive() or sum(loop.kills.values()) < ROUNDS:
                life = loop.lives[-1]
                if life.proc.poll() is not None:  # maintain finished by itself
                    life.died = life.died or time.monotonic()
                    loop.start()
                    continue
                n = sum(loop.kills.values())
                loop.round(KillLoop.MODES[n] if n < 2 else rng.choice(KillLoop.MODES), rng)
                loop.start()
            replay.join()
            last = {s["id"]: replayed[s["id"]][-1] for s in TOP_LEVEL if replayed[s["id"]]}
            if target == "daemon":
                assert _wait_marks(state_db, last, timeout=90), read_marks(state_db)
                loop.lives[-1].proc.send_signal(signal.SIGTERM)
                loop.lives[-1].proc.wait(timeout=30)
            else:
                for _ in range(3):  # runs to the end, unkilled
                    loop.lives[-1].proc.wait(timeout=120)
                    loop.lives[-1].died = time.monotonic()
                    if all(read_marks(state_db).get(k) == v for k, v in last.items()):
                        break
                    loop.start()
                assert all(read_marks(state_db).get(k) == v for k, v in last.items())
            loop.lives[-1].died = loop.lives[-1].died or time.monotonic()
        finally:
            for life in loop.lives:
                if life.proc.poll() is None:
                    life.proc.kill()
        requests = fake.requests_to("/chat/completions")
    numbers = _check(loop, requests, _items(state_db), wall_offset)
    print(f"\nkill loop on {target}: {numbers}")
    assert numbers["rounds"] >= ROUNDS and numbers.get("at a prompt", 0) >= 1
    contents = sorted(m["content"] for m in _facts(cfg))
    assert len(contents) == len(set(contents)) == 3  # nothing lost, nothing twice


# -- the daemon path, one fault at a time ------------------------------------------------


def _chat_keys(fake: FakeOpenAI) -> list[str]:
    return [hashlib.sha256(json.dumps(r.json, sort_keys=True).encode()).hexdigest()
            for r in fake.requests_to("/chat/completions")]


def _daemon_config(tmp_path: Path, fake: FakeOpenAI, timeout: float = 5) -> Path:
    return write_config(tmp_path / "d.toml", f"""
[opencode]
settle_seconds = 0
[extraction]
mode = "llm"
[llm]
base_url = "{fake.base_url}"
model = "m"
max_retries = 2
timeout_seconds = {timeout}
[daemon]
quiet_period_seconds = 0.2
sweep_interval_seconds = 60
""")


def _fixture_copy(env: dict[str, str]) -> Path:
    data = Path(env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    db.write_bytes(SAMPLE_DB.read_bytes())
    return db


#: every top-level session of the fixture with messages gets a mark
SESSIONS_WITH_MARKS = 12


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def test_daemon_does_not_resend_a_slow_answer_at_once(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    """The openai SDK resent a prompt whose answer was slower than the timeout (its own
    retries): the endpoint answers, and bills, each copy. Now the prompt is sent once; the
    session is retried after the daemon's backoff (5 s), by which time it may succeed."""
    db = _fixture_copy(isolated_env)
    with FakeOpenAI(responder=Model(db)) as fake:
        fake.script(Hang(2.0))  # the first prompt's answer comes after the 1 s timeout
        proc = start_daemon(_daemon_config(tmp_path, fake, timeout=1), isolated_env)
        try:
            assert wait_until(lambda: len(read_marks(state_db)) >= SESSIONS_WITH_MARKS,
                              timeout=90, interval=0.2)
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        requests = fake.requests_to("/chat/completions")
        keys = _chat_keys(fake)
    slow = [r for r, k in zip(requests, keys, strict=True) if k == keys[0]]
    assert len(slow) == 2, "sent again at once by the SDK"
    assert slow[1].received_at - slow[0].received_at >= 5.0  # the daemon's backoff
    assert len(keys) - len(set(keys)) == 1  # no other prompt twice


def test_daemon_killed_after_recording_an_answer_replays_it(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    """Killed after the answer is in the outbox but before the store write and the mark:
    the next daemon stores the recorded answer and never asks for it again."""
    db = _fixture_copy(isolated_env)
    with FakeOpenAI(responder=Model(db)) as fake:
        cfg = _daemon_config(tmp_path, fake)
        proc = start_daemon(cfg, {**isolated_env, "OPENCODE_MEMORYD_FAULT": "after_record"})
        assert proc.wait(timeout=60) == -signal.SIGKILL
        sent = _chat_keys(fake)
        with sqlite3.connect(state_db) as c:
            pending = c.execute("SELECT count(*) FROM items WHERE status='extracted'"
                                ).fetchone()[0]
        assert len(sent) == 1 and pending == 1
        proc = start_daemon(cfg, isolated_env)
        try:
            assert wait_until(lambda: len(read_marks(state_db)) >= SESSIONS_WITH_MARKS,
                              timeout=90, interval=0.2)
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        keys = _chat_keys(fake)
    assert len(keys) == len(set(keys)), "a recorded answer was asked for again"
    with sqlite3.connect(state_db) as c:
        assert c.execute("SELECT count(*) FROM items WHERE status='extracted'"
                         ).fetchone()[0] == 0
    contents = [m["content"] for m in _facts(cfg)]
    assert len(contents) == len(set(contents)) == 3


def test_maintain_asked_of_the_daemon_while_its_job_waits_sends_nothing_twice(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    """`maintain` through the control socket while the daemon's job of the same session
    waits for the model: it waits for the project's lock, then reads after the moved
    mark."""
    db = _fixture_copy(isolated_env)
    with FakeOpenAI(responder=Model(db)) as fake:
        fake.script(Hang(2.0))
        cfg = _daemon_config(tmp_path, fake)
        proc = start_daemon(cfg, isolated_env)
        try:
            assert wait_until(lambda: len(fake.chat_requests) >= 1, timeout=60)
            assert wait_until(lambda: (state_db.parent / "daemon.json").exists())
            code, out = cli("--config", str(cfg), "maintain", "--all", "--json")
            assert code == 0, out
            assert wait_until(lambda: len(read_marks(state_db)) >= SESSIONS_WITH_MARKS,
                              timeout=90, interval=0.2)
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        keys = _chat_keys(fake)
    assert len(keys) == len(set(keys))


# -- dreams: a plan the model gave is not asked for again --------------------------------


class DiesAfter:
    """The dream's planner in a process that is killed while its next prompt is in
    flight, after ``answers`` answers arrived."""

    def __init__(self, chat: Any, answers: int) -> None:
        self.chat, self.answers, self.model = chat, answers, chat.model

    def complete_json(self, **request: Any) -> Any:
        if self.answers == 0:
            raise SystemExit("killed")  # not caught by the dream: the process is gone
        self.answers -= 1
        return self.chat.complete_json(**request)


def test_a_dream_killed_while_planning_does_not_pay_for_its_plans_again(
        tmp_path: Path) -> None:
    from opencode_memoryd.dream.dreamer import Dreamer
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.edge import EdgeStore
    from test_dream import ACME, NOW, SEED, SETTINGS, chat, responder

    store, state = EdgeStore(tmp_path / "store"), StateDB(tmp_path / "state.db")
    store.upsert(SEED)
    try:
        with FakeOpenAI(responder=responder()) as fake:
            planner = DiesAfter(chat(fake), answers=2)
            with pytest.raises(SystemExit):
                Dreamer(store, state, planner=planner, settings=SETTINGS,
                        clock=lambda: NOW).dream(ACME)
            assert len(fake.chat_requests) == 2  # two plans answered, then killed
            dreamer = Dreamer(store, state, planner=chat(fake), settings=SETTINGS,
                              clock=lambda: NOW)
            dreamer.recover()
            res = dreamer.dream(ACME)
            keys = _chat_keys(fake)
        assert res.status == "ok" and res.counts["merged"] == 4, res
        assert len(keys) == len(set(keys)) == 3  # only the third plan was asked for
        assert res.tokens_in > 0
        with sqlite3.connect(tmp_path / "state.db") as c:  # applied: the answers are spent
            assert c.execute("SELECT count(*) FROM llm_replies").fetchone()[0] == 0
    finally:
        store.close()
        state.close()


def test_a_dry_run_then_the_dream_pays_for_each_plan_once(tmp_path: Path) -> None:
    from opencode_memoryd.dream.dreamer import Dreamer
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.edge import EdgeStore
    from test_dream import ACME, NOW, SEED, SETTINGS, chat, responder

    store, state = EdgeStore(tmp_path / "store"), StateDB(tmp_path / "state.db")
    store.upsert(SEED)
    try:
        with FakeOpenAI(responder=responder()) as fake:
            dreamer = Dreamer(store, state, planner=chat(fake), settings=SETTINGS,
                              clock=lambda: NOW)
            dry = dreamer.dream(ACME, dry_run=True)
            real = dreamer.dream(ACME)
            assert len(fake.chat_requests) == 3
        assert dry.counts == real.counts and real.status == "ok"
        assert [o["op"] for o in dry.operations] == [o["op"] for o in real.operations]
    finally:
        store.close()
        state.close()
