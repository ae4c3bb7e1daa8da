"""`export`/`import` round-trip every memory with its provenance and deduplicate; `forget
--purge` deletes a memory for good: its point, and its text in both journals, which record
that a purge happened. In-process CLI, real stores and journals, the real OpenCode sample
database."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from conftest import ACME, cli, cli_json, start_daemon, wait_until, write_config
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.usecases.manual_log import manual_memories

#: What a memory carries that an import on another machine keeps (the user-scope owner is
#: the importing user, and `score` is search's).
KEPT = ("id", "content", "type", "scope", "project_id", "project_root", "session_id",
        "session_ids", "message_ids", "source", "created_at", "updated_at", "said_at",
        "status", "superseded_by", "retired_reason", "merged_from", "provenance", "history")


def _all(cfg: Path) -> dict[str, dict[str, Any]]:
    return {m["id"]: {k: m.get(k) for k in KEPT}
            for m in cli_json("--config", str(cfg), "list", "--all")}


def _other_machine(tmp_path: Path, name: str) -> Path:
    """A config whose state dir and store are a machine's of their own."""
    home = tmp_path / name
    return write_config(tmp_path / f"{name}.toml",
                        f'[extraction]\nmode = "rules"\n[state]\ndir = "{home}/state"\n'
                        f'[qdrant]\npath = "{home}/store"\n')


def test_export_and_import_round_trip_every_memory_and_a_second_import_adds_nothing(
        config_file: Path, sample_db: Path, tmp_path: Path) -> None:
    cfg = str(config_file)
    assert cli_json("--config", cfg, "maintain", "--all", "--db", str(sample_db))
    mine = cli_json("--config", cfg, "add", "I prefer tabs.", "--user")["memory"]
    project = cli_json("--config", cfg, "add", "Deploys go out on Tuesdays.", "--dir", ACME,
                       "--db", str(sample_db))["memory"]
    cli_json("--config", cfg, "edit", project["id"], "Deploys go out on Thursdays.")
    cli_json("--config", cfg, "forget", mine["id"])
    before = _all(config_file)
    assert any(m["session_ids"] and m["said_at"] for m in before.values())  # extracted
    assert any(m["status"] == "retired" for m in before.values())
    assert any(m["history"] for m in before.values())
    for fmt in ("json", "markdown"):
        path = tmp_path / f"memories.{fmt}"
        code, _ = cli("--config", cfg, "export", "--format", fmt, "--output", str(path))
        assert code == 0 and path.stat().st_mode & 0o077 == 0
        other = _other_machine(tmp_path, fmt)
        first = cli_json("--config", str(other), "import", str(path))
        assert (first["added"], first["present"]) == (len(before), 0)
        assert _all(other) == before, fmt
        again = cli_json("--config", str(other), "import", str(path))
        assert (again["added"], again["present"]) == (0, len(before))
        assert len(_all(other)) == len(before)


def test_an_invalid_export_is_refused_whole_with_each_problem_named(
        config_file: Path, tmp_path: Path, capsys: Any) -> None:
    cfg = str(config_file)
    cli_json("--config", cfg, "add", "I prefer tabs.", "--user")
    code, out = cli("--config", cfg, "export")
    doc = json.loads(out)
    doc["memories"].append({**doc["memories"][0], "id": "not-a-uuid", "type": "bogus"})
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    other = _other_machine(tmp_path, "other")
    capsys.readouterr()
    code, out = cli("--config", str(other), "import", str(path))
    err = capsys.readouterr().err
    assert code == 2 and out == ""
    assert "`memories.1.id`" in err and "`memories.1.type`" in err
    assert "nothing was imported" in err
    assert cli_json("--config", str(other), "list", "--all") == []


def test_forget_purge_deletes_the_point_and_scrubs_both_journals(
        config_file: Path, isolated_env: dict[str, str]) -> None:
    cfg = str(config_file)
    text = "The staging dashboard passphrase hint is blue falcon forty two."
    m = cli_json("--config", cfg, "add", text, "--user")["memory"]
    cli_json("--config", cfg, "edit", m["id"], text + " Ask Dana.")
    kept = cli_json("--config", cfg, "add", "I prefer tabs.", "--user")["memory"]
    state = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
    journals = [state / "dream-journal.jsonl", state / "manual-journal.jsonl"]
    assert all(text in p.read_text() for p in journals)  # both hold it before
    purged = cli_json("--config", cfg, "forget", "--purge", m["id"][:8])
    assert (purged["id"], purged["status"]) == (m["id"], "purged")
    assert purged["scrubbed"]["journal"] >= 1 and purged["scrubbed"]["manual_journal"] >= 2
    assert {x["id"] for x in cli_json("--config", cfg, "list", "--all")} == {kept["id"]}
    assert cli("--config", cfg, "show", m["id"])[0] == 5
    for p in journals:
        assert "blue falcon" not in p.read_text(), p
    entries = [json.loads(line) for line in journals[1].read_text().splitlines()]
    (record,) = [e for e in entries if e.get("op") == "purge"]
    assert record["memory_id"] == m["id"] and "memory" not in record
    assert set(manual_memories(DreamJournal(journals[1]))) == {kept["id"]}


def test_through_the_running_daemon_a_large_import_and_a_purge(
        config_file: Path, tmp_path: Path, isolated_env: dict[str, str]) -> None:
    now = "2026-01-02T03:04:05Z"
    doc = {"format": "opencode-memoryd-export", "version": 1, "exported_at": now,
           "memories": [{"id": str(uuid.UUID(int=n + 1)), "content": f"Fact number {n}.",
                         "type": "user", "scope": "user", "project_id": None,
                         "project_root": None, "session_id": "", "message_ids": [],
                         "source": "manual", "created_at": now, "updated_at": now}
                        for n in range(450)]}  # more than two requests' worth
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    info = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "daemon.json"
    proc = start_daemon(config_file, isolated_env)
    try:
        assert wait_until(lambda: info.exists() or proc.poll() is not None, 120)
        assert proc.poll() is None
        got = cli_json("--config", str(config_file), "import", str(path))
        assert (got["added"], got["present"]) == (450, 0)
        assert len(cli_json("--config", str(config_file), "list")) == 450
        purged = cli_json("--config", str(config_file), "forget", "--purge",
                          doc["memories"][7]["id"])
        assert purged["status"] == "purged"
        assert len(cli_json("--config", str(config_file), "list")) == 449
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
