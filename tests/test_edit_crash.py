"""An edit is journaled before the memory is written (write-ahead): a process killed
between the two writes leaves the edit journaled and the memory unchanged, and the next
start journals the edit as failed. Never an edit applied with no journal entry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import ACME, cli_json
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.service import open_local

OLD = "Releases are tagged vX.Y.Z on the main branch."
NEW = "Releases are tagged release-X.Y.Z on the trunk."


def test_an_edit_killed_between_its_writes_is_journaled_not_applied(
        config_file: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    cfg = str(config_file)
    added = cli_json("--config", cfg, "add", OLD, "--dir", ACME, "--db", str(sample_db))
    memory_id = added["memory"]["id"]
    env = {**os.environ, **isolated_env, "OPENCODE_MEMORYD_FAULT": "edit_journaled",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-m", "opencode_memoryd", "--config", cfg,
                             "edit", memory_id, NEW], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # the journal already holds the edit; the memory is as it was
    (entry,) = cli_json("--config", cfg, "journal")
    assert entry["action"] == "edit" and entry["operations"][0]["memory_ids"] == [memory_id]
    shown = cli_json("--config", cfg, "show", memory_id)["memory"]
    assert shown["content"] == OLD and shown["history"] == []
    # the next start (the daemon's, before it serves anything) journals it as failed
    app = App(config=load_config(config_file, dict(os.environ)), env=dict(os.environ),
              config_path=config_file)
    for _ in range(2):  # once
        with open_local(app) as service:
            service.recover_dreams()
    journal = cli_json("--config", cfg, "journal")
    assert [(e["run_id"], e["status"]) for e in journal] == [
        (entry["run_id"], "failed"), (entry["run_id"], "ok")]
    assert journal[0]["reason"].startswith("interrupted before it was applied")
    assert cli_json("--config", cfg, "show", memory_id)["memory"]["content"] == OLD
    # an edit that is not interrupted is journaled once, and recovery leaves it alone
    edited = cli_json("--config", cfg, "edit", memory_id, NEW)
    with open_local(app) as service:
        service.recover_dreams()
    journal = cli_json("--config", cfg, "journal")
    assert (journal[0]["run_id"], journal[0]["status"]) == (edited["run_id"], "ok")
    assert len(journal) == 3
