"""The daemon against an LLM endpoint that rate-limits, then recovers, or refuses the key."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_DB, cli_json, start_daemon, wait_until, write_config
from fake_openai import FakeOpenAI, Status

pytestmark = pytest.mark.slow

#: How long LLM work pauses once the circuit opens (s): short, and still longer than the
#: jitter of a loaded machine, so a request sent too early shows.
COOLDOWN = 1.0


def _config(tmp_path: Path, fake: FakeOpenAI, extra: str = "") -> Path:
    return write_config(tmp_path / "d.toml", f"""
[opencode]
settle_seconds = 0
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
quiet_period_seconds = 0.5
sweep_interval_seconds = 60
circuit_failure_threshold = 3
circuit_cooldown_seconds = {COOLDOWN}
auth_pause_seconds = 600
{extra}
""")


def _db(env: dict[str, str]) -> Path:
    data = Path(env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    db.write_bytes(SAMPLE_DB.read_bytes())
    return db


def _deferred(state_db: Path, seconds: float) -> bool:
    """Whether sessions are queued and every one is due at least ``seconds`` from now."""
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as c:
            dues = [r[0] for r in c.execute("SELECT due_ms FROM queue")]
    except sqlite3.Error:
        return False
    return bool(dues) and min(dues) >= (time.time() + seconds) * 1000


def _marks(state_db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as c:
            return int(c.execute("SELECT count(*) FROM marks").fetchone()[0])
    except sqlite3.Error:
        return 0


def remember(body: dict) -> dict:
    import re
    text = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    return {"memories": [
        {"content": f"Rule: {t}", "type": "project", "scope": "project", "message_ids": [mid]}
        for mid, t in re.findall(r"^\[(msg_\w+)\] user: (.*)$", text, re.MULTILINE)
        if "remember" in t.lower()]}


def test_rate_limited_then_recovers_nothing_lost_or_duplicated(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    _db(isolated_env)
    with FakeOpenAI(responder=remember) as fake:
        fake.script(*[Status(429, retry_after=1) for _ in range(6)])
        cfg = _config(tmp_path, fake)
        proc = start_daemon(cfg, isolated_env)
        try:
            wait_until(lambda: _marks(state_db) >= 12, timeout=90, interval=0.2)
            assert _marks(state_db) == 12  # every top-level session with messages
            proc.terminate()
            proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
        times = [r for r in fake.requests if r.path.endswith("/chat/completions")]
    memories = cli_json("--config", str(cfg), "list")
    contents = [m["content"] for m in memories]
    assert len(contents) == len(set(contents)) == 3
    assert len(times) >= 6 + 10  # the 429s, then one call per session with human text
    # paced: after circuit_failure_threshold (3) 429s in a row the circuit opens, and no
    # request goes out before its cooldown is over
    at = [r.received_at for r in times]
    assert at[3] - at[2] >= COOLDOWN - 0.1 and at[6] - at[5] >= COOLDOWN - 0.1, [
        round(b - a, 2) for a, b in itertools.pairwise(at)]


def test_401_pauses_llm_work_and_status_says_why(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path) -> None:
    _db(isolated_env)
    with FakeOpenAI(responder=remember) as fake:
        fake.script(*[Status(401) for _ in range(50)])
        cfg = _config(tmp_path, fake)
        proc = start_daemon(cfg, isolated_env)
        try:
            assert wait_until(lambda: (state_db.parent / "daemon.json").exists())
            seen: list[dict] = []
            wait_until(lambda: seen.append(cli_json("--config", str(cfg), "status")) or
                       bool(seen[-1]["daemon"]["paused"]), interval=0.2)
            info = seen[-1]
            assert info and info["daemon"]["paused"], info
            assert "401" in info["daemon"]["paused"]["reason"] or \
                "auth" in info["daemon"]["paused"]["reason"]
            calls = len(fake.chat_requests)
            # every queued session has met the pause and waits for it to end ...
            assert wait_until(lambda: _deferred(state_db, 60))
            assert len(fake.chat_requests) == calls  # paused: no request per session
            assert _marks(state_db) == 0 or calls <= 2
            proc.terminate()
            proc.communicate(timeout=20)
            assert proc.returncode == 0
        finally:
            if proc.poll() is None:
                proc.kill()
