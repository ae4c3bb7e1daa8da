"""No turn is lost to clock skew: a message stamped in the future, and a clock set back
after messages were stamped ahead, never hide the turns written after them."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from conftest import cli_json
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.service import open_local
from opencode_writer import OpenCodeWriter

SESSION = "ses_dfec43a4cffe5HkHVz7wUC8pgF"  # acme-web
DAY_MS = 86_400_000


def _maintain(config: Path, db: Path) -> dict[str, Any]:
    report: dict[str, Any] = cli_json("--config", str(config), "maintain", "--all", "--db",
                                      str(db))
    return report


def _remembered(config: Path, words: str) -> int:
    return sum(words in m["content"] for m in cli_json("--config", str(config), "list"))


def test_a_message_stamped_in_the_future_hides_no_later_turn(
        config_file: Path, sample_db: Path) -> None:
    _maintain(config_file, sample_db)
    w = OpenCodeWriter(sample_db)
    ahead = w.append_turn(SESSION, "remember that staging deploys need a green build")
    # its rows were stamped a day ahead (their last writes, time_updated, are not)
    w.conn.execute("UPDATE message SET time_created = time_created + ? WHERE id IN (?, ?)",
                   (DAY_MS, ahead["user"], ahead["assistant"]))
    first = _maintain(config_file, sample_db)
    assert first["totals"]["turns_read"] == 1 and first["totals"]["added"] == 1
    assert _remembered(config_file, "taging deploys need a green build") == 1
    # turns written afterwards, stamped now, sort before the future one
    w.append_turn(SESSION, "remember that release notes go in CHANGELOG.md")
    w.append_turn(SESSION, "remember that the staging host is staging.acme.test")
    w.close()
    second = _maintain(config_file, sample_db)
    assert second["totals"]["turns_read"] == 2 and second["totals"]["added"] == 2
    assert _remembered(config_file, "elease notes go in CHANGELOG.md") == 1
    assert _remembered(config_file, "staging.acme.test") == 1
    # read once: nothing is read again
    third = _maintain(config_file, sample_db)
    assert third["totals"]["turns_read"] == 0 and third["totals"]["added"] == 0


def _maintain_at(config: Path, db: Path, clock: datetime) -> dict[str, Any]:
    """``maintain --all`` with our own clock set to ``clock`` (the machine's clock)."""
    env = dict(os.environ)
    app = App(config=load_config(config, env), env=env, config_path=config,
              clock=lambda: clock)
    with open_local(app) as service:
        return service.maintain(directory=None, db=str(db))


def test_a_clock_set_back_hides_no_turn(config_file: Path, sample_db: Path,
                                        state_db: Path) -> None:
    now = datetime.now(UTC)
    _maintain_at(config_file, sample_db, now)
    w = OpenCodeWriter(sample_db)
    w.set_clock(DAY_MS)  # the machine's clock runs a day ahead: OpenCode's and ours
    w.append_turn(SESSION, "remember that staging deploys need a green build")
    report = _maintain_at(config_file, sample_db, now + timedelta(days=1, seconds=5))
    assert report["totals"]["added"] == 1
    with sqlite3.connect(state_db) as c:
        (mark,) = c.execute("SELECT time_created FROM marks WHERE session_id = ?",
                            (SESSION,)).fetchone()
    assert mark > now.timestamp() * 1000 + DAY_MS / 2  # the mark is a day ahead
    w.set_clock(0)  # the clock is corrected: every new message sorts before the mark
    w.append_turn(SESSION, "remember that release notes go in CHANGELOG.md")
    w.close()
    later = datetime.now(UTC) + timedelta(seconds=5)
    report = _maintain_at(config_file, sample_db, later)
    assert report["totals"]["turns_read"] == 1 and report["totals"]["added"] == 1
    assert _remembered(config_file, "elease notes go in CHANGELOG.md") == 1
    assert _maintain_at(config_file, sample_db, later)["totals"]["turns_read"] == 0


def test_a_mark_from_before_seq_reads_nothing_again_and_misses_nothing_new(
        config_file: Path, sample_db: Path, state_db: Path) -> None:
    _maintain(config_file, sample_db)
    with sqlite3.connect(state_db) as c:  # as a state file of schema 1 left it
        c.execute("UPDATE marks SET max_rowid = NULL")
    assert _maintain(config_file, sample_db)["totals"]["turns_read"] == 0
    with sqlite3.connect(state_db) as c:  # each mark now has the rowid it stood for
        assert c.execute("SELECT count(*) FROM marks WHERE max_rowid IS NULL").fetchone() \
            == (0,)
        (mark,) = c.execute("SELECT time_created FROM marks WHERE session_id = ?",
                            (SESSION,)).fetchone()
    w = OpenCodeWriter(sample_db)
    # a turn stamped just before the session's mark (a clock set back)
    w.set_clock(mark - 1000 - int(datetime.now(UTC).timestamp() * 1000))
    w.append_turn(SESSION, "remember that release notes go in CHANGELOG.md")
    w.close()
    report = _maintain(config_file, sample_db)
    assert report["totals"]["turns_read"] == 1 and report["totals"]["added"] == 1
    assert _maintain(config_file, sample_db)["totals"]["turns_read"] == 0


def test_a_state_file_of_schema_1_gets_max_rowid(tmp_path: Path) -> None:
    from opencode_memoryd.models import STORAGE_MESSAGE, Mark
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.state.engine import SCHEMA_VERSION

    path = tmp_path / "state.db"
    with sqlite3.connect(path) as c:
        c.execute("""CREATE TABLE marks (source_id TEXT NOT NULL, session_id TEXT NOT NULL,
                     time_created INTEGER NOT NULL, message_id TEXT NOT NULL,
                     updated_at TEXT NOT NULL, PRIMARY KEY (source_id, session_id))""")
        c.execute("INSERT INTO marks VALUES ('db', 'ses', 5, 'msg_5', 'then')")
        c.execute("PRAGMA user_version = 1")
    state = StateDB(path)

    def position() -> tuple[Mark | None, int | None]:
        return state.marks.get_mark("db", "ses"), state.marks.get_max_rowid("db", "ses")

    try:
        assert position() == (Mark(STORAGE_MESSAGE, (5, "msg_5")), None)
        # an older time with a newer rowid, then a newer time with an older rowid
        state.marks.set_mark("db", "ses", Mark(STORAGE_MESSAGE, (4, "msg_4")), "now", 7)
        assert position() == (Mark(STORAGE_MESSAGE, (5, "msg_5")), 7)
        state.marks.set_mark("db", "ses", Mark(STORAGE_MESSAGE, (6, "msg_6")), "now", 3)
        assert position() == (Mark(STORAGE_MESSAGE, (6, "msg_6")), 7)
    finally:
        state.close()
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


HOUR_MS = 3_600_000
DIR = "/tmp/projects/clock"


def test_turns_written_after_the_clock_went_back_an_hour_are_read(
        config_file: Path, sample_db: Path) -> None:
    """Stamped before their session's own creation, they are no fork's copies: their ids
    come from the same clock as their times."""
    _maintain(config_file, sample_db)
    w = OpenCodeWriter(sample_db)
    busy = w.new_session(project_id="d" * 40, directory=DIR, worktree=DIR)
    w.append_turn(busy, "remember that the clock service runs on port 7001")
    fresh = w.new_session(project_id="d" * 40, directory=DIR, worktree=DIR)
    first = _maintain(config_file, sample_db)
    assert first["totals"]["turns_read"] == 1 and first["totals"]["added"] == 1
    w.set_clock(-HOUR_MS)  # the writer's clock goes back an hour
    for i in range(5):
        w.append_turn(busy, f"remember that worker {i} listens on port 710{i}")
    w.append_turn(fresh, "remember that the fresh session uses port 7200")
    w.close()
    second = _maintain(config_file, sample_db)
    assert second["totals"]["turns_read"] == 6 and second["totals"]["added"] == 6
    assert all(_remembered(config_file, f"listens on port 710{i}") == 1 for i in range(5))
    assert _remembered(config_file, "port 7200") == 1
    assert _maintain(config_file, sample_db)["totals"]["turns_read"] == 0


def test_a_fork_copy_is_still_skipped(config_file: Path, sample_db: Path) -> None:
    """A fork's copies keep their original times and get ids minted at the fork: the
    directive the sample's fork repeats is stored once, from its original session."""
    report = _maintain(config_file, sample_db)
    with sqlite3.connect(sample_db) as c:
        (fork,) = c.execute("SELECT id FROM session WHERE title LIKE '%(fork #1)'").fetchone()
    (row,) = [r for r in report["sessions"] if r["session_id"] == fork]
    assert row["turns_read"] == 1  # its own turn; the six copied messages are skipped
    memories = cli_json("--config", str(config_file), "list")
    assert all(fork not in m["session_ids"] or len(m["session_ids"]) > 1 for m in memories)
