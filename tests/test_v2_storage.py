"""OpenCode's v2 storage (``session_message``, ``session_v2``) on real and derived databases.

The fixture ``opencode-v2-sample.db`` was written by the genuine OpenCode 1.18.33: three
sessions through its v2 API (``session_message`` rows, no ``message``/``part``) and one
through the 1.x API. The **synthetic** 2.x copies are derived from it (no 2.x binary was
available): ``session_v2`` created from the DDL captured from 2.0.x databases, the v2
sessions moved into it, and the 1.x session imported the way the 2.x importer is reported to.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, cli, cli_json, marks
from opencode_memoryd.conversation.transcript import human_text, transcript_lines
from opencode_memoryd.conversation.turns import Idle, finished_prefix, group_turns
from opencode_memoryd.models import STORAGE_MESSAGE, STORAGE_SESSION_MESSAGE, Mark
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.storages.v2rows import message_from_v2
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.state.engine import SCHEMA_VERSION
from opencode_writer_v2 import V2Writer, make_synthetic_2x, rewrite_rows

V2_DB = FIXTURES / "opencode-v2-sample.db"
V2 = json.loads((FIXTURES / "opencode-v2-sample.db.manifest.json").read_text())
SESSIONS = {s["key"]: s for s in V2["sessions"]}
DIRECTIVES = {d["user_message_id"]: d for d in V2["remember_directives"]}
PROJECT = SESSIONS["v2-directive"]["project_id"]
ACME2 = SESSIONS["v2-directive"]["directory"]


@pytest.fixture
def v2_db(tmp_path: Path) -> Path:
    """A private copy of the v2 fixture."""
    dst = tmp_path / "opencode" / "opencode.db"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(V2_DB, dst)
    return dst


@pytest.fixture
def synthetic_2x(v2_db: Path) -> Path:
    """SYNTHETIC: the v2 fixture reshaped into the reported OpenCode 2.x layout."""
    make_synthetic_2x(v2_db)
    return v2_db


def _maintain(cfg: Path, db: Path) -> dict[str, Any]:
    report: dict[str, Any] = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
    return report


def _assert_each_directive_once(cfg: Path) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = cli_json("--config", str(cfg), "list")
    cited = sorted(mid for m in memories for mid in m["message_ids"])
    assert cited == sorted(DIRECTIVES), [m["content"] for m in memories]
    for m in memories:
        fact = DIRECTIVES[m["message_ids"][0]]["fact"]
        assert fact.split()[-1].lower().strip(".") in m["content"].lower()
        assert m["session_ids"] == [DIRECTIVES[m["message_ids"][0]]["session_id"]]
        assert m["project_root"] == ACME2 and m["source"] == "rules"
    return memories


def test_v2_fixture_stores_each_directive_once_and_a_rerun_adds_nothing(
        v2_db: Path, config_file: Path, state_db: Path) -> None:
    first = _maintain(config_file, v2_db)
    assert first["totals"]["added"] == 3 and first["totals"]["failed"] == 0
    storage = {r["session_id"]: r["storage"] for r in first["sessions"]}
    assert storage == {s["id"]: (STORAGE_SESSION_MESSAGE if s["api"] == "v2"
                                 else STORAGE_MESSAGE) for s in V2["sessions"]}
    assert first["totals"]["turns_read"] == sum(len(s["turns"]) for s in V2["sessions"])
    _assert_each_directive_once(config_file)
    # marks: the last row of each session, in its own storage
    last = {s["id"]: (s["session_message_rows"][-1]["id"] if s["api"] == "v2"
                      else s["turns"][-1]["assistant_message_ids"][-1]) for s in V2["sessions"]}
    assert {sid: m[1] for sid, m in marks(state_db).items()} == last
    before = marks(state_db)
    second = _maintain(config_file, v2_db)
    assert second["totals"]["turns_read"] == 0 and second["totals"]["added"] == 0
    assert marks(state_db) == before
    assert len(cli_json("--config", str(config_file), "list")) == 3


def test_synthetic_2x_layout_stores_each_directive_once(
        synthetic_2x: Path, config_file: Path) -> None:
    with OpenCodeDB(synthetic_2x) as db:
        assert db.schema.has_v2_sessions
        sessions = db.sessions()
        assert {s.table for s in sessions} == {"session_v2"}  # the session_v2 row wins
        assert len(sessions) == 4
        legacy = SESSIONS["v1-legacy"]["id"]
        # imported: the 1.x rows stay, but only the session_message copies are read
        assert db.storage_of(legacy) == STORAGE_SESSION_MESSAGE
    first = _maintain(config_file, synthetic_2x)
    assert first["totals"]["added"] == 3
    assert {r["storage"] for r in first["sessions"]} == {STORAGE_SESSION_MESSAGE}
    _assert_each_directive_once(config_file)
    assert _maintain(config_file, synthetic_2x)["totals"]["added"] == 0
    assert len(cli_json("--config", str(config_file), "list")) == 3


def test_pure_2x_database_without_the_1x_message_tables_is_read(
        synthetic_2x: Path, config_file: Path) -> None:
    with sqlite3.connect(synthetic_2x) as c:  # SYNTHETIC: no 1.x turn tables at all
        c.execute("DROP TABLE part")
        c.execute("DROP TABLE message")
    report = _maintain(config_file, synthetic_2x)
    assert report["totals"]["added"] == 3
    assert "session_message" in report["databases"][0]["schema"]


def test_v2_rows_map_onto_turns_transcripts_and_tool_lines(v2_db: Path) -> None:
    with OpenCodeDB(v2_db) as db:
        for s in V2["sessions"]:
            rows = db.messages_after(s["id"], None)
            turns = group_turns(rows)
            assert [t.user.id for t in turns if t.user] == [
                t["user_message_id"] for t in s["turns"]]
            assert [[r.id for r in t.answers] for t in turns] == [
                t["assistant_message_ids"] for t in s["turns"]]
            assert [human_text(t.user) for t in turns if t.user] == [
                t["text"] for t in s["turns"]]
            if s["api"] == "v2":
                assert [r.seq for r in rows] == [r["seq"] for r in s["session_message_rows"]]
        tool = db.messages_after(SESSIONS["v2-tool"]["id"], None)
    lines = transcript_lines(group_turns(tool), tool_output_chars=160)
    roles = [(line.role, line.text) for line in lines]
    assert ("tool", "bash ls src -> index.ts Command exited with code 0.") in roles
    assert any(r == "tool" and t.startswith("bash cat README.md -> # acme-web") for r, t in roles)
    assert ("assistant", "src contains index.ts.") in roles
    # reasoning never reaches the transcript
    assert not any("I should read the README" in t for _, t in roles)


def test_notes_are_never_human_text_and_never_block_a_turn(
        v2_db: Path, config_file: Path) -> None:
    _maintain(config_file, v2_db)
    sid = SESSIONS["v2-multiturn"]["id"]
    w = V2Writer(v2_db, pause=0)
    for kind, data in (
        ("synthetic", {"sessionID": sid, "text": "remember: synthetic text is no directive"}),
        ("system", {"text": "remember: system text is no directive"}),
        ("agent-switched", {"agent": "plan"}),
        ("shell", {"callID": "c1", "command": "echo hi", "output": "remember: shell output",
                   "time": {"created": 1, "completed": 2}}),
        ("compaction", {"reason": "auto", "summary": "remember: release notes go in CHANGELOG.md",
                        "recent": "msg_x"}),
    ):
        w.row(sid, kind, data, gap=3)
    ids = w.append_turn(sid, "Remember that the release branch is called release/next.",
                        "Noted. Remember: assistants are never a source.", bash="git branch")
    w.row(sid, "model-switched", {"model": {"id": "other"}})
    w.close()
    report = _maintain(config_file, v2_db)
    # read: the notes before the turn (a turn of notes only), then the turn
    assert report["totals"]["added"] == 1 and report["totals"]["turns_read"] == 2
    new = [m for m in cli_json("--config", str(config_file), "list")
           if "release/next" in m["content"]]
    assert [m["message_ids"] for m in new] == [[ids["user"]]]
    listed = cli_json("--config", str(config_file), "list")
    assert len([m for m in listed if m["type"] != "session-summary"]) == 4
    # the compaction row's summary is kept as the session's summary, never mined
    [summary] = [m for m in listed if m["type"] == "session-summary"]
    assert summary["content"] == "remember: release notes go in CHANGELOG.md."
    assert summary["session_ids"] == [sid]


def _v2(kind: str, seq: int, data: dict[str, Any], ms: int = 1_000) -> Any:
    return message_from_v2(f"msg_{seq:03d}", "ses_x", kind, seq, ms + seq, ms + seq,
                           json.dumps(data))


def _step(seq: int, *, finish: str | None = "stop", completed: bool = True,
          error: bool = False) -> Any:
    data: dict[str, Any] = {"time": {"created": 1_000 + seq}, "content": []}
    if completed:
        data["time"]["completed"] = 1_000 + seq
    if finish:
        data["finish"] = finish
    if error:
        data["error"] = {"type": "unknown", "message": "HTTP transport failed"}
    return _v2("assistant", seq, data)


def test_v2_finished_turn_rule() -> None:
    user = _v2("user", 2, {"time": {"created": 1_002}, "text": "hi"})
    now, limits = 10_000, {"abandoned_ms": 1_000_000, "settle_ms": 0}

    def done(rows: list[Any], idle: Idle | None = None, now_ms: int = now) -> int:
        turns = group_turns(rows)
        return len(finished_prefix(turns, now_ms=now_ms, idle=idle, **limits))

    assert done([user, _step(3)]) == 1
    assert done([user, _step(3, finish=None, completed=False)]) == 0  # streaming
    assert done([user, _step(3, finish="tool-calls")]) == 0  # another step follows
    assert done([user, _step(3, finish="tool-calls"), _step(13)]) == 1  # seq gap
    assert done([user, _step(3, finish="error", error=True)]) == 1  # model failure
    assert done([user, _step(3, finish=None, completed=False)], now_ms=2_000_000) == 1
    # a prompt steered into a running turn: the first turn is over once its steps completed
    steered = _v2("user", 8, {"time": {"created": 1_008}, "text": "also this"})
    assert done([user, _step(3, finish="tool-calls"), steered, _step(9)]) == 2
    assert done([user, _step(3, finish=None, completed=False), steered, _step(9)]) == 0
    # 2.x: the end of a turn is confirmed by an idle row after it, or by time_idle
    idle_row = _v2("idle", 4, {"time": {"created": 1_004}, "outcome": "completed"})
    assert done([user, _step(3)], idle=Idle(None, None)) == 0
    assert done([user, _step(3), idle_row], idle=Idle(None, None)) == 1
    assert done([user, _step(3)], idle=Idle(time_idle=1_003, time_suspended=None)) == 1
    assert done([user, _step(3)], idle=Idle(time_idle=1_003, time_suspended=1_005)) == 0
    assert done([user, _step(3)], idle=Idle(None, None), now_ms=2_000_000) == 1  # abandoned
    # notes alone: nothing to wait for
    assert done([_v2("agent-switched", 20, {"agent": "plan"})]) == 1


def test_reset_rows_are_read_again_and_nothing_is_stored_twice(
        v2_db: Path, config_file: Path, state_db: Path) -> None:
    sid = SESSIONS["v2-multiturn"]["id"]
    _maintain(config_file, v2_db)
    points = cli_json("--config", str(config_file), "list")
    last = SESSIONS["v2-multiturn"]["session_message_rows"][-1]["id"]
    assert marks(state_db)[sid] == (15, last)
    # wiped: nothing to read, nothing fails
    with sqlite3.connect(v2_db) as c:
        rows = c.execute("SELECT * FROM session_message WHERE session_id = ?", (sid,)).fetchall()
        c.execute("DELETE FROM session_message WHERE session_id = ?", (sid,))
    assert _maintain(config_file, v2_db)["totals"]["failed"] == 0
    with sqlite3.connect(v2_db) as c:
        c.executemany("INSERT INTO session_message VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    # rewritten with the same ids at lower seq values: the mark follows its row by id
    rewrite_rows(v2_db, sid)
    again = _maintain(config_file, v2_db)
    assert again["totals"]["added"] == 0 and again["totals"]["turns_read"] == 0
    assert marks(state_db)[sid] == (6, last)
    # rewritten with new ids: the session is read from its start; the directive it holds
    # is merged into the memory that has it (same point id), and the outbox is not redone
    renamed = rewrite_rows(v2_db, sid, new_ids=True)
    log = state_db.parent / "opencode-memoryd.log"
    before = log.read_text()
    reset = _maintain(config_file, v2_db)
    assert '"event": "session_rows_reset"' in log.read_text()[len(before):]
    row = next(r for r in reset["sessions"] if r["session_id"] == sid)
    assert row["turns_read"] == 3 and row["added"] == 0 and row["skipped"] == {"duplicate": 1}
    assert marks(state_db)[sid] == (6, renamed[last])
    after = cli_json("--config", str(config_file), "list")
    assert sorted(m["id"] for m in after) == sorted(m["id"] for m in points)
    directive = SESSIONS["v2-multiturn"]["turns"][1]["user_message_id"]
    merged = next(m for m in after if directive in m["message_ids"])
    assert merged["message_ids"] == [directive, renamed[directive]]
    # and read again from the start once more (same rows, same chunk): the recorded
    # result is reused, no extraction runs
    with sqlite3.connect(state_db) as c:
        c.execute("DELETE FROM marks WHERE session_id = ?", (sid,))
    replay = next(r for r in _maintain(config_file, v2_db)["sessions"]
                  if r["session_id"] == sid)
    assert replay["replayed_items"] == 1 and replay["added"] == 0 and replay["chunks"] == 1
    assert len(cli_json("--config", str(config_file), "list")) == 3


def test_a_new_turn_after_a_reset_is_stored_once(v2_db: Path, config_file: Path) -> None:
    sid = SESSIONS["v2-directive"]["id"]
    _maintain(config_file, v2_db)
    rewrite_rows(v2_db, sid, new_ids=True)
    w = V2Writer(v2_db, pause=0)
    ids = w.append_turn(sid, "remember: canary deploys go to 5% first")
    w.close()
    report = _maintain(config_file, v2_db)
    assert report["totals"]["added"] == 1
    memories = cli_json("--config", str(config_file), "list")
    assert len(memories) == 4
    canary = [m["message_ids"] for m in memories if "canary" in m["content"].lower()]
    assert canary == [[ids["user"]]]


def test_a_1x_session_imported_into_session_message_continues_after_its_mark(
        v2_db: Path, config_file: Path, state_db: Path) -> None:
    legacy = SESSIONS["v1-legacy"]
    _maintain(config_file, v2_db)
    assert marks(state_db)[legacy["id"]][1] == legacy["turns"][0]["assistant_message_ids"][-1]
    make_synthetic_2x(v2_db)  # SYNTHETIC upgrade: the importer copies it, same ids
    w = V2Writer(v2_db, table="session_v2", pause=0)
    ids = w.append_turn(legacy["id"], "remember: staging is reset every Monday")
    w.close()
    report = _maintain(config_file, v2_db)
    row = next(r for r in report["sessions"] if r["session_id"] == legacy["id"])
    assert row["storage"] == STORAGE_SESSION_MESSAGE
    assert row["turns_read"] == 1 and row["added"] == 1  # only the new turn
    assert report["totals"]["added"] == 1
    assert marks(state_db)[legacy["id"]][1] != ids["user"]


def test_turn_in_flight_is_not_read_until_its_step_completes(
        v2_db: Path, config_file: Path, state_db: Path) -> None:
    sid = SESSIONS["v2-directive"]["id"]
    _maintain(config_file, v2_db)
    w = V2Writer(v2_db, pause=0)
    ids = w.append_turn(sid, "remember: hotfixes need two reviewers", finish=False)
    assert _maintain(config_file, v2_db)["totals"]["added"] == 0
    assert marks(state_db)[sid][1] != ids["assistants"][-1]
    w.complete(sid, ids["assistants"][-1], ids["last"])
    w.close()
    assert _maintain(config_file, v2_db)["totals"]["added"] == 1
    assert marks(state_db)[sid][1] == ids["assistants"][-1]


def test_schema_is_detected_again_after_an_upgrade(sample_db: Path) -> None:
    with sqlite3.connect(sample_db) as c:  # before 1.14: no v2 tables at all
        for t in ("session_message", "session_input", "session_context_epoch"):
            c.execute(f"DROP TABLE {t}")
    with OpenCodeDB(sample_db) as db:
        assert not db.schema.has_session_message
        assert db.refresh_schema() is False
        with sqlite3.connect(sample_db) as c:
            from opencode_writer_v2 import SESSION_V2_DDL, session_message_ddl
            c.execute(SESSION_V2_DDL)
            for ddl in session_message_ddl("session_v2"):
                c.execute(ddl)
        assert db.refresh_schema() is True
        assert db.schema.has_v2_sessions and db.schema.has_session_message
        assert "session_message (sessions in session_v2)" in db.schema.describe()


def test_unknown_tables_with_recent_rows_are_reported_by_status(
        v2_db: Path, config_file: Path, isolated_env: dict[str, str]) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    shutil.copyfile(v2_db, db)
    code, out = cli("--config", str(config_file), "status")
    assert code == 0 and "WARNING" not in out
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE session_turn (id TEXT PRIMARY KEY, session_id TEXT, "
                  "time_created INTEGER)")
        c.execute("INSERT INTO session_turn VALUES ('t1', 'ses_1', "
                  "CAST(strftime('%s','now') AS INTEGER) * 1000)")
        c.execute("CREATE TABLE settings_cache (id TEXT, time_created INTEGER)")  # not turns
        c.execute("INSERT INTO settings_cache VALUES ('x', 1)")
    code, out = cli("--config", str(config_file), "status")
    assert code == 0
    assert f"WARNING:     {db}: rows are written to tables this version cannot read " \
           "(session_turn)" in out
    info = cli_json("--config", str(config_file), "status")
    assert info["databases"][0]["unread_tables"] == ["session_turn"]


def test_a_database_with_no_readable_layout_names_what_is_missing(v2_db: Path) -> None:
    from opencode_memoryd.errors import SourceSchemaError
    with sqlite3.connect(v2_db) as c:
        c.execute("DROP TABLE part")
        c.execute("DROP TABLE session_message")
    with pytest.raises(SourceSchemaError, match="missing table part") as exc:
        OpenCodeDB(v2_db)
    assert "session_message with session or session_v2" in str(exc.value)


def test_a_state_file_of_schema_1_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE marks (source_id TEXT NOT NULL, session_id TEXT NOT NULL, "
                  "time_created INTEGER NOT NULL, message_id TEXT NOT NULL, updated_at TEXT "
                  "NOT NULL, PRIMARY KEY (source_id, session_id))")
        c.execute("INSERT INTO marks VALUES ('db', 's1', 5, 'msg_a', 'now')")
        c.execute("CREATE TABLE items (id TEXT PRIMARY KEY, source_id TEXT NOT NULL, "
                  "session_id TEXT NOT NULL, first_time INTEGER NOT NULL, first_id TEXT NOT "
                  "NULL, last_time INTEGER NOT NULL, last_id TEXT NOT NULL, project_key TEXT "
                  "NOT NULL, project_root TEXT, status TEXT NOT NULL, extractor TEXT NOT NULL, "
                  "model TEXT, result TEXT NOT NULL, tokens_in INTEGER NOT NULL DEFAULT 0, "
                  "tokens_out INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, "
                  "updated_at TEXT NOT NULL)")
        c.execute("PRAGMA user_version=1")
    state = StateDB(path)
    try:
        assert state.marks.get_mark("db", "s1") == Mark(STORAGE_MESSAGE, (5, "msg_a"))
        # a mark moves forward within a storage, and is replaced by one in another storage
        state.marks.set_mark("db", "s1", Mark(STORAGE_MESSAGE, (4, "msg_0")), "now")
        assert state.marks.get_mark("db", "s1") == Mark(STORAGE_MESSAGE, (5, "msg_a"))
        state.marks.set_mark("db", "s1", Mark(STORAGE_SESSION_MESSAGE, (2, "msg_b")), "now")
        assert state.marks.get_mark("db", "s1") == Mark(STORAGE_SESSION_MESSAGE, (2, "msg_b"))
        state.marks.replace_mark("db", "s1", None, "now")
        assert state.marks.get_mark("db", "s1") is None
    finally:
        state.close()
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
