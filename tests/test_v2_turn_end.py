"""The end of an OpenCode 2.x turn, on a **synthetic** 2.x layout made from 2.x's source.

OpenCode 2.x marks a session idle (an ``idle`` row, ``session_v2.time_idle``, the
``time_suspended`` claim cleared) once per busy period: after every queued prompt and
background job, not after each turn (docs/explanation/capture.md, "The end of an OpenCode
2.x turn"). A turn whose last
step has ended while the busy period goes on is read once it has been quiet for
``opencode.unconfirmed_turn_seconds`` (60 s by default), not after
``opencode.abandoned_turn_seconds`` (1800 s); a turn still mid-way is never read. No 2.x
binary is available: the database is the genuine 1.18.33 fixture reshaped into the 2.x
layout (``make_synthetic_2x``), and the writer's clock is set two minutes back so the new
rows are as old as they would be after the quiet time, without a wait.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    FIXTURES,
    cli_json,
    marks,
    read_marks,
    start_daemon,
    wait_until,
    write_config,
)
from opencode_memoryd.conversation.turns import Idle, finished_prefix, group_turns
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.storages.v2rows import message_from_v2
from opencode_writer_v2 import V2Writer, make_synthetic_2x

V2 = json.loads((FIXTURES / "opencode-v2-sample.db.manifest.json").read_text())
SID = next(s["id"] for s in V2["sessions"] if s["key"] == "v2-directive")
QUIET_MS = 120_000  # older than the 60 s default, far younger than 1800 s


@pytest.fixture
def synthetic_2x(tmp_path: Path) -> Path:
    """SYNTHETIC: a copy of the v2 fixture reshaped into the OpenCode 2.x layout."""
    dst = tmp_path / "opencode" / "opencode.db"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "opencode-v2-sample.db", dst)
    make_synthetic_2x(dst)
    return dst


@pytest.fixture
def writer(synthetic_2x: Path, config_file: Path) -> Any:
    """A 2.x writer whose clock runs ``QUIET_MS`` behind, after a first pass read the
    fixture; it holds the busy period's claim, as 2.x does while it runs."""
    _added(config_file, synthetic_2x)
    w = V2Writer(synthetic_2x, table="session_v2", pause=0)
    w.set_clock(-QUIET_MS)
    w.claim(SID)
    yield w
    w.close()


def _added(cfg: Path, db: Path) -> int:
    report: dict[str, Any] = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
    assert report["totals"]["failed"] == 0
    return int(report["totals"]["added"])


def test_synthetic_2x_turn_ended_in_a_busy_period_is_read_after_the_quiet_time(
        writer: V2Writer, synthetic_2x: Path, config_file: Path, state_db: Path) -> None:
    ids = writer.append_turn(SID, "remember: hotfixes need two reviewers", busy=True)
    assert _added(config_file, synthetic_2x) == 1
    assert marks(state_db)[SID][1] == ids["assistants"][-1]


def test_synthetic_2x_step_in_flight_is_not_read_until_it_ends(
        writer: V2Writer, synthetic_2x: Path, config_file: Path, state_db: Path) -> None:
    ids = writer.append_turn(SID, "remember: hotfixes need two reviewers", finish=False)
    assert _added(config_file, synthetic_2x) == 0  # no time.completed: mid-way
    assert marks(state_db)[SID][1] != ids["user"]
    writer.complete(SID, ids["assistants"][-1], ids["last"], busy=True)
    assert _added(config_file, synthetic_2x) == 1
    assert marks(state_db)[SID][1] == ids["assistants"][-1]


def test_synthetic_2x_tool_call_step_is_not_read_until_the_next_step_ends(
        writer: V2Writer, synthetic_2x: Path, config_file: Path, state_db: Path) -> None:
    user = writer.user(SID, "remember: hotfixes need two reviewers")
    writer.tool_step(SID, user, "ls src")
    assert _added(config_file, synthetic_2x) == 0  # finish tool-calls: the next step is due
    assert marks(state_db)[SID][1] != user
    last, _ = writer.answer(SID, "Two reviewers for every hotfix, noted.")
    assert _added(config_file, synthetic_2x) == 1
    assert marks(state_db)[SID][1] == last


def test_finished_turn_rule_without_an_idle_mark() -> None:
    def row(kind: str, seq: int, data: dict[str, Any]) -> Any:
        return message_from_v2(f"msg_{seq:03d}", "ses_x", kind, seq, 1_000 + seq, 1_000 + seq,
                               json.dumps(data))

    user = row("user", 2, {"time": {"created": 1_002}, "text": "hi"})
    stop = row("assistant", 3, {"time": {"created": 1_003, "completed": 1_003},
                                "finish": "stop", "content": []})
    tools = row("assistant", 3, {"time": {"created": 1_003, "completed": 1_003},
                                 "finish": "tool-calls", "content": []})
    busy = Idle(time_idle=None, time_suspended=1_001)

    def done(rows: list[Any], now_ms: int) -> int:
        return len(finished_prefix(group_turns(rows), now_ms=now_ms, abandoned_ms=1_800_000,
                                   settle_ms=0, idle=busy, unconfirmed_ms=60_000))

    assert done([user, stop], now_ms=1_003 + 59_999) == 0
    assert done([user, stop], now_ms=1_003 + 60_000) == 1
    assert done([user, tools], now_ms=1_003 + 600_000) == 0


def test_a_2x_claim_counts_as_a_turn_in_flight_only_for_the_quiet_time(
        synthetic_2x: Path) -> None:
    w = V2Writer(synthetic_2x, table="session_v2", pause=0)
    w.append_turn(SID, "remember: hotfixes need two reviewers", busy=True)
    now = w.now_ms()

    def in_flight(suspended: int, unconfirmed_ms: int | None = 60_000) -> bool:
        with w.conn:
            w.conn.execute("UPDATE session_v2 SET time_suspended = ? WHERE id = ?",
                           (suspended, SID))
        with OpenCodeDB(synthetic_2x) as db:
            return db.in_flight(SID, now_ms=now, abandoned_ms=1_800_000,
                                unconfirmed_ms=unconfirmed_ms)

    try:
        assert in_flight(now - 10_000)  # a turn just claimed
        assert not in_flight(now - QUIET_MS)  # its last step ended, the claim goes on
        assert not in_flight(now + 10**15)  # no past time: the rows decide
        assert in_flight(now - QUIET_MS, unconfirmed_ms=None)  # as before
    finally:
        w.close()


@pytest.fixture
def daemon(tmp_path: Path, isolated_env: dict[str, str]) -> Iterator[tuple[Path, Path]]:
    """A running daemon over a SYNTHETIC 2.x database in OpenCode's data dir, caught up;
    yields the database and the config (2.x quiet time 1 s); killed in teardown."""
    db = Path(isolated_env["XDG_DATA_HOME"]) / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "opencode-v2-sample.db", db)
    make_synthetic_2x(db)
    cfg = write_config(tmp_path / "daemon.toml", """
[opencode]
settle_seconds = 0.2
unconfirmed_turn_seconds = 1
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 0.3
max_wait_seconds = 30
sweep_interval_seconds = 600
poll_interval_seconds = 0.2
""")
    proc = start_daemon(cfg, isolated_env)
    try:
        yield db, cfg
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_running_daemon_reads_a_synthetic_2x_turn_while_the_claim_is_held(
        daemon: tuple[Path, Path], state_db: Path) -> None:
    db, cfg = daemon
    assert wait_until(lambda: SID in read_marks(state_db))  # caught up
    w = V2Writer(db, table="session_v2", pause=0.05)
    w.claim(SID)
    ids = w.append_turn(SID, "remember: hotfixes need two reviewers", busy=True)
    w.close()
    assert wait_until(lambda: read_marks(state_db).get(SID) == ids["assistants"][-1])
    with sqlite3.connect(db) as c:  # the busy period goes on: never marked idle
        row = c.execute("SELECT time_suspended, time_idle FROM session_v2 WHERE id = ?",
                        (SID,)).fetchone()
    assert row[0] is not None and row[1] is None
    memories = cli_json("--config", str(cfg), "list")
    assert [m["message_ids"] for m in memories if "hotfix" in m["content"].lower()] == [
        [ids["user"]]]
