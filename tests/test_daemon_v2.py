"""The daemon on OpenCode's v2 storage, and what it says when capture would be blind.

Real daemon processes on copies of the v2 fixture (written by OpenCode 1.18.33) while a
writer appends v2 turns the way OpenCode writes them (``seq`` gaps, rows filled in after
insert); a database upgraded under a running daemon (tables added, then rows); and the
alerts for no database and for rows written to tables of an unknown shape.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from conftest import (
    FIXTURES,
    SAMPLE_DB,
    cli,
    cli_json,
    read_marks,
    start_daemon,
    wait_until,
    write_config,
)
from opencode_memoryd.serve.runtime.alerts import REPEAT_SECONDS, Alerts
from opencode_writer_v2 import (
    SESSION_V2_DDL,
    SESSION_V2_INDEXES,
    V2Writer,
    rewrite_rows,
    session_message_ddl,
)

V2 = json.loads((FIXTURES / "opencode-v2-sample.db.manifest.json").read_text())
SESSIONS = {s["key"]: s for s in V2["sessions"]}
PROJECT = SESSIONS["v2-directive"]["project_id"]
ACME2 = SESSIONS["v2-directive"]["directory"]
#: the last row of each fixture session: where its mark ends after catch-up
LAST = {s["id"]: (s["session_message_rows"][-1]["id"] if s["api"] == "v2"
                  else s["turns"][-1]["assistant_message_ids"][-1]) for s in V2["sessions"]}


@pytest.fixture
def data_dir(isolated_env: dict[str, str]) -> Path:
    path = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return write_config(tmp_path / "daemon.toml", """
[opencode]
settle_seconds = 0.2
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 0.3
max_wait_seconds = 30
sweep_interval_seconds = 2
poll_interval_seconds = 0.2
""")


@pytest.fixture
def cfg_no_sweep(tmp_path: Path) -> Path:
    """No safety sweep during the test: every change must be seen by the change checks."""
    return write_config(tmp_path / "nosweep.toml", """
[opencode]
settle_seconds = 0.2
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 0.3
max_wait_seconds = 30
sweep_interval_seconds = 600
poll_interval_seconds = 0.2
""")


@pytest.fixture
def run( isolated_env: dict[str, str]) -> Iterator[list[subprocess.Popen[str]]]:
    """Started daemons (``run.append(start_daemon(...))``), killed if a test fails."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == 0


def _log(state_db: Path) -> str:
    path = state_db.parent / "opencode-memoryd.log"
    return path.read_text() if path.exists() else ""


def _queue_notes(state_db: Path) -> dict[str, str | None]:
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as c:
            return {r[0]: r[1] for r in c.execute("SELECT session_id, last_error FROM queue")}
    except sqlite3.Error:
        return {}


@pytest.mark.slow
def test_v2_turns_are_captured_while_a_writer_appends_them(
        data_dir: Path, cfg_no_sweep: Path, isolated_env: dict[str, str], state_db: Path,
        run: list[subprocess.Popen[str]]) -> None:
    db = data_dir / "opencode.db"
    shutil.copyfile(FIXTURES / "opencode-v2-sample.db", db)
    run.append(start_daemon(cfg_no_sweep, isolated_env))
    assert wait_until(lambda: read_marks(state_db) == LAST), read_marks(state_db)
    w = V2Writer(db, pause=0.1)
    # a turn in flight is not read, however long it streams
    sid = SESSIONS["v2-directive"]["id"]
    t1 = w.append_turn(sid, "remember: the CDN is CloudFront", finish=False)
    assert wait_until(lambda: _queue_notes(state_db).get(sid) == "turn in flight")
    assert read_marks(state_db)[sid] == LAST[sid]
    t1_end = w.complete(sid, t1["assistants"][-1], t1["last"])
    # a tool turn (a tool-calls step, then the answer) and a new session
    tool_sid = SESSIONS["v2-tool"]["id"]
    t2 = w.append_turn(tool_sid, "Remember that lint runs with --max-warnings 0.",
                       "Remember: an assistant's words are never stored.", bash="pnpm lint")
    new_sid = w.new_session(project_id=PROJECT, directory=ACME2)
    t3 = w.append_turn(new_sid, "remember: the staging URL is staging.acme.test")
    w.close()
    expected = {sid: t1_end, tool_sid: t2["end"], new_sid: t3["end"]}
    assert wait_until(lambda: all(read_marks(state_db).get(k) == v
                                  for k, v in expected.items())), read_marks(state_db)
    _stop(run[0])
    memories = [m for m in cli_json("--config", str(cfg_no_sweep), "list")
                if m["type"] != "session-summary"]
    cited = sorted(mid for m in memories for mid in m["message_ids"])
    directives = [d["user_message_id"] for d in V2["remember_directives"]]
    assert cited == sorted([*directives, t1["user"], t2["user"], t3["user"]])
    assert len({m["content"] for m in memories}) == 6
    assert not any("assistant" in m["content"].lower() for m in memories)


@pytest.mark.slow
def test_rows_wiped_and_rewritten_under_a_running_daemon_are_stored_once(
        data_dir: Path, cfg: Path, isolated_env: dict[str, str], state_db: Path,
        run: list[subprocess.Popen[str]]) -> None:
    db = data_dir / "opencode.db"
    shutil.copyfile(FIXTURES / "opencode-v2-sample.db", db)
    run.append(start_daemon(cfg, isolated_env))
    assert wait_until(lambda: read_marks(state_db) == LAST), read_marks(state_db)
    multi = SESSIONS["v2-multiturn"]["id"]
    renamed = rewrite_rows(db, multi, new_ids=True)  # new ids, lower seq values
    assert wait_until(lambda: read_marks(state_db).get(multi) == renamed[LAST[multi]])
    assert '"session_rows_reset"' in _log(state_db)
    _stop(run[0])
    memories = [m for m in cli_json("--config", str(cfg), "list")
                if m["type"] != "session-summary"]
    assert len(memories) == 3
    directive = SESSIONS["v2-multiturn"]["turns"][1]["user_message_id"]
    merged = next(m for m in memories if directive in m["message_ids"])
    assert merged["message_ids"] == [directive, renamed[directive]]


@pytest.mark.slow
def test_a_database_upgraded_under_a_running_daemon_is_read_without_a_restart(
        data_dir: Path, cfg: Path, isolated_env: dict[str, str], state_db: Path,
        run: list[subprocess.Popen[str]]) -> None:
    db = data_dir / "opencode.db"
    shutil.copyfile(SAMPLE_DB, db)
    with sqlite3.connect(db) as c:  # an OpenCode from before the v2 tables
        for t in ("session_message", "session_input", "session_context_epoch"):
            c.execute(f"DROP TABLE {t}")
    run.append(start_daemon(cfg, isolated_env))
    assert wait_until(lambda: "ses_dfec43a4cffe5HkHVz7wUC8pgF" in read_marks(state_db))
    before = cli_json("--config", str(cfg), "status")["daemon"]["databases"][0]["schema"]
    assert "session_message" not in before
    # the upgrade: 2.x tables appear, then a 2.x client writes a session into them
    with sqlite3.connect(db) as c:
        c.execute(SESSION_V2_DDL)
        for ddl in SESSION_V2_INDEXES + session_message_ddl("session_v2"):
            c.execute(ddl)
    w = V2Writer(db, table="session_v2", pause=0.05)
    sid = w.new_session(project_id="aa96382a4f1e45500e577aeab09e21df3c441bfc",
                        directory="/tmp/projects/sample/acme-web")
    turn = w.append_turn(sid, "remember: the upgrade kept every session")
    w.close()
    assert wait_until(lambda: read_marks(state_db).get(sid) == turn["end"])
    assert '"source_schema_changed"' in _log(state_db)
    after = cli_json("--config", str(cfg), "status")["daemon"]["databases"][0]["schema"]
    assert "session_message (sessions in session_v2)" in after
    _stop(run[0])
    memories = [m for m in cli_json("--config", str(cfg), "list")
                if m["type"] != "session-summary"]
    assert [m["message_ids"] for m in memories if "upgrade" in m["content"]] == [
        [turn["user"]]]
    assert len(memories) == 4  # the sample's 3 directives and the new one


@pytest.mark.slow
def test_status_says_when_no_database_is_found_and_when_writes_go_unread(
        data_dir: Path, cfg: Path, isolated_env: dict[str, str], state_db: Path,
        run: list[subprocess.Popen[str]], tmp_path: Path) -> None:
    run.append(start_daemon(cfg, isolated_env))
    assert wait_until(lambda: (state_db.parent / "daemon.json").exists())

    def alerts() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = cli_json("--config", str(cfg), "status")["daemon"][
            "alerts"]
        return got

    assert wait_until(lambda: [a["event"] for a in alerts()] == ["no_opencode_database"])
    assert f"{data_dir}/opencode*.db" in alerts()[0]["message"]
    code, out = cli("--config", str(cfg), "status")
    assert code == 0 and "WARNING:     no OpenCode database found: looked for" in out
    time.sleep(1.0)  # several checks pass: still one warning
    assert _log(state_db).count('"no_opencode_database"') == 1
    # a database appears whose OpenCode writes turns to a table we do not know
    staged = tmp_path / "staged.db"
    shutil.copyfile(FIXTURES / "opencode-v2-sample.db", staged)
    with sqlite3.connect(staged) as c:
        c.execute("CREATE TABLE session_turn (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
                  "data TEXT, time_created INTEGER NOT NULL)")
        c.execute("INSERT INTO session_turn VALUES ('t1', 'ses_1', '{}', "
                  "CAST(strftime('%s','now') AS INTEGER) * 1000)")
    shutil.move(staged, data_dir / "opencode.db")
    assert wait_until(lambda: [a["event"] for a in alerts()] == ["unreadable_writes"],
                      timeout=40)
    message = alerts()[0]["message"]
    assert str(data_dir / "opencode.db") in message and "session_turn (1 rows" in message
    assert '"alert_resolved"' in _log(state_db)
    # what it can read is still captured
    assert wait_until(lambda: read_marks(state_db) == LAST)
    # a channel database in a shape with no readable layout
    with sqlite3.connect(data_dir / "opencode-next.db") as c:
        c.execute("CREATE TABLE conversation (id TEXT, body TEXT)")
    assert wait_until(lambda: sorted(a["event"] for a in alerts()) == [
        "source_schema_unreadable", "unreadable_writes"], timeout=40)
    code, out = cli("--config", str(cfg), "status")
    assert f"WARNING:     unrecognised OpenCode database schema in {data_dir}/opencode-next.db" \
        in out
    _stop(run[0])
    assert _log(state_db).count('"unreadable_writes"') == 1


def test_an_alert_is_logged_once_and_again_after_an_hour() -> None:
    now = [datetime(2026, 11, 23, tzinfo=UTC)]
    alerts = Alerts(lambda: now[0])
    with capture_logs() as logs:
        alerts.warn("k", "no_opencode_database", "looked for X")
        now[0] += timedelta(minutes=30)
        alerts.warn("k", "no_opencode_database", "looked for X")
        now[0] += timedelta(seconds=REPEAT_SECONDS)
        alerts.warn("k", "no_opencode_database", "looked for X")
        alerts.warn("k", "no_opencode_database", "looked for Y")  # changed: said at once
        alerts.resolve("k")
        alerts.resolve("k")
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("no_opencode_database", "warning"), ("no_opencode_database", "warning"),
        ("no_opencode_database", "warning"), ("alert_resolved", "info")]
    assert alerts.active() == []
