"""`opencode-memoryd run` as a real process on a live WAL database written turn by turn."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import cli_json, read_marks, start_daemon, wait_until, write_config
from opencode_memoryd.debounce import Pending, backoff_seconds
from opencode_writer import OpenCodeWriter

pytestmark = pytest.mark.slow


def test_debounce_policy() -> None:
    p = Pending(first_change_ms=0, last_change_ms=0)
    assert p.due_ms(quiet_seconds=60, max_wait_seconds=900) == 60_000
    busy = p.touched(850_000)
    assert busy.due_ms(quiet_seconds=60, max_wait_seconds=900) == 900_000
    assert backoff_seconds(1) == 5 and backoff_seconds(3) == 20
    assert backoff_seconds(30) == 900
    assert backoff_seconds(1, retry_after=42) == 42


@pytest.fixture
def live_db(tmp_path: Path, isolated_env: dict[str, str]) -> Path:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    db = data / "opencode.db"
    db.write_bytes((Path(__file__).parent / "fixtures" / "opencode-sample.db").read_bytes())
    return db


@pytest.fixture
def daemon_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "daemon.toml", """
[opencode]
settle_seconds = 0.2
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 0.3
max_wait_seconds = 30
sweep_interval_seconds = 5
poll_interval_seconds = 0.2
""")


@pytest.fixture
def daemon(daemon_config: Path, live_db: Path, isolated_env: dict[str, str]
           ) -> Iterator[subprocess.Popen[str]]:
    proc = start_daemon(daemon_config, isolated_env)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_catch_up_then_tail_new_turns(daemon: subprocess.Popen[str], live_db: Path,
                                      daemon_config: Path, state_db: Path) -> None:
    # catch-up: the sample's sessions are extracted after their quiet period
    assert wait_until(lambda: "ses_dfec43a4cffe5HkHVz7wUC8pgF" in read_marks(state_db))
    w = OpenCodeWriter(live_db)
    sid = "ses_dfec4032affe4TNn4bUt9e26HR"
    ids = w.append_turn(sid, "remember that releases are tagged vX.Y.Z", "Noted.",
                        finish=False)
    # past the quiet period the session's job ran and put it back: the turn is in flight
    assert wait_until(lambda: _queue_notes(state_db).get(sid) == "turn in flight")
    assert read_marks(state_db).get(sid) != ids["assistant"]
    w.complete(ids["assistant"])
    w.close()
    assert wait_until(lambda: read_marks(state_db).get(sid) == ids["assistant"])
    daemon.send_signal(signal.SIGTERM)
    daemon.communicate(timeout=15)
    assert daemon.returncode == 0
    memories = facts(cli_json("--config", str(daemon_config), "list"))
    tagged = [m for m in memories if "tagged" in m["content"]]
    assert len(tagged) == 1 and tagged[0]["message_ids"] == [ids["user"]]
    assert len(memories) == 4


def test_second_daemon_exits_at_once_naming_the_first(
        daemon: subprocess.Popen[str], daemon_config: Path, state_db: Path,
        isolated_env: dict[str, str]) -> None:
    assert wait_until(lambda: (state_db.parent / "daemon.pid").exists())
    second = start_daemon(daemon_config, isolated_env, capture=True)
    _, err = second.communicate(timeout=30)
    assert second.returncode == 1
    assert "already running" in err and str(daemon.pid) in err
    assert daemon.poll() is None


def test_sigterm_stops_quickly(daemon: subprocess.Popen[str], state_db: Path) -> None:
    assert wait_until(lambda: (state_db.parent / "daemon.json").exists())  # started
    t = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    daemon.communicate(timeout=15)
    assert daemon.returncode == 0
    assert time.monotonic() - t < 10


def test_config_error_exits_78(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[daemon]\nquiet_period_seconds = 'soon'\n")
    proc = start_daemon(bad, isolated_env, capture=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 78
    assert "daemon.quiet_period_seconds" in err


def test_maintain_search_list_status_go_through_the_running_daemon(
        daemon: subprocess.Popen[str], daemon_config: Path, state_db: Path,
        live_db: Path) -> None:
    assert wait_until(lambda: (state_db.parent / "daemon.json").exists())
    # the daemon owns the embedded store; these would fail to open it themselves
    report = cli_json("--config", str(daemon_config), "maintain", "--all")
    assert report["totals"]["failed"] == 0
    assert wait_until(lambda: "ses_dfec43a4cffe5HkHVz7wUC8pgF" in read_marks(state_db))
    hits = facts(cli_json("--config", str(daemon_config), "search", "package manager npm"))
    assert hits and "pnpm" in hits[0]["content"]
    assert len(facts(cli_json("--config", str(daemon_config), "list"))) == 3
    # commands are served before the watcher is up: the database shows once it is
    assert wait_until(lambda: cli_json("--config", str(daemon_config), "status")
                      ["daemon"]["databases"])
    info = cli_json("--config", str(daemon_config), "status")
    assert info["daemon"]["running"] is True
    assert info["daemon"]["pid"] == daemon.pid
    assert info["daemon"]["databases"][0]["path"] == str(live_db)
    assert info["memories"]


def test_database_appearing_later_and_replaced_by_a_new_file(
        daemon_config: Path, isolated_env: dict[str, str], state_db: Path,
        tmp_path: Path) -> None:
    # no OpenCode folder to watch yet: the sweep finds the database (every 0.5 s here)
    daemon_config.write_text(daemon_config.read_text().replace(
        "sweep_interval_seconds = 5", "sweep_interval_seconds = 0.5"))
    proc = start_daemon(daemon_config, isolated_env)  # no OpenCode database yet
    try:
        assert wait_until(lambda: (state_db.parent / "daemon.json").exists())
        data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
        data.mkdir(parents=True)
        staged = tmp_path / "staged.db"
        staged.write_bytes((Path(__file__).parent / "fixtures" /
                            "opencode-sample.db").read_bytes())
        os.replace(staged, data / "opencode.db")
        assert wait_until(lambda: "ses_dfec43a4cffe5HkHVz7wUC8pgF" in read_marks(state_db),
                     timeout=40)
        # replaced by another file (new inode) holding the same sessions plus one turn
        replacement = tmp_path / "replacement.db"
        replacement.write_bytes((data / "opencode.db").read_bytes())
        w = OpenCodeWriter(replacement)
        ids = w.append_turn("ses_dfec3906affe7mNz9acnHRC1kP",
                            "remember that notes are stored as markdown", "OK")
        w.close()
        for suffix in ("-wal", "-shm"):
            Path(str(replacement) + suffix).unlink(missing_ok=True)
        os.replace(replacement, data / "opencode.db")
        assert wait_until(lambda: read_marks(state_db).get("ses_dfec3906affe7mNz9acnHRC1kP")
                     == ids["assistant"], timeout=40)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    memories = facts(cli_json("--config", str(daemon_config), "list"))
    contents = [m["content"] for m in memories]
    assert len(contents) == len(set(contents)) == 4


def facts(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The facts among memories (not the session summaries and project briefs)."""
    return [m for m in memories if m["type"] not in ("session-summary", "project-brief")]


def _queue_notes(state_db: Path) -> dict[str, str | None]:
    """Session id -> why its job was put back (``last_error``), for every queued session,
    read-only."""
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as c:
            return {r[0]: r[1] for r in c.execute("SELECT session_id, last_error FROM queue")}
    except sqlite3.Error:
        return {}


def _queued(state_db: Path) -> set[str]:
    """Session ids in the daemon's queue, read-only."""
    return set(_queue_notes(state_db))


def _import_old_session(db: Path, like: str, stamp_ms: int) -> str:
    """Write a finished one-turn session stamped in the past, in one transaction, the way
    `opencode import` restores an exported session (its ``time_updated`` is old)."""
    c = sqlite3.connect(str(db), isolation_level=None, timeout=5)
    project_id, directory = c.execute(
        "SELECT project_id, directory FROM session WHERE id=?", (like,)).fetchone()
    sid, umid, amid = "ses_0a0000000001Imported00001", "msg_0a0000000001Imported01", \
        "msg_0a0000000002Imported02"
    user = {"role": "user", "time": {"created": stamp_ms}, "agent": "build",
            "model": {"providerID": "stub", "modelID": "stub-model"}}
    assistant = {"role": "assistant", "parentID": umid, "agent": "build", "mode": "build",
                 "modelID": "stub-model", "providerID": "stub",
                 "path": {"cwd": "/", "root": "/"}, "cost": 0, "finish": "stop",
                 "time": {"created": stamp_ms + 1, "completed": stamp_ms + 2}}
    c.execute("BEGIN IMMEDIATE")
    c.execute("INSERT INTO session (id, project_id, slug, directory, path, title, version, "
              "time_created, time_updated) VALUES (?, ?, 'imported', ?, '', 'Imported', "
              "'1.18.33', ?, ?)", (sid, project_id, directory, stamp_ms, stamp_ms + 3))
    for mid, data, ms in ((umid, user, stamp_ms), (amid, assistant, stamp_ms + 1)):
        c.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                  "VALUES (?, ?, ?, ?, ?)", (mid, sid, ms, ms, json.dumps(data)))
    for pid, mid, text in (("prt_0a0000000001Imported01", umid,
                            "remember that imported notes use ISO dates"),
                           ("prt_0a0000000002Imported02", amid, "Noted.")):
        c.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, "
                  "data) VALUES (?, ?, ?, ?, ?, ?)",
                  (pid, mid, sid, stamp_ms, stamp_ms, json.dumps({"type": "text",
                                                                  "text": text})))
    c.execute("COMMIT")
    c.close()
    return sid


def test_restart_queues_only_what_changed(
        daemon: subprocess.Popen[str], live_db: Path, tmp_path: Path, state_db: Path,
        isolated_env: dict[str, str]) -> None:
    # caught up: every sample session read, nothing queued
    assert wait_until(lambda: "ses_dfec43a4cffe5HkHVz7wUC8pgF" in read_marks(state_db)
                      and not _queued(state_db))
    daemon.send_signal(signal.SIGTERM)
    daemon.communicate(timeout=15)
    # restarted with a long quiet period: whatever it queues stays visible in the queue
    slow = write_config(tmp_path / "slow.toml", """
[opencode]
settle_seconds = 0.2
[extraction]
mode = "rules"
[daemon]
quiet_period_seconds = 60
sweep_interval_seconds = 0.5
""")
    proc = start_daemon(slow, isolated_env)
    try:
        log = state_db.parent / "opencode-memoryd.log"
        assert wait_until(lambda: log.read_text().count('"catch_up_queued"') == 2)
        assert _queued(state_db) == set()  # OpenCode's trailing updates do not re-queue
        # a new turn is seen through the change window
        w = OpenCodeWriter(live_db)
        sid = "ses_dfec4032affe4TNn4bUt9e26HR"
        w.append_turn(sid, "remember that the changelog follows keep-a-changelog", "OK")
        w.close()
        assert wait_until(lambda: _queued(state_db) == {sid}, timeout=15)
        # a session written with old timestamps is outside that window: the sweep finds it
        imported = _import_old_session(live_db, sid, stamp_ms=1_600_000_000_000)
        assert wait_until(lambda: _queued(state_db) == {sid, imported}, timeout=20)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    assert proc.returncode == 0


def test_start_waits_for_a_command_holding_the_store_and_commands_wait_for_it(
        daemon_config: Path, live_db: Path, isolated_env: dict[str, str],
        state_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    from opencode_memoryd.config.loader import load_config
    from opencode_memoryd.config.paths import store_dir
    from opencode_memoryd.store.edge import EdgeStore

    config = load_config(daemon_config, isolated_env)
    held = EdgeStore(store_dir(config, isolated_env))  # a one-shot command's store
    proc = start_daemon(daemon_config, isolated_env)
    try:
        log = state_db.parent / "opencode-memoryd.log"
        assert wait_until(lambda: log.exists() and "store_busy_waiting" in log.read_text())
        assert not (state_db.parent / "daemon.json").exists()
        # a command started now waits for the starting daemon and is served by it
        got: list[Any] = []
        t = threading.Thread(target=lambda: got.append(
            cli_json("--config", str(daemon_config), "status")))
        t.start()
        said: list[str] = []
        assert wait_until(lambda: said.append(capsys.readouterr().err) or
                          f"waiting for the daemon (pid {proc.pid})" in "".join(said))
        assert t.is_alive()  # waiting, not failing on the busy store
        held.close()
        t.join(timeout=60)
        assert got and got[0]["daemon"]["running"] is True
        assert got[0]["daemon"]["pid"] == proc.pid
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert not (state_db.parent / "daemon.pid").exists()
    finally:
        held.close()
        if proc.poll() is None:
            proc.kill()


def test_the_running_daemon_retires_what_a_correction_replaces_and_journals_it(
        daemon: subprocess.Popen[str], live_db: Path, daemon_config: Path,
        state_db: Path) -> None:
    sid = "ses_dfec4032affe4TNn4bUt9e26HR"
    assert wait_until(lambda: sid in read_marks(state_db))
    w = OpenCodeWriter(live_db)
    old = w.append_turn(sid, "Remember that we use Jest for unit tests.", "Noted.")
    assert wait_until(lambda: read_marks(state_db).get(sid) == old["assistant"])
    new = w.append_turn(sid, "Actually, use Vitest instead of Jest from now on.", "OK.")
    w.close()
    assert wait_until(lambda: read_marks(state_db).get(sid) == new["assistant"])
    cfg = ("--config", str(daemon_config))
    listed = cli_json(*cfg, "list", "--all")
    jest = next(m for m in listed if m["content"] == "We use Jest for unit tests.")
    vitest = next(m for m in listed if m["content"] == "Use Vitest instead of Jest.")
    assert (jest["status"], jest["superseded_by"]) == ("retired", vitest["id"])
    entries = cli_json(*cfg, "journal", "--json")
    assert [e["run_id"] for e in entries if e.get("action") == "supersede"] == [
        jest["retired_by_run"]]
