"""Versioned migrations of the state file and the store: each numbered step runs once and
is recorded; a file or store already current is only read; an old one without records
still opens and gets every step once."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import cli_json
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.models import STORAGE_MESSAGE, Mark, Memory, content_hash, point_id
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.state.engine import SCHEMA_VERSION
from opencode_memoryd.state.migrations import STEPS
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.server import ServerStore
from opencode_memoryd.usecases.maintain import no_lock
from opencode_memoryd.usecases.migrations import STORE_STEPS, migrate_store_data

T0 = datetime(2025, 5, 1, 8, 0, tzinfo=UTC)
#: The tables the newest state step creates.
LAST_STEP_TABLES = ("agent_forgets", "secret_key", "session_secrets", "recall_parts")


def recorded(path: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as c:
        return [(int(v), str(n), str(a)) for v, n, a in c.execute(
            "SELECT version, name, applied_at FROM schema_migrations ORDER BY version")]


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as c:
        return {str(r[0]) for r in c.execute("SELECT name FROM sqlite_master "
                                             "WHERE type='table'")}


def sql(path: Path, *statements: str) -> None:
    c = sqlite3.connect(path)
    try:
        for statement in statements:
            c.execute(statement)
        c.commit()
    finally:
        c.close()


def open_close(path: Path) -> None:
    StateDB(path).close()


def test_a_new_state_file_records_every_step(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_close(path)
    assert [(v, n) for v, n, _ in recorded(path)] == [(s.version, s.name) for s in STEPS]
    assert set(LAST_STEP_TABLES) <= tables(path)


def test_a_state_file_one_step_behind_gets_that_step_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_close(path)
    # the file as the version before the newest step left it, with a mark in it
    sql(path, *[f"DROP TABLE {t}" for t in LAST_STEP_TABLES],
        f"DELETE FROM schema_migrations WHERE version = {STEPS[-1].version}",
        "INSERT INTO marks (source_id, session_id, time_created, message_id, updated_at) "
        "VALUES ('db', 'ses', 5, 'msg_5', 'then')")
    before = recorded(path)
    assert [v for v, _, _ in before] == [s.version for s in STEPS[:-1]]
    state = StateDB(path)
    try:
        assert state.marks.get_mark("db", "ses") == Mark(STORAGE_MESSAGE, (5, "msg_5"))
    finally:
        state.close()
    after = recorded(path)
    assert after[:-1] == before  # the earlier steps' records are untouched
    assert after[-1][:2] == (STEPS[-1].version, STEPS[-1].name)
    assert set(LAST_STEP_TABLES) <= tables(path)
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_opening_a_current_state_file_runs_no_step(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_close(path)
    first = recorded(path)
    # a table a step created goes missing: a step run again would create it again
    sql(path, "DROP TABLE recall_parts")
    open_close(path)
    open_close(path)
    assert recorded(path) == first
    assert "recall_parts" not in tables(path)


def test_a_state_file_from_before_the_records_gets_every_step_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_close(path)
    sql(path, "DROP TABLE schema_migrations",
        "INSERT INTO queue (source_id, session_id, first_change_ms, last_change_ms, due_ms) "
        "VALUES ('db', 'ses', 1, 2, 3)")
    state = StateDB(path)
    try:
        assert state.queue.queue_size() == 1
    finally:
        state.close()
    assert [v for v, _, _ in recorded(path)] == [s.version for s in STEPS]


# --------------------------------------------------------------------------- the store


def legacy(content: str, *, scope: str = "project", minutes: int = 0) -> Memory:
    """A memory as a store written before sections and user identities held it."""
    pkey = None if scope == "user" else "proj-a"
    t = T0 + timedelta(minutes=minutes)
    type_ = "feedback" if scope == "user" else "project"
    return Memory(id=point_id(scope, pkey, type_, content, None),  # type: ignore[arg-type]
                  content=content, type=type_, scope=scope,  # type: ignore[arg-type]
                  project_id=pkey, project_root="/srv/a" if pkey else None,
                  session_id="ses_1", message_ids=["msg_1"], source="rules", created_at=t,
                  updated_at=t, session_ids=["ses_1"], content_hash=content_hash(content))


OLD = [legacy("We always use pnpm, never npm.", minutes=1),
       legacy("The user prefers short answers.", scope="user", minutes=2)]
UNSECTIONED = MemoryFilter(without_section=True, include_retired=True)


@pytest.fixture(params=["edge", "server_local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s: MemoryStore = (EdgeStore(tmp_path / "edge") if request.param == "edge"
                      else ServerStore(path=str(tmp_path / "srv"), collection="memories"))
    yield s
    s.close()


def test_the_store_records_its_data_migrations_and_runs_each_once(store: MemoryStore) -> None:
    store.upsert(OLD)
    assert store.migrations() == []  # a store from before the records
    at = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    assert migrate_store_data(store, "alice", no_lock, clock=lambda: at) == {1: 1, 2: 2}
    assert store.migrations() == [
        {"version": s.version, "name": s.name, "applied_at": "2026-01-02T03:04:00.000Z"}
        for s in STORE_STEPS]
    assert store.count(UNSECTIONED) == 0
    assert {m.user_id for m in store.scroll(MemoryFilter(scope="user"))} == {"alice"}
    # a memory without a section written now is left alone: the steps are done
    late = legacy("Deploys go through GitHub Actions.", minutes=3)
    store.upsert([late])
    assert migrate_store_data(store, "alice", no_lock) == {}
    assert [m.id for m in store.scroll(UNSECTIONED)] == [late.id]
    assert len(store.migrations()) == len(STORE_STEPS)


def test_an_old_embedded_store_is_migrated_once_by_a_command_and_keeps_the_record(
        config_file: Path, isolated_env: dict[str, str]) -> None:
    where = store_dir(load_config(config_file, isolated_env), isolated_env)
    s = EdgeStore(where)
    s.upsert(OLD)
    s.close()
    listed = cli_json("--config", str(config_file), "list")
    assert sorted(m["section"] for m in listed) == ["conventions", "user"]
    s = EdgeStore(where)
    try:
        assert [m["version"] for m in s.migrations()] == [st.version for st in STORE_STEPS]
        s.upsert([legacy("Deploys go through GitHub Actions.", minutes=3)])
    finally:
        s.close()
    # opened again: the steps are recorded, so the new memory keeps no section
    listed = cli_json("--config", str(config_file), "list")
    assert sorted((m["content"], m["section"]) for m in listed) == [
        ("Deploys go through GitHub Actions.", None),
        ("The user prefers short answers.", "user"),
        ("We always use pnpm, never npm.", "conventions")]
