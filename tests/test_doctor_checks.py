"""The doctor use case below the CLI: the runner isolates a check that breaks, checks that
judge a running daemon's answer, the storage-shape rule, and the reader's and installer's
read-only helpers doctor uses."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import write_config
from doctor_sandbox import SID
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.install import opencode
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.usecases.doctor.model import (
    FAIL,
    OK,
    WARN,
    Check,
    Context,
    DaemonProbe,
    Probes,
)
from opencode_memoryd.usecases.doctor.runner import doctor, run_checks
from opencode_memoryd.usecases.doctor.sources import database_checks, storage_check
from opencode_memoryd.usecases.doctor.system import daemon_check

V1 = frozenset({"session", "message", "part"})


@pytest.fixture
def app(tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> App:
    cfg = write_config(tmp_path / "config.toml",
                       f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{sample_db}"]\n'
                       '[extraction]\nmode = "rules"\n')
    env = dict(isolated_env)
    return App(config=load_config(cfg, env), env=env, config_path=cfg)


def _probes(app: App, **kw: Any) -> Probes:
    return Probes(socket=app.state_dir / "control.sock", **kw)


def _running(**daemon: Any) -> DaemonProbe:
    status = {"daemon": {"running": True, "pid": 4242, "since": "2026-11-23T10:00:00.000Z",
                         "change_detection": "file events", "pending": [], **daemon},
              "store": {}}
    return DaemonProbe(status=status, socket="/run/user/1000/opencode-memoryd/control.sock")


def test_a_check_that_raises_becomes_a_failure_and_the_others_still_run(app: App) -> None:
    def broken(ctx: Context) -> Check:
        raise RuntimeError("disk on fire")

    checks = run_checks(app, _probes(app), [("broken", broken), ("daemon", daemon_check)])
    assert [(c.name, c.status) for c in checks] == [("broken", FAIL), ("daemon", WARN)]
    assert checks[0].detail == "the check itself failed: RuntimeError: disk on fire"
    assert "opencode-memoryd.log" in checks[0].fix


def test_the_use_case_returns_json_safe_results_and_counts(app: App) -> None:
    result = doctor(app, _probes(app))
    assert json.loads(json.dumps(result)) == result
    assert sum(result["counts"].values()) == len(result["checks"])
    assert result["failed"] is False
    assert {"databases", "daemon", "embedder", "last-dream"} <= {
        c["name"] for c in result["checks"]}


def test_stuck_sessions_fail_while_a_daemon_runs(app: App, sample_db: Path) -> None:
    state = app.open_state()
    state.queue.queue_touch_many(str(sample_db.resolve()), [SID],
                                 int(time.time() * 1000) - 7_200_000, 60, 900)
    state.close()
    idle = {c.name: c for c in run_checks(app, _probes(app), [("db", database_checks)])}
    assert idle["stuck"].status == WARN and "(no daemon runs)" in idle["stuck"].detail
    busy = {c.name: c for c in run_checks(app, _probes(app, daemon=_running()),
                                          [("db", database_checks)])}
    assert busy["stuck"].status == FAIL
    assert f"{SID} (queued 2.0 h ago)" in busy["stuck"].detail
    assert "opencode-memoryd status" in busy["stuck"].fix
    starting = {c.name: c for c in run_checks(app, _probes(app, daemon=_running(
        catching_up=True)), [("db", database_checks)])}
    assert starting["stuck"].status == WARN
    assert starting["stuck"].detail.endswith("(the daemon is still catching up)")


def test_a_paused_daemon_warns_with_its_reason(app: App) -> None:
    ctx = Context(app, _probes(app, daemon=_running(paused={
        "reason": "LLM endpoint refused the request", "until": "2026-11-23T11:00:00.000Z"})))
    check = daemon_check(ctx)
    assert check.status == WARN
    assert check.detail.startswith("running (pid 4242, since 2026-11-23T10:00:00.000Z")
    assert "paused until 2026-11-23T11:00:00.000Z: LLM endpoint refused" in check.detail
    check = daemon_check(Context(app, _probes(app, daemon=_running(last_error="boom"))))
    assert check.status == OK and check.detail.endswith("; last error: boom")


def test_storage_shape_and_unread_tables(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    now = 1_795_000_000_000
    v1 = {"session": (2, now), "message": (10, now), "part": (30, now),
          "session_message": (0, None)}
    check = storage_check(db, v1, V1)
    assert check.status == OK
    assert check.detail == (f"{db}: live storage 1.x (rows in the last 7 days: session 2, "
                            "message 10, part 30)")
    mixed = {**v1, "session_message": (4, now)}
    check = storage_check(db, mixed, V1)
    assert check.status == WARN
    assert "live storage 1.x and v2" in check.detail
    assert "session_message: 4 rows in the last 7 days, newest 2026-11-18" in check.detail
    assert "(it reads message, part, session)" in check.detail
    assert storage_check(db, mixed, V1 | {"session_message"}).status == OK
    # a table we do not read that holds only old rows: still turns we never captured
    old = {**v1, "message": (0, now), "part": (0, now), "session": (0, now),
           "session_v2": (0, now - 40 * 86_400_000)}
    check = storage_check(db, old, V1)
    assert check.status == WARN and "session_v2: 0 rows in the last 7 days" in check.detail
    assert "no turn written in the last 7 days (newest 2026-11-18)" in check.detail


def test_table_activity_counts_recent_rows_and_skips_absent_tables(sample_db: Path) -> None:
    with OpenCodeDB(sample_db) as db:
        everything = db.table_activity(["message", "session_message", "no_such_table"], 0)
        newest = everything["message"][1]
        assert everything == {"message": (61, newest), "session_message": (0, None)}
        assert newest is not None
        assert db.table_activity(["message"], newest - 1) == {"message": (1, newest)}


def test_inspect_tells_current_outdated_foreign_and_disabled(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    env = dict(isolated_env)
    missing = opencode.inspect(env=env)
    assert (missing.plugin, missing.entry) == ("missing", "missing")
    opencode.install(env=env)
    found = opencode.inspect(env=env)
    assert (found.plugin, found.entry) == ("current", "ours")
    assert found.command is not None and found.command[-1] == "mcp"
    opencode.plugin_path(env).write_text(opencode.PLUGIN_HEADER + " of another version\n")
    assert opencode.inspect(env=env).plugin == "outdated"
    config = opencode.config_path(env)
    data = json.loads(config.read_text())
    data["mcp"]["memoryd"]["enabled"] = False
    config.write_text(json.dumps(data))
    assert opencode.inspect(env=env).entry == "disabled"
    data["mcp"]["memoryd"]["command"] = ["/usr/bin/someone-else", "serve"]
    config.write_text(json.dumps(data))
    opencode.plugin_path(env).write_text("// another plugin\n")
    other = opencode.inspect(env=env)
    assert (other.plugin, other.entry) == ("foreign", "foreign")
    config.write_text("{ not json")
    broken = opencode.inspect(env=env)
    assert broken.entry == "unreadable" and broken.problem


def test_the_state_file_is_created_private(tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state" / "state.db")
    state.outbox.counts()
    try:
        for path in (tmp_path / "state").iterdir():
            assert path.stat().st_mode & 0o077 == 0, path
    finally:
        state.close()


def test_doctor_finds_the_daemon_socket_the_way_opencode_will_with_or_without_runtime_dir(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    import socket

    from opencode_memoryd.usecases.doctor.opencode import opencode_checks

    run = tmp_path / "run"
    (run / "opencode-memoryd").mkdir(parents=True, mode=0o700)
    sock = run / "opencode-memoryd" / "control.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    env = {**isolated_env, "XDG_RUNTIME_DIR": str(run)}
    cfg = write_config(tmp_path / "config.toml",
                       f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{sample_db}"]\n')
    app = App(config=load_config(cfg, env), env=env, config_path=cfg)
    opencode.install(env=env)

    def socket_check() -> Check:
        probes = Probes(socket=sock, daemon=DaemonProbe(status={}, socket=str(sock)))
        checks = {c.name: c for c in opencode_checks(Context(app, probes))}
        return checks["plugin socket"]

    try:
        # the daemon recorded its socket: found from daemon.json without XDG_RUNTIME_DIR
        app.state_dir.mkdir(parents=True, exist_ok=True)
        (app.state_dir / "daemon.json").write_text(json.dumps({"socket": str(sock)}))
        found = socket_check()
        assert found.status == OK, found
        # without daemon.json, an OpenCode started without XDG_RUNTIME_DIR finds nothing
        (app.state_dir / "daemon.json").unlink()
        lost = socket_check()
        assert lost.status == WARN
        assert "without XDG_RUNTIME_DIR" in lost.detail and str(sock) in lost.detail
        assert "OPENCODE_MEMORYD_SOCKET" in (lost.fix or "")
    finally:
        listener.close()
