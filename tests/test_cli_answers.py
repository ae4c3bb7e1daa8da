"""The CLI's answers a person meets first: ids typed as a unique prefix, `--json` errors as
an object on stdout, `add` in the current folder. In-process CLI, real store and state
file, a real OpenCode database copy."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import cli, cli_json
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.models import Memory
from opencode_memoryd.store.edge import EdgeStore
from opencode_writer import OpenCodeWriter

#: Two ids that share their first eight characters, and one that shares nothing.
TWIN_A = "abcd1234-0000-4000-8000-000000000001"
TWIN_B = "abcd1234-0000-4000-8000-000000000002"
LONE = "5e1f0000-0000-4000-8000-000000000003"


def _seed(cfg: Path, env: dict[str, str]) -> None:
    """Three user-scope memories with the ids above, written to the embedded store."""
    now = datetime.now(UTC)
    store = EdgeStore(store_dir(load_config(cfg, env), env))
    try:
        store.upsert([Memory(id=i, content=text, type="user", scope="user", project_id=None,
                             project_root=None, session_id="", message_ids=[],
                             source="manual", created_at=now, updated_at=now)
                      for i, text in ((TWIN_A, "I prefer tabs."), (TWIN_B, "I use fish."),
                                      (LONE, "I live in Lisbon."))])
    finally:
        store.close()


def run(cfg: Path, *args: str) -> tuple[int, str]:
    return cli("--config", str(cfg), *args)


def test_a_unique_prefix_names_a_memory_an_ambiguous_one_lists_the_candidates(
        config_file: Path, isolated_env: dict[str, str], capsys: Any) -> None:
    _seed(config_file, isolated_env)
    assert cli_json("--config", str(config_file), "show", "5e1f")["memory"]["id"] == LONE
    forgot = cli_json("--config", str(config_file), "forget", "5E1F0000-00")
    assert (forgot["status"], forgot["memory"]["id"]) == ("forgotten", LONE)
    assert cli_json("--config", str(config_file), "restore", "5e1f")["memory"]["id"] == LONE
    edited = cli_json("--config", str(config_file), "edit", "5e1f0", "I live in Porto.")
    assert edited["memory"]["content"] == "I live in Porto."
    capsys.readouterr()
    # shared by two: refused, both named with their text, nothing changed
    code, out = run(config_file, "forget", "abcd1234")
    err = capsys.readouterr().err
    assert code == 2 and out == ""
    assert "ambiguous" in err and TWIN_A in err and TWIN_B in err and "I use fish." in err
    assert {m["id"] for m in cli_json("--config", str(config_file), "list")} == {
        TWIN_A, TWIN_B, LONE}
    # too short, and matching nothing
    assert run(config_file, "show", "abc")[0] == 2
    assert "at least 4 characters" in capsys.readouterr().err
    assert run(config_file, "show", "ffff")[0] == 5


def test_json_errors_are_an_object_on_stdout_with_the_exit_code(
        config_file: Path, isolated_env: dict[str, str]) -> None:
    _seed(config_file, isolated_env)
    for argv, code, kind in (
            (("forget", "ffffffff-0000-4000-8000-000000000009"), 5, "NotFoundError"),
            (("show", "ffffffff-0000-4000-8000-000000000009"), 5, "NotFoundError"),
            (("edit", "abcd1234", "x"), 2, "RequestError"),
            (("restore", LONE), 6, "RefusedError")):
        got, out = run(config_file, *argv, "--json")
        error = json.loads(out)["error"]
        assert (got, error["exit_code"], error["type"]) == (code, code, kind), argv
        assert error["message"]


@pytest.fixture
def project(tmp_path: Path, sample_db: Path) -> Path:
    """A real folder that is an OpenCode project of the sample database copy."""
    folder = tmp_path / "work" / "shop"
    folder.mkdir(parents=True)
    w = OpenCodeWriter(sample_db)
    try:
        w.new_session(project_id="prj_shop", directory=str(folder), worktree=str(folder))
    finally:
        w.close()
    return folder


def test_add_without_dir_or_user_adds_to_the_current_folders_project(
        config_file: Path, sample_db: Path, project: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    added = cli_json("--config", str(config_file), "add", "Orders ship from Rotterdam.",
                     "--db", str(sample_db))
    m = added["memory"]
    assert (m["scope"], m["type"], m["project_id"], m["project_root"]) == (
        "project", "project", "prj_shop", str(project))


def test_list_in_a_project_folder_lists_that_project_and_everywhere_lists_all(
        config_file: Path, sample_db: Path, project: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: Any) -> None:
    cfg = str(config_file)
    here = cli_json("--config", cfg, "add", "Orders ship from Rotterdam.", "--dir",
                    str(project), "--db", str(sample_db))["memory"]
    there = cli_json("--config", cfg, "add", "The API lives under /api/v2.", "--dir",
                     "/tmp/projects/sample/acme-web", "--db", str(sample_db))["memory"]
    mine = cli_json("--config", cfg, "add", "I prefer tabs.", "--user")["memory"]
    monkeypatch.chdir(project)
    capsys.readouterr()
    assert [m["id"] for m in cli_json("--config", cfg, "list")] == [here["id"]]
    assert f"the memories of {project}'s project" in capsys.readouterr().err
    assert {m["id"] for m in cli_json("--config", cfg, "list", "--everywhere")} == {
        here["id"], there["id"], mine["id"]}
    monkeypatch.chdir(project.parent)  # no project here: every project's, as before
    assert len(cli_json("--config", cfg, "list")) == 3
