"""The command line: exit codes, help, config init, status, search, and the log."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ACME, cli, cli_json, write_config
from opencode_memoryd.cli.reference import exit_codes_reference


def test_help_and_docs_document_every_exit_code() -> None:
    code, out = cli("--help")
    assert code == 0
    page = exit_codes_reference()
    for exit_code in ("0", "1", "2", "3", "4", "5", "6", "78", "130"):
        assert f"\n  {exit_code} " in out
        assert f"| {exit_code} |" in page


def test_usage_error_is_2() -> None:
    assert cli("maintain")[0] == 2
    assert cli("maintain", "--dir", "x", "--all")[0] == 2


def test_console_script_runs(isolated_env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "opencode_memoryd", "--version"],
                          capture_output=True, text=True, env={**isolated_env}, timeout=60)
    assert proc.returncode == 0 and "opencode-memoryd" in proc.stdout


def test_config_error_is_78_and_names_the_key(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm]\nmodle = 'x'\ntimeout_seconds = -1\n")
    assert cli("--config", str(bad), "status")[0] == 78
    err = capsys.readouterr().err
    assert "llm.modle" in err and "llm.timeout_seconds" in err


def test_config_init_writes_once(isolated_env: dict[str, str]) -> None:
    code, _ = cli("config", "init")
    path = Path(isolated_env["XDG_CONFIG_HOME"]) / "opencode-memoryd" / "config.toml"
    assert code == 0 and path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text(path.read_text() + "\n# mine\n")
    assert cli("config", "init")[0] == 6  # refused
    assert path.read_text().endswith("# mine\n")
    # and the written file is a valid config
    assert cli("status")[0] == 0


def test_no_config_at_all_works(sample_db: Path) -> None:
    code, out = cli("status", "--json")
    assert code == 0
    info = json.loads(out)
    assert info["config_file_exists"] is False
    assert info["extraction_mode"] == "rules"


def test_status_reports_store_state_and_runs(sample_db: Path, config_file: Path) -> None:
    cli_json("--config", str(config_file), "maintain", "--dir", ACME, "--db", str(sample_db))
    info = cli_json("--config", str(config_file), "status")
    # the two directives, and the state the session that edited package.json ended in
    assert info["memories"] == {"project/feedback": 1, "project/project": 1,
                                "project/session-summary": 1}
    assert info["state"]["sessions_tracked"] == 4
    assert info["last_runs"][0]["summary"]["added"] == 2
    assert info["last_runs"][0]["summary"]["summaries"] == 1
    code, out = cli("--config", str(config_file), "status")
    assert code == 0 and "memories:    3" in out


def test_search_finds_the_relevant_memory_first(sample_db: Path, config_file: Path) -> None:
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    hits = cli_json("--config", str(config_file), "search", "which package manager, npm?",
                    "--limit", "3")
    facts = [h for h in hits if h["type"] not in ("session-summary", "project-brief")]
    assert "pnpm" in facts[0]["content"]
    hits = cli_json("--config", str(config_file), "search", "python version", "--dir",
                    "/tmp/projects/sample/data-pipeline", "--db", str(sample_db))
    assert [h["content"] for h in hits if h["type"] == "project"] == [
        "The data-pipeline service must stay compatible with Python 3.9."]
    # the session summaries that mention it are found too, never another project's
    assert {h["project_id"] for h in hits} == {"7c678a7f34b6458b95f92512d1d8da03bcdd44a2"}


def test_list_json_has_the_documented_fields(sample_db: Path, config_file: Path) -> None:
    cli_json("--config", str(config_file), "maintain", "--dir", ACME, "--db", str(sample_db))
    memories = cli_json("--config", str(config_file), "list")
    required = {"id", "content", "type", "scope", "project_id", "project_root", "session_id",
                "message_ids", "source", "created_at", "updated_at"}
    assert memories and all(required <= set(m) for m in memories)


def test_log_has_one_summary_per_session_and_no_transcript_text(
        sample_db: Path, config_file: Path, isolated_env: dict[str, str]) -> None:
    cli_json("--config", str(config_file), "maintain", "--dir", ACME, "--db", str(sample_db))
    log = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" / "opencode-memoryd.log"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    summaries = [e for e in events if e["event"] == "session_processed"]
    assert len(summaries) == 4
    for key in ("session_id", "turns_read", "added", "skipped", "redactions", "tokens_in",
                "tokens_out", "duration_ms"):
        assert all(key in e for e in summaries)
    text = log.read_text()
    assert "always use pnpm" not in text and "api/v2" not in text


def test_embedder_change_is_refused_with_a_clear_message(
        sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fake_openai import FakeOpenAI

    rules = write_config(tmp_path / "rules.toml", "[extraction]\nmode = \"rules\"\n")
    cli_json("--config", str(rules), "maintain", "--dir", ACME, "--db", str(sample_db))
    with FakeOpenAI() as fake:
        dense = write_config(tmp_path / "dense.toml", f"""
[extraction]
mode = "rules"
[embedding]
provider = "openai"
base_url = "{fake.base_url}"
model = "test-embed"
api_key_env = "TEST_EMBED_KEY"
""")
        code, _ = cli("--config", str(dense), "search", "pnpm")
    assert code == 1
    assert "embedder" in capsys.readouterr().err.lower()


def test_dense_vectors_with_an_embeddings_endpoint(sample_db: Path, tmp_path: Path) -> None:
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        dense = write_config(tmp_path / "dense.toml", f"""
[extraction]
mode = "rules"
[embedding]
provider = "openai"
base_url = "{fake.base_url}"
model = "test-embed"
api_key_env = "TEST_EMBED_KEY"
""")
        cli_json("--config", str(dense), "maintain", "--all", "--db", str(sample_db))
        hits = cli_json("--config", str(dense), "search", "pnpm npm")
        assert fake.requests_to("/embeddings")
    assert "pnpm" in hits[0]["content"]


def test_install_service_dry_run_then_install_and_uninstall(
        isolated_env: dict[str, str]) -> None:
    unit = Path(isolated_env["XDG_CONFIG_HOME"]) / "systemd" / "user" / \
        "opencode-memoryd.service"
    code, out = cli("install-service", "--dry-run")
    if sys.platform != "linux":
        pytest.skip("the systemd unit is Linux-only")
    assert code == 0 and "[Service]" in out and not unit.exists()
    code, out = cli("install-service")
    assert code == 0 and unit.exists() and "systemctl --user" in out
    code, out = cli("uninstall-service")
    assert code == 0 and not unit.exists()
