"""Rows that are not UTF-8 (SQLite stores whatever bytes a writer gave it): one bad row
costs its own content only, every other session is processed, and a session that cannot
be read fails alone (exit 1), never the whole database (exit 4)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import cli, cli_json, marks
from opencode_memoryd.logs import LOG_FILE_NAME
from opencode_memoryd.models import FACT_TYPES

PY39_FACT = "The data-pipeline service must stay compatible with Python 3.9."

#: The user message behind "Our API base path is /api/v2." and its session.
API_MSG = "msg_2013c1282001ZlI10YZqYJoGKk"
API_SESSION = "ses_dfec4032affe4TNn4bUt9e26HR"
#: The session behind PY39_FACT
PY39_SESSION = "ses_dfec3e0e7ffemMTQpWH5L89esM"


def _bad_bytes(conn: sqlite3.Connection, table: str, column: str, row_id: str) -> None:
    """Put one byte that is not UTF-8 into a TEXT value, as a broken writer would."""
    (value,) = conn.execute(f"SELECT {column} FROM {table} WHERE id = ?", (row_id,)).fetchone()
    raw = value.encode()
    bad = raw[: len(raw) // 2] + b"\xff" + raw[len(raw) // 2:]
    conn.execute(f"UPDATE {table} SET {column} = CAST(x'{bad.hex()}' AS TEXT) WHERE id = ?",
                 (row_id,))


def _newest_messages(conn: sqlite3.Connection) -> dict[str, str]:
    """The newest message id of every top-level session that has one."""
    return dict(conn.execute(
        "SELECT m.session_id, max(m.id) FROM message m JOIN session s ON "
        "s.id = m.session_id WHERE s.parent_id IS NULL GROUP BY m.session_id"))


def _contents(config: Path) -> set[str]:
    """The facts stored (session summaries and project briefs left out)."""
    return {m["content"] for m in cli_json("--config", str(config), "list")
            if m["type"] in FACT_TYPES}


def test_a_row_that_is_not_utf8_costs_only_its_own_content(
        config_file: Path, sample_db: Path, state_db: Path, tmp_path: Path) -> None:
    with sqlite3.connect(sample_db) as c:
        (part,) = c.execute("SELECT id FROM part WHERE message_id = ? AND data LIKE "
                            "'%\"type\":\"text\"%'", (API_MSG,)).fetchone()
        _bad_bytes(c, "part", "data", part)  # the text of the /api/v2 directive
        other = c.execute("SELECT id FROM message WHERE session_id = ? ORDER BY "
                          "time_created DESC LIMIT 1", (PY39_SESSION,)).fetchone()[0]
        _bad_bytes(c, "message", "data", other)  # an assistant reply's metadata
        _bad_bytes(c, "session", "title", PY39_SESSION)
    with (pytest.raises(sqlite3.OperationalError, match="Could not decode to UTF-8"),
          sqlite3.connect(sample_db) as c):  # the premise: a plain query fails
        c.execute("SELECT data FROM part WHERE id = ?", (part,)).fetchall()

    code, out = cli("--config", str(config_file), "maintain", "--all", "--db",
                    str(sample_db), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["totals"]["corrupt_rows"] == 2 and report["failed"] == 0
    assert report["totals"]["sessions"] == 13
    by_session = {r["session_id"]: r for r in report["sessions"]}
    assert by_session[API_SESSION]["corrupt_rows"] == 1
    assert by_session[PY39_SESSION]["corrupt_rows"] == 1
    # the bad part's directive is lost, and nothing else
    assert _contents(config_file) == {"We always use pnpm, never npm.",
                                      PY39_FACT}
    # every session's mark moved past its newest message, the bad rows included
    with sqlite3.connect(sample_db) as c:
        newest = _newest_messages(c)
    assert {s: m[1] for s, m in marks(state_db).items()} == newest
    assert marks(state_db)[PY39_SESSION][1] == other
    text = (state_db.parent / LOG_FILE_NAME).read_text()
    assert "corrupt_part_row" in text and "Traceback" not in text


def test_a_session_that_cannot_be_read_fails_alone(
        config_file: Path, sample_db: Path, state_db: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(sample_db) as c:
        _bad_bytes(c, "message", "id", API_MSG)  # its position cannot become a mark
    code, out = cli("--config", str(config_file), "maintain", "--all", "--db",
                    str(sample_db))
    assert code == 1, out
    assert "has an id that is not UTF-8" in out
    done = {s: m[1] for s, m in marks(state_db).items()}
    assert API_SESSION not in done or done[API_SESSION] < API_MSG
    with sqlite3.connect(sample_db) as c:  # every other session was processed
        assert {s: m for s, m in done.items() if s != API_SESSION} == {
            s: m for s, m in _newest_messages(c).items() if s != API_SESSION}
    assert {"We always use pnpm, never npm.",
            PY39_FACT} <= _contents(config_file)
    capsys.readouterr()
    text = (state_db.parent / LOG_FILE_NAME).read_text()
    assert "Traceback" not in text
    # and again: the same session fails the same way, the others have nothing new
    code, out = cli("--config", str(config_file), "maintain", "--all", "--db",
                    str(sample_db), "--json")
    assert code == 1
    report = json.loads(out)
    assert [r["session_id"] for r in report["sessions"] if r["error"]] == [API_SESSION]
