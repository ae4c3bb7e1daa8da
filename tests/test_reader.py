"""The OpenCode reader on real databases: schema detection, selection, read-only access."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from conftest import ACME, MANIFEST, PIPELINE, cli_json
from opencode_memoryd.conversation.transcript import human_text
from opencode_memoryd.conversation.turns import drop_fork_copies, finished_prefix, group_turns
from opencode_memoryd.errors import SourceError, SourceSchemaError
from opencode_memoryd.source.discover import DatabaseFinder, discover_databases
from opencode_memoryd.source.reader import OpenCodeDB


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reading_never_changes_the_database(sample_db: Path) -> None:
    before = _sha(sample_db)
    with OpenCodeDB(sample_db) as db:
        for s in db.sessions(include_subagents=True):
            db.messages_after(s.id, None)
    assert _sha(sample_db) == before
    assert not Path(str(sample_db) + "-wal").exists()


def test_schema_of_1_18(sample_db: Path) -> None:
    with OpenCodeDB(sample_db) as db:
        assert db.schema.migrations == MANIFEST["migration_count"]
        assert db.schema.last_migration == MANIFEST["last_migration"]
        assert {"path", "time_archived"} <= db.schema.session_columns


def _downgrade_to_1_2(path: Path) -> None:
    """Reshape a 1.18 database into the 1.2.x column set (docs/opencode-db.md §2)."""
    with sqlite3.connect(path) as c:
        for col in ("path", "agent", "model", "metadata", "cost", "tokens_input",
                    "tokens_output", "tokens_reasoning", "tokens_cache_read",
                    "tokens_cache_write", "workspace_id"):
            for idx in c.execute("SELECT name FROM sqlite_master WHERE type='index' AND "
                                 "tbl_name='session' AND sql LIKE ?", (f"%{col}%",)).fetchall():
                c.execute(f"DROP INDEX {idx[0]}")
            c.execute(f"ALTER TABLE session DROP COLUMN {col}")
        c.execute("DROP TABLE migration")
        c.execute("CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY, hash TEXT, "
                  "created_at NUMERIC)")
        c.executemany("INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)",
                      [("a", 1), ("b", 2), ("c", 3)])


def test_schema_of_1_2_reads_the_same_memories(sample_db: Path, config_file: Path) -> None:
    _downgrade_to_1_2(sample_db)
    with OpenCodeDB(sample_db) as db:
        assert db.schema.migrations == 3
        assert "path" not in db.schema.session_columns
    report = cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    assert report["totals"]["added"] == 3


def test_missing_column_is_named(sample_db: Path) -> None:
    with sqlite3.connect(sample_db) as c:
        c.execute("ALTER TABLE message RENAME COLUMN data TO payload")
    with pytest.raises(SourceSchemaError, match=r"column message\.data"):
        OpenCodeDB(sample_db)


def test_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not found"):
        OpenCodeDB(tmp_path / "absent.db")


def test_discovery_finds_channel_databases_and_opencode_db(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("opencode.db", "opencode-dev.db", "other.db"):
        (data / name).write_bytes(b"")
    extra = tmp_path / "elsewhere.db"
    found = discover_databases(data, {"OPENCODE_DB": str(extra)})
    assert {p.name for p in found} == {"opencode.db", "opencode-dev.db", "elsewhere.db"}
    rel = discover_databases(data, {"OPENCODE_DB": "custom.db"})
    assert data / "custom.db" in rel
    assert len(discover_databases(data, {"OPENCODE_DB": ":memory:"})) == 2
    assert discover_databases(tmp_path / "none", {}) == []


def test_the_finder_lists_the_folder_again_once_it_changed(tmp_path: Path) -> None:
    data = tmp_path / "opencode"
    data.mkdir()
    (data / "opencode.db").write_bytes(b"")
    now = [1000.5]
    find = DatabaseFinder(clock=lambda: now[0])

    def stamp(seconds: float) -> None:  # the folder's mtime, as a change at that time
        os.utime(data, ns=(int(seconds * 1e9), int(seconds * 1e9)))

    def names(env: dict[str, str] | None = None) -> set[str]:
        return {p.name for p in find(data, env or {})}

    stamp(1000)
    assert names() == {"opencode.db"}  # listed 0.5 s after the last change: not trusted
    (data / "opencode-dev.db").write_bytes(b"")
    stamp(1000)  # a second change in the same tick of the file system's clock
    now[0] = 1002.0
    assert names() == {"opencode.db", "opencode-dev.db"}  # listed again, now trusted
    (data / "opencode-beta.db").write_bytes(b"")
    stamp(1000)  # (cannot happen a second later: shows the listing is reused)
    assert names() == {"opencode.db", "opencode-dev.db"}
    assert names({"OPENCODE_DB": "custom.db"}) == {  # another $OPENCODE_DB: listed
        "opencode.db", "opencode-dev.db", "opencode-beta.db", "custom.db"}
    assert names() == {"opencode.db", "opencode-dev.db", "opencode-beta.db"}
    (data / "opencode-dev.db").unlink()
    stamp(1003)
    assert names() == {"opencode.db", "opencode-beta.db"}
    assert find(tmp_path / "none", {}) == []


def test_discovered_database_is_used_without_db_flag(sample_db: Path, config_file: Path,
                                                     isolated_env: dict[str, str]) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    (data / "opencode.db").write_bytes(sample_db.read_bytes())
    report = cli_json("--config", str(config_file), "maintain", "--dir", PIPELINE)
    assert report["totals"]["added"] == 1


def test_selection_by_dir(sample_db: Path) -> None:
    with OpenCodeDB(sample_db) as db:
        nested = db.sessions(directory=PIPELINE + "/services/ingest")
        assert {s.title for s in nested} == {"Python 3.9 compatibility",
                                              "Ingest flow walkthrough"}
        assert all(s.project_root == PIPELINE for s in nested)
        scratch = db.sessions(directory="/tmp/projects/sample/scratch")
        assert {s.project_key for s in scratch} == {"dir:/tmp/projects/sample/scratch"}
        assert db.sessions(directory="/tmp/projects") != []
        assert db.sessions(directory="/tmp/projects/sample/acme") == []  # not a prefix match


def test_human_text_excludes_compaction_synthetic_and_file_reads(sample_db: Path) -> None:
    turns = {t["message_id"]: t for s in MANIFEST["sessions"] for t in s["user_turns"]}
    with OpenCodeDB(sample_db) as db:
        for s in db.sessions():
            for m in db.messages_after(s.id, None):
                if m.role != "user":
                    continue
                t = turns[m.id]
                text = human_text(m)
                if t["synthetic_only"] or t.get("compaction_request"):
                    assert text == ""
                else:
                    assert text == t["text"].strip('"')


def test_fork_copies_are_dropped(sample_db: Path) -> None:
    fork = next(s for s in MANIFEST["sessions"] if s["kind"] == "fork")
    with OpenCodeDB(sample_db) as db:
        s = next(x for x in db.sessions() if x.id == fork["id"])
        kept = drop_fork_copies(db.messages_after(s.id, None), s.time_created)
    copies = {t["message_id"] for t in fork["user_turns"] if t.get("forked_copy")}
    assert copies and not copies & {m.id for m in kept}
    assert [m.id for m in kept if m.role == "user"] == [
        t["message_id"] for t in fork["user_turns"] if not t.get("forked_copy")]


def test_crashed_turn_counts_as_finished_after_the_limit(sample_db: Path) -> None:
    with sqlite3.connect(sample_db) as c:
        mid, data = c.execute(
            "SELECT id, data FROM message WHERE session_id='ses_dfec4032affe4TNn4bUt9e26HR' "
            "ORDER BY time_created DESC, id DESC LIMIT 1").fetchone()
        d = json.loads(data)
        d["time"].pop("completed")
        d.pop("finish")
        c.execute("UPDATE message SET data=? WHERE id=?", (json.dumps(d), mid))
    with OpenCodeDB(sample_db) as db:
        msgs = db.messages_after("ses_dfec4032affe4TNn4bUt9e26HR", None)
    turns = group_turns(msgs)
    created = max(m.time_updated for m in msgs)
    fresh = finished_prefix(turns, now_ms=created + 60_000, abandoned_ms=1_800_000, settle_ms=0)
    stale = finished_prefix(turns, now_ms=created + 1_900_000, abandoned_ms=1_800_000,
                            settle_ms=0)
    assert len(fresh) == len(turns) - 1
    assert len(stale) == len(turns)


def test_corrupt_row_is_skipped_not_fatal(sample_db: Path, config_file: Path) -> None:
    with sqlite3.connect(sample_db) as c:
        c.execute("UPDATE message SET data='{not json' WHERE id='msg_2013bd2fe001gZRlwadWrE9vrt'")
        c.execute("UPDATE part SET data='[' WHERE message_id='msg_2013bd882001CDLVOP4S7Oo6f5'")
    report = cli_json("--config", str(config_file), "maintain", "--dir", ACME,
                      "--db", str(sample_db))
    assert report["totals"]["failed"] == 0
    assert report["totals"]["added"] == 2


def test_deleted_session_after_a_run_breaks_nothing(sample_db: Path, config_file: Path) -> None:
    cli_json("--config", str(config_file), "maintain", "--dir", ACME, "--db", str(sample_db))
    with sqlite3.connect(sample_db) as c:
        c.execute("PRAGMA foreign_keys=ON")
        c.execute("DELETE FROM session WHERE id='ses_dfec43a4cffe5HkHVz7wUC8pgF'")
    report = cli_json("--config", str(config_file), "maintain", "--dir", ACME,
                      "--db", str(sample_db))
    assert report["totals"]["failed"] == 0
    # memories from vanished turns are kept (the 2 directives and the session's state)
    kept = cli_json("--config", str(config_file), "list", "--dir", ACME, "--db",
                    str(sample_db))
    assert sorted(m["type"] for m in kept) == ["feedback", "project", "session-summary"]
