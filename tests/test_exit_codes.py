"""Exit codes and messages as the docs document them: not found (5), refused (6), a
missing database (4), a closed pipe, a dry run, and the daemon waiting for a database."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import ACME, SAMPLE_DB, cli, cli_json, start_daemon, wait_until, write_config
from opencode_memoryd.cli.exits import EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_SOURCE
from opencode_memoryd.cli.reference import exit_codes_reference
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.logs import LOG_FILE_NAME


def test_exit_codes_5_and_6_are_documented() -> None:
    assert (EXIT_NOT_FOUND, EXIT_REFUSED) == (5, 6)
    _, out = cli("--help")
    page = exit_codes_reference()
    for n, word in ((5, "not found"), (6, "refused")):
        assert f"\n  {n}    {word}" in out
        assert f"| {n} | {word}" in page


def test_show_of_an_unknown_id_is_not_found(config_file: Path, sample_db: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    for unknown in (str(uuid.uuid4()), "not-a-memory-id"):
        code, out = cli("--config", str(config_file), "show", unknown)
        assert code == EXIT_NOT_FOUND and out == ""
        assert f"no memory with id {unknown}" in capsys.readouterr().err


def test_config_init_over_an_existing_file_is_refused(
        isolated_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("config", "init")[0] == 0
    path = Path(isolated_env["XDG_CONFIG_HOME"]) / "opencode-memoryd" / "config.toml"
    path.write_text(path.read_text() + "# mine\n")
    capsys.readouterr()
    assert cli("config", "init")[0] == EXIT_REFUSED
    assert "already exists; not overwritten" in capsys.readouterr().err
    assert path.read_text().endswith("# mine\n")


def test_undo_of_an_unknown_run_is_not_found(config_file: Path, sample_db: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("--config", str(config_file), "dream", "--undo", "no-such-run")[0] \
        == EXIT_NOT_FOUND
    assert "no dream run 'no-such-run'" in capsys.readouterr().err
    # a dry run exists but has nothing to undo: refused
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    entry = cli_json("--config", str(config_file), "dream", "--dir", ACME, "--db",
                     str(sample_db), "--dry-run")
    assert cli("--config", str(config_file), "dream", "--undo", entry["run_id"])[0] \
        == EXIT_REFUSED
    assert "dry run" in capsys.readouterr().err


def test_dream_dir_without_a_database_is_exit_4(config_file: Path, sample_db: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # no database anywhere (the isolated data dir is empty)
    assert cli("--config", str(config_file), "dream", "--dir", ACME)[0] == EXIT_SOURCE
    assert "no OpenCode database found" in capsys.readouterr().err
    missing = sample_db.parent / "gone.db"
    assert cli("--config", str(config_file), "dream", "--dir", ACME, "--db",
               str(missing))[0] == EXIT_SOURCE
    assert str(missing) in capsys.readouterr().err
    # a database without a session in that folder: nothing to dream, not found
    assert cli("--config", str(config_file), "dream", "--dir", "/tmp/projects/none",
               "--db", str(sample_db))[0] == EXIT_NOT_FOUND
    assert "no OpenCode project found for /tmp/projects/none" in capsys.readouterr().err


@pytest.mark.slow
def test_journal_into_a_closed_pipe_exits_quietly(isolated_env: dict[str, str]) -> None:
    state = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
    journal = DreamJournal(state / "dream-journal.jsonl")
    for n in range(400):  # far more than a pipe buffer holds
        journal.append({"run_id": f"run{n:09d}", "action": "dream", "status": "ok",
                        "started_at": f"2025-01-01T00:{n % 60:02d}:00.000Z",
                        "reason": "x" * 200, "operations": [], "counts": {}})
    env = {**os.environ, **isolated_env, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "opencode_memoryd", "journal", "--json",
                             "--limit", "400"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"["
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert err == ""


def test_install_service_dry_run_does_not_say_enable(isolated_env: dict[str, str]) -> None:
    code, out = cli("install-service", "--dry-run")
    assert code == 0
    assert "would write" in out and "dry run: nothing was written" in out
    assert "enable" not in out.lower().replace("enable-linger", "")
    unit = Path(isolated_env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    assert not unit.exists()
    code, out = cli("install-service")
    assert code == 0 and "enable it with: systemctl --user" in out


def _log_events(state_dir: Path, event: str) -> list[dict[str, object]]:
    path = state_dir / LOG_FILE_NAME
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("event") == event]


@pytest.mark.slow
def test_daemon_says_once_that_no_database_exists_yet(tmp_path: Path,
                                                      isolated_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path / "d.toml", "[extraction]\nmode = \"rules\"\n"
                                             "[daemon]\nsweep_interval_seconds = 0.2\n")
    state_dir = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
    data_dir = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    proc = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: bool(_log_events(state_dir, "no_opencode_database")))
        time.sleep(3)  # about 15 sweeps, each of which finds no database
        said = _log_events(state_dir, "no_opencode_database")
        assert len(said) == 1, said
        assert f"{data_dir}/opencode*.db" in str(said[0]["message"])
        # the database appears: picked up without a restart
        data_dir.mkdir(parents=True)
        shutil.copyfile(SAMPLE_DB, data_dir / "opencode.db")
        assert wait_until(lambda: bool(_log_events(state_dir, "source_opened")))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0
