"""Secrets quoted by errors never reach the log file, the console or the CLI's stderr:
tracebacks, exception objects, nested fields, other libraries' log records."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
from pathlib import Path

import pytest
import structlog

from conftest import cli
from opencode_memoryd import logs

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def sqlite_error_quoting_a_row(tmp_path: Path) -> sqlite3.Error:
    """A real SQLite error whose message quotes row data (a column that is not UTF-8)."""
    db = tmp_path / "rows.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE part (data TEXT)")
        raw = f'{{"text": "my token is {TOKEN}"}}'.encode() + b"\xff"
        c.execute(f"INSERT INTO part VALUES (CAST(x'{raw.hex()}' AS TEXT))")
    conn = sqlite3.connect(db)
    try:
        conn.execute("SELECT data FROM part").fetchall()
    except sqlite3.Error as exc:
        assert TOKEN in str(exc)  # the premise: SQLite quotes the row
        return exc
    finally:
        conn.close()
    raise AssertionError("the row decoded")


def test_exceptions_and_every_field_are_redacted_in_the_log_file_and_console(
        tmp_path: Path) -> None:
    error = sqlite_error_quoting_a_row(tmp_path)
    console = io.StringIO()
    path = logs.configure(log_dir=tmp_path / "state", level="debug", console_level="debug",
                          stream=console)
    assert path is not None
    log = structlog.get_logger("test")
    try:
        raise RuntimeError(f"reading failed: {error}") from error
    except RuntimeError:
        log.exception("read_failed")  # the traceback quotes the message twice
        logging.getLogger("apscheduler.executors").error("Job raised", exc_info=True)
    log.warning("read_failed", error=error, details={"errors": [str(error)], "n": 1})
    logging.getLogger("some.library").warning("failed: %s", error)
    for handler in logging.getLogger().handlers:
        handler.flush()
    written = path.read_text()
    shown = console.getvalue()
    assert "Traceback" in written and "sqlite3.OperationalError" in written
    assert written.count("[REDACTED:github_token]") >= 6
    assert TOKEN not in written
    assert TOKEN not in shown and "[REDACTED:github_token]" in shown
    assert TOKEN[:12] not in written + shown  # not even a prefix


def test_errors_printed_by_the_cli_are_redacted(config_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / TOKEN / "opencode.db"
    assert cli("--config", str(config_file), "maintain", "--all", "--db", str(missing))[0] == 4
    err = capsys.readouterr().err
    assert "OpenCode database not found" in err and "[REDACTED:github_token]" in err
    assert TOKEN not in err


def test_identifier_fields_pass_only_in_their_own_shape() -> None:
    """OpenCode ids and the event's time stamp are left as they are; the same fields
    holding anything else are redacted like every other value."""
    stamp = "2026-11-24T00:10:25.537382Z"
    event = logs._scrub(None, "info", {
        "session_id": "ses_4f3a2b1c0d9e8f7a6b5c4d3e2f", "message_id": "msg_9x8Y7z",
        "timestamp": stamp, "event": "x"})
    assert event["session_id"] == "ses_4f3a2b1c0d9e8f7a6b5c4d3e2f"
    assert event["message_id"] == "msg_9x8Y7z" and event["timestamp"] == stamp
    leaked = logs._scrub(None, "info", {"session_id": TOKEN, "message_id": f"msg_{TOKEN}",
                                        "timestamp": f"{stamp} {TOKEN}"})
    assert all(TOKEN not in v and "[REDACTED:github_token]" in v for v in leaked.values())


def test_a_record_is_rendered_once_for_the_file_and_the_console(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's console (not a terminal) prints the file's JSON lines: one rendering
    serves both and the file's size check; the file still rotates at its size."""
    rendered = [0]
    render = structlog.processors.JSONRenderer.__call__

    def counting(self: structlog.processors.JSONRenderer, *args: object) -> object:
        rendered[0] += 1
        return render(self, *args)

    monkeypatch.setattr(structlog.processors.JSONRenderer, "__call__", counting)
    console = io.StringIO()
    path = logs.configure(log_dir=tmp_path / "state", level="info", console_level="info",
                          stream=console, max_bytes=4000, backups=50)
    assert path is not None
    log = structlog.get_logger("test")
    for i in range(60):
        log.info("session_processed", n=i, token=TOKEN)
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert rendered[0] == 60
    files = list(path.parent.glob(path.name + "*"))
    assert len(files) > 2 and all(f.stat().st_size < 4000 for f in files)  # rotated
    written = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    shown = [json.loads(line) for line in console.getvalue().splitlines()]
    assert sorted(e["n"] for e in written) == [e["n"] for e in shown] == list(range(60))
    assert {e["token"] for e in written + shown} == {"[REDACTED:github_token]"}
