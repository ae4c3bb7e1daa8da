"""`opencode-memoryd doctor`: a healthy sandbox is all ok; each check, broken, says so and
sets the exit code (the sandbox: ``doctor_sandbox.py``). The LLM endpoint, the store,
file modes and disk space: ``test_doctor_resources.py``."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from conftest import cli, start_daemon, wait_until
from doctor_sandbox import BASELINE, SID, Sandbox, make_sandbox, problems
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.source.discover import source_identity
from opencode_memoryd.source.schema import READ_TABLES
from opencode_memoryd.state.db import StateDB
from opencode_writer import OpenCodeWriter


@pytest.fixture
def sandbox(tmp_path: Path, isolated_env: dict[str, str],
            monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return make_sandbox(tmp_path, isolated_env, monkeypatch)


# --------------------------------------------------------------------------------------
# Healthy
# --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_healthy_sandbox_with_the_daemon_running_is_all_ok(
        sandbox: Sandbox, isolated_env: dict[str, str]) -> None:
    proc = start_daemon(sandbox.cfg, isolated_env)
    try:
        assert wait_until(lambda: (sandbox.state_dir / "daemon.json").exists())
        code, checks = sandbox.doctor()
        assert problems(checks) == {"llm": "skip"}, checks
        assert code == 0
        assert checks["daemon"]["detail"].startswith(f"running (pid {proc.pid}")
        # judged through the daemon: doctor never opened the store the daemon holds
        assert checks["embedder"]["detail"].startswith("the daemon's store")
        code, text = sandbox.text()
        assert code == 0 and "0 failure(s)" in text
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_healthy_sandbox_without_a_daemon(sandbox: Sandbox) -> None:
    code, checks = sandbox.doctor()
    assert problems(checks) == BASELINE
    assert code == 0
    assert ("38 migrations, last 20260622202450_simplify_session_input"
            in checks["database"]["detail"])
    assert checks["storage"]["detail"].split(": ", 1)[1].startswith("live storage 1.x")
    # the 3 directives and the sample's 4 session summaries (2 compactions, 2 session states)
    assert "7 points" in checks["embedder"]["detail"]
    code, text = sandbox.text()
    lines = text.splitlines()
    assert code == 0
    assert lines[0].split()[:2] == ["ok", "databases"]
    assert any(x.split()[:2] == ["warn", "daemon"] for x in lines)
    assert lines[lines.index(next(x for x in lines if x.startswith("warn  daemon"))) + 1
                 ].strip().startswith("fix: `opencode-memoryd install` (it writes")
    assert lines[-1] == f"{len(checks) - 2} ok, 1 warning(s), 0 failure(s), 1 skipped"


# --------------------------------------------------------------------------------------
# The OpenCode databases
# --------------------------------------------------------------------------------------


def test_no_database_fails_naming_where_it_looked(sandbox: Sandbox) -> None:
    sandbox.db.unlink()
    code, checks = sandbox.doctor()
    assert code == 1
    assert problems(checks) == {**BASELINE, "databases": "fail"}
    assert str(sandbox.db.parent) in checks["databases"]["detail"]
    assert "$OPENCODE_DB" in checks["databases"]["detail"]


def test_an_unreadable_schema_fails(sandbox: Sandbox) -> None:
    sandbox.db.unlink()
    with sqlite3.connect(sandbox.db) as c:
        c.execute("CREATE TABLE session_v2 (id text PRIMARY KEY)")
    c.close()
    code, checks = sandbox.doctor()
    assert code == 1
    assert problems(checks) == {**BASELINE, "database": "fail"}
    detail = checks["database"]["detail"]
    assert "unrecognised OpenCode database schema" in detail and "session_v2" in detail


def test_a_message_dated_in_the_future_fails(sandbox: Sandbox) -> None:
    w = OpenCodeWriter(sandbox.db)
    skew_ms = 2 * 86_400_000
    w.now_ms = lambda: int(time.time() * 1000) + skew_ms  # type: ignore[method-assign]
    w.append_turn(SID, "remember: the future is bright")
    w.close()
    code, checks = sandbox.doctor()
    assert code == 1
    assert problems(checks) == {**BASELINE, "clock": "fail"}
    detail = checks["clock"]["detail"]
    assert "rows dated in the future" in detail and "message 2" in detail
    assert "48.0 h ahead" in detail or "47.9 h ahead" in detail
    assert "timedatectl" in checks["clock"]["fix"]


def test_rows_in_a_table_we_do_not_read_warn(sandbox: Sandbox) -> None:
    """OpenCode 1.18.33 writes turns sent through its v2 API to ``session_message`` only."""
    now = int(time.time() * 1000)
    with sqlite3.connect(sandbox.db) as c:
        c.execute("INSERT INTO session_message (id, session_id, type, seq, time_created, "
                  "time_updated, data) VALUES ('msg_v2', ?, 'user', 2, ?, ?, ?)",
                  (SID, now, now, json.dumps({"time": {"created": now},
                                              "text": "remember: we deploy with ArgoCD"})))
    c.close()
    code, checks = sandbox.doctor()
    detail = checks["storage"]["detail"]
    assert code == 0
    assert "live storage 1.x and v2" in detail and "session_message 1" in detail
    if "session_message" in READ_TABLES:  # a reader of the v2 storage: nothing to warn of
        assert problems(checks) == BASELINE
        return
    assert problems(checks) == {**BASELINE, "storage": "warn"}
    assert "session_message: 1 rows in the last 7 days" in detail
    assert "are not captured" in detail
    assert "v2 storage" in checks["storage"]["fix"]


def test_a_finished_turn_waiting_longer_than_max_wait_is_stuck(sandbox: Sandbox) -> None:
    cfg = sandbox.config('[extraction]\nmode = "rules"\n[daemon]\nmax_wait_seconds = 1\n')
    w = OpenCodeWriter(sandbox.db)
    w.append_turn(SID, "remember: the CI runs on Fridays too")
    w.close()
    code, checks = sandbox.doctor(cfg)
    assert problems(checks) == BASELINE  # not stuck yet
    time.sleep(1.2)
    code, checks = sandbox.doctor(cfg)
    assert code == 0  # no daemon runs: a warning
    assert problems(checks) == {**BASELINE, "stuck": "warn"}
    # the age is whole seconds since the turn: 1 s, or more on a loaded machine
    assert re.search(rf"{SID} \(a finished turn quiet for \d+ s\)", checks["stuck"]["detail"])
    assert "maintain --all" in checks["stuck"]["fix"]
    assert cli("--config", str(cfg), "maintain", "--all")[0] == 0
    assert problems(sandbox.doctor(cfg)[1]) == BASELINE


def test_a_session_queued_too_long_is_stuck_with_its_last_error(sandbox: Sandbox) -> None:
    state = StateDB(sandbox.state_dir / "state.db")
    ident = source_identity(sandbox.db)
    state.queue.queue_touch_many(ident, [SID], int(time.time() * 1000) - 3_600_000, 60, 900)
    state.queue.queue_failed(ident, SID, "server: the endpoint answered 503")
    state.close()
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "stuck": "warn"}
    assert (f"{SID} (queued 60 min ago, 1 failed attempt(s), last error: server: the "
            "endpoint answered 503)") in checks["stuck"]["detail"]


def test_a_session_given_up_is_named_at_once(sandbox: Sandbox) -> None:
    """Given up after 5 failures in a row (backoff 5 + 10 + 20 + 40 s): named although it
    has not waited max_wait_seconds yet."""
    state = StateDB(sandbox.state_dir / "state.db")
    ident = source_identity(sandbox.db)
    state.queue.queue_touch_many(ident, [SID], int(time.time() * 1000) - 120_000, 60, 900)
    for _ in range(5):
        state.queue.queue_failed(ident, SID, "internal: ValueError: no")
    state.close()
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "stuck": "warn"}
    assert (f"{SID} (queued 2 min ago, given up after 5 failed attempts, last error: "
            "internal: ValueError: no)") in checks["stuck"]["detail"]


# --------------------------------------------------------------------------------------
# The daemon, the service, OpenCode's side
# --------------------------------------------------------------------------------------


def test_a_daemon_that_died_without_cleaning_up_fails(sandbox: Sandbox) -> None:
    (sandbox.state_dir / "daemon.json").write_text(json.dumps(
        {"pid": 2**22 + 1, "socket": str(sandbox.state_dir / "gone.sock")}))
    code, checks = sandbox.doctor()
    assert code == 1
    assert problems(checks) == {"daemon": "fail", "llm": "skip"}
    assert "gone.sock" in checks["daemon"]["detail"]
    assert checks["daemon"]["fix"].startswith("restart it: systemctl --user restart")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd: Linux only")
def test_service_disabled_and_no_linger_warn(sandbox: Sandbox) -> None:
    sandbox.fake("systemctl", "disabled", code=1,
                 cases={"is-system-running": ("running", 0)})
    sandbox.fake("loginctl", "Linger=no")
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "service": "warn", "linger": "warn"}
    assert checks["service"]["fix"] == ("systemctl --user daemon-reload && systemctl --user "
                                        "enable --now opencode-memoryd.service")
    assert checks["linger"]["fix"].startswith("loginctl enable-linger ")
    (sandbox.bin / "systemctl").unlink()
    sandbox.fake("systemctl", "Failed to connect to bus: No medium found", code=1)
    assert problems(sandbox.doctor()[1])["service"] == "skip"
    assert cli("uninstall-service")[0] == 0
    code, checks = sandbox.doctor()
    assert problems(checks) == {**BASELINE, "service": "warn", "linger": "skip"}
    assert checks["service"]["detail"].startswith("no systemd user unit at ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd: Linux only")
def test_without_a_systemd_user_instance_no_fix_names_systemctl_enable(
        sandbox: Sandbox) -> None:
    sandbox.fake("systemctl", "disabled", code=1,
                 cases={"is-system-running": ("offline", 1)})
    _, checks = sandbox.doctor()
    assert checks["service"]["status"] == "warn"
    assert "no systemd user instance runs here (offline)" in checks["service"]["detail"]
    assert "opencode-memoryd run" in checks["service"]["fix"]
    assert "systemctl" not in checks["service"]["fix"]
    assert cli("uninstall-service")[0] == 0
    _, checks = sandbox.doctor()  # no unit: not "install-service and run what it prints"
    assert "install-service" not in checks["service"]["fix"]
    assert "opencode-memoryd run" in checks["service"]["fix"]


def test_missing_plugin_and_mcp_entry_warn(sandbox: Sandbox) -> None:
    assert cli("--config", str(sandbox.cfg), "uninstall-opencode")[0] == 0
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "plugin": "warn", "mcp": "warn"}
    assert checks["plugin"]["detail"].startswith("not installed (")
    assert checks["mcp"]["fix"].startswith("`opencode-memoryd install` (or `install-opencode`")


def test_an_mcp_entry_whose_program_moved_fails(sandbox: Sandbox,
                                                isolated_env: dict[str, str]) -> None:
    config = Path(isolated_env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    data = json.loads(config.read_text())
    data["mcp"]["memoryd"]["command"] = ["/gone/venv/bin/opencode-memoryd", "mcp"]
    config.write_text(json.dumps(data))
    code, checks = sandbox.doctor()
    assert code == 1
    assert problems(checks) == {**BASELINE, "mcp": "fail"}
    assert "/gone/venv/bin/opencode-memoryd" in checks["mcp"]["detail"]


# --------------------------------------------------------------------------------------
# History
# --------------------------------------------------------------------------------------


def test_nothing_captured_yet_creates_nothing(sandbox: Sandbox) -> None:
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (sandbox.state_dir / name).unlink(missing_ok=True)
    for path in sorted(sandbox.store_dir.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    sandbox.store_dir.rmdir()
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "stuck": "skip", "embedder": "skip", "store": "skip",
                                "last-extraction": "warn"}
    assert not (sandbox.state_dir / "state.db").exists()
    assert not sandbox.store_dir.exists()


def test_a_failed_dream_warns(sandbox: Sandbox) -> None:
    DreamJournal(sandbox.state_dir / "dream-journal.jsonl").append(
        {"run_id": "r1", "status": "failed", "scope": "user", "project_key": None,
         "trigger": "auto", "reason": "the planner answered garbage",
         "started_at": "2026-01-01T00:00:00.000Z", "ended_at": "2026-01-01T00:00:01.000Z"})
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "last-dream": "warn"}
    assert checks["last-dream"]["detail"] == (
        "last dream 2026-01-01T00:00:01.000Z (user, auto): failed: the planner answered "
        "garbage")


def test_a_supersession_after_the_last_dream_is_not_reported_as_the_last_dream(
        sandbox: Sandbox) -> None:
    journal = DreamJournal(sandbox.state_dir / "dream-journal.jsonl")
    journal.append(
        {"run_id": "r1", "action": "dream", "status": "failed", "scope": "user",
         "project_key": None, "trigger": "auto", "reason": "the planner answered garbage",
         "started_at": "2026-01-01T00:00:00.000Z", "ended_at": "2026-01-01T00:00:01.000Z"})
    journal.append(
        {"run_id": "r2", "action": "supersede", "status": "ok", "scope": "user",
         "project_key": None, "trigger": "supersede", "reason": "superseded: use uv",
         "started_at": "2026-01-02T00:00:00.000Z", "ended_at": "2026-01-02T00:00:00.000Z"})
    code, checks = sandbox.doctor()
    assert code == 0
    assert checks["last-dream"]["detail"].startswith("last dream 2026-01-01T00:00:01.000Z")
