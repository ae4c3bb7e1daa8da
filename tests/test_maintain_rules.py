"""`maintain` in rules mode on copies of the real OpenCode sample database."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, PIPELINE, cli, cli_json, marks
from opencode_writer import OpenCodeWriter

FORK = next(s for s in MANIFEST["sessions"] if s["kind"] == "fork")
SUBAGENT = next(s for s in MANIFEST["sessions"] if s["kind"] == "subagent")
ORIGINAL_DIRECTIVES = {d["message_id"] for d in MANIFEST["remember_directives"]
                       if not d["forked_copy"]}
#: Facts (the memories drawn from what the user said), not the session summaries and
#: project briefs opencode-memoryd writes itself (tests/test_summaries.py covers those).
FACT_TYPES = {"user", "feedback", "project", "reference"}


def facts(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in memories if m["type"] in FACT_TYPES]


def test_acme_web_gets_pnpm_and_api_base_path_once(sample_db: Path, config_file: Path) -> None:
    code, out = cli("--config", str(config_file), "maintain", "--dir", ACME,
                    "--db", str(sample_db))
    assert code == 0, out
    memories = facts(cli_json("--config", str(config_file), "list", "--dir", ACME,
                              "--db", str(sample_db)))
    assert sorted((m["content"], m["type"]) for m in memories) == [
        ("Our API base path is /api/v2.", "project"),
        ("We always use pnpm, never npm.", "feedback")]
    pnpm = next(m for m in memories if "pnpm" in m["content"])
    # the fork's copy of the directive was never read: one session, the original message
    assert pnpm["session_ids"] == ["ses_dfec43a4cffe5HkHVz7wUC8pgF"]
    assert pnpm["message_ids"] == ["msg_2013bc60f0015ermwAG4vga0fW"]
    for m in memories:
        assert m["scope"] == "project"
        assert m["project_id"] == "aa96382a4f1e45500e577aeab09e21df3c441bfc"
        assert m["project_root"] == ACME
        assert m["source"] == "rules"
        assert m["created_at"].endswith("Z") and m["updated_at"].endswith("Z")


def test_data_pipeline_gets_python_39_rule_from_nested_session(
        sample_db: Path, config_file: Path) -> None:
    code, _ = cli("--config", str(config_file), "maintain", "--dir", PIPELINE,
                  "--db", str(sample_db))
    assert code == 0
    memories = facts(cli_json("--config", str(config_file), "list", "--dir", PIPELINE,
                              "--db", str(sample_db)))
    assert [m["session_id"] for m in memories] == ["ses_dfec3e0e7ffemMTQpWH5L89esM"]
    # "Remember: this service must stay compatible with Python 3.9": the memory says which
    assert memories[0]["content"] == (
        "The data-pipeline service must stay compatible with Python 3.9.")
    assert memories[0]["project_root"] == PIPELINE


def test_all_projects_store_only_the_human_directives(sample_db: Path, config_file: Path) -> None:
    report = cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    assert report["totals"]["added"] == 3
    memories = facts(cli_json("--config", str(config_file), "list"))
    cited = {mid for m in memories for mid in m["message_ids"]}
    assert cited == ORIGINAL_DIRECTIVES
    sessions = {sid for m in memories for sid in m["session_ids"]}
    assert SUBAGENT["id"] not in sessions and FORK["id"] not in sessions
    # the sub-agent session is never read at all: it has no mark
    assert SUBAGENT["id"] not in {r["session_id"] for r in report["sessions"]}


def test_second_run_adds_nothing_and_reads_nothing(sample_db: Path, config_file: Path,
                                                   state_db: Path) -> None:
    first = cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    before = marks(state_db)
    second = cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    assert first["totals"]["turns_read"] > 0
    assert second["totals"]["turns_read"] == 0
    assert second["totals"]["added"] == 0
    assert second["totals"]["llm_calls"] == 0
    assert marks(state_db) == before
    assert second["totals"]["summaries"] == 0
    assert len(facts(cli_json("--config", str(config_file), "list"))) == 3


def test_appended_turns_are_read_and_only_they(sample_db: Path, config_file: Path,
                                               state_db: Path) -> None:
    cli_json("--config", str(config_file), "maintain", "--dir", ACME, "--db", str(sample_db))
    w = OpenCodeWriter(sample_db)
    sid = "ses_dfec4032affe4TNn4bUt9e26HR"
    ids = w.append_turn(sid, "Remember: the staging server is staging.acme.test", "Noted.")
    w.close()
    report = cli_json("--config", str(config_file), "maintain", "--dir", ACME,
                      "--db", str(sample_db))
    assert report["totals"]["turns_read"] == 1
    assert report["totals"]["added"] == 1
    rows = [r for r in report["sessions"] if r["turns_read"]]
    assert [r["session_id"] for r in rows] == [sid]
    assert marks(state_db)[sid][1] == ids["assistant"]
    memories = cli_json("--config", str(config_file), "list", "--dir", ACME,
                        "--db", str(sample_db))
    new = [m for m in memories if "staging" in m["content"]]
    assert [m["message_ids"] for m in new] == [[ids["user"]]]


def test_turn_in_flight_is_not_read_until_finished(sample_db: Path, config_file: Path,
                                                   state_db: Path) -> None:
    w = OpenCodeWriter(sample_db)
    sid = "ses_dfec4032affe4TNn4bUt9e26HR"
    ids = w.append_turn(sid, "remember that deploys happen on Fridays", "...", finish=False)
    report = cli_json("--config", str(config_file), "maintain", "--dir", ACME,
                      "--db", str(sample_db))
    assert marks(state_db)[sid][1] != ids["assistant"]
    assert not any("Fridays" in m["content"] for m in cli_json(
        "--config", str(config_file), "list"))
    w.complete(ids["assistant"])
    w.close()
    report = cli_json("--config", str(config_file), "maintain", "--dir", ACME,
                      "--db", str(sample_db))
    assert report["totals"]["added"] == 1
    assert marks(state_db)[sid][1] == ids["assistant"]


def test_dir_that_does_not_exist_here_still_selects_from_the_database(
        sample_db: Path, config_file: Path, tmp_path: Path) -> None:
    # the sessions' folders were on the machine that wrote the database: moved here under
    # a folder of this test that does not exist (/tmp/projects/... may exist on a machine)
    elsewhere = tmp_path / "elsewhere"
    with sqlite3.connect(sample_db) as c:
        for table, column in (("session", "directory"), ("project", "worktree")):
            c.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)",
                      (str(Path(ACME).parent), str(elsewhere)))
    acme = elsewhere / Path(ACME).name
    assert not os.path.exists(acme)
    report = cli_json("--config", str(config_file), "maintain", "--dir", f"{acme}/",
                      "--db", str(sample_db))
    assert report["totals"]["sessions"] == 4  # 3 sessions + the fork; no sub-agent


def test_archived_sessions_can_be_excluded(sample_db: Path, tmp_path: Path) -> None:
    from conftest import write_config
    cfg = write_config(tmp_path / "c.toml", "[opencode]\nsettle_seconds = 0\n"
                       "include_archived = false\n[extraction]\nmode = \"rules\"\n")
    report = cli_json("--config", str(cfg), "maintain", "--dir",
                      "/tmp/projects/sample/notes-app", "--db", str(sample_db))
    archived = next(s["id"] for s in MANIFEST["sessions"] if s["archived"])
    assert archived not in {r["session_id"] for r in report["sessions"]}
    assert report["totals"]["sessions"] == 3


def test_user_scope_directive_is_shared_by_every_project(sample_db: Path, config_file: Path
                                                         ) -> None:
    w = OpenCodeWriter(sample_db)
    w.append_turn("ses_dfec3906affe7mNz9acnHRC1kP",
                  "Remember for all my projects: I use tabs, not spaces.", "OK.")
    w.close()
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    user = cli_json("--config", str(config_file), "list", "--user")
    assert [m["scope"] for m in user] == ["user"]
    assert user[0]["project_id"] is None
    hits = cli_json("--config", str(config_file), "search", "tabs or spaces", "--dir", ACME,
                    "--db", str(sample_db))
    assert hits and hits[0]["id"] == user[0]["id"]


def test_missing_database_is_a_clear_error(tmp_path: Path, config_file: Path,
                                           capsys: object) -> None:
    code, _ = cli("--config", str(config_file), "maintain", "--dir", ACME,
                  "--db", str(tmp_path / "nope.db"))
    assert code == 4


def test_unknown_schema_names_what_is_missing(tmp_path: Path, config_file: Path,
                                              capfd: object) -> None:
    import sqlite3
    bad = tmp_path / "other.db"
    with sqlite3.connect(bad) as c:
        c.execute("CREATE TABLE session (id TEXT)")
    code, _ = cli("--config", str(config_file), "maintain", "--dir", ACME, "--db", str(bad))
    assert code == 4
    err = capfd.readouterr().err  # type: ignore[attr-defined]
    assert "missing" in err and "table message" in err and "column session.directory" in err
    assert "Traceback" not in err


def test_a_big_run_lists_only_the_sessions_with_something_to_report(
        config_file: Path, sample_db: Path, isolated_env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Above LIST_EVERY_SESSION_UP_TO sessions the report lists the sessions that stored,
    refused or failed something; the totals still count every session."""
    from opencode_memoryd.compose import App
    from opencode_memoryd.config.loader import load_config
    from opencode_memoryd.usecases import maintain as maintain_mod
    from opencode_memoryd.usecases.service import open_local

    def run(path: Path) -> dict[str, Any]:
        env = dict(os.environ)
        app = App(config=load_config(config_file, env), env=env, config_path=config_file)
        with open_local(app) as service:
            return service.maintain(directory=None, db=str(path))

    every = run(sample_db)
    assert every["sessions_omitted"] == 0
    assert len(every["sessions"]) == every["totals"]["sessions"] > 3
    copy = sample_db.with_name("again.db")
    copy.write_bytes(sample_db.read_bytes())
    monkeypatch.setattr(maintain_mod, "LIST_EVERY_SESSION_UP_TO", 2)
    listed = run(copy)
    assert listed["totals"]["sessions"] == every["totals"]["sessions"]
    assert listed["totals"]["added"] == 0  # the same memories: stored once already
    kept = {r["session_id"] for r in listed["sessions"]}
    assert all(r["added"] or r["error"] or r["rejected"] or r["summaries"] or r["briefs"]
               for r in listed["sessions"])
    assert len(kept) + listed["sessions_omitted"] == listed["totals"]["sessions"]
    assert listed["sessions_omitted"] > 0
