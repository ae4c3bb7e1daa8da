"""A fact the user adds by hand that corrects an older one retires it, as capture does
(journaled, undone by ``dream --undo``, kept retired by ``rebuild``), from the CLI and the
REST API; the agent's note (CLI inside OpenCode, the same route as the MCP tool's ``add``)
retires nothing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import ACME, cli, cli_json, write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.service import Service, open_local
from opencode_memoryd.web.app import build_app
from opencode_memoryd.web.token import csrf_token

POETRY = "We use Poetry to manage dependencies."
UV = "Use uv instead of Poetry from now on."
TOKEN = "t0ken-for-tests"


def add(cfg: Path, db: Path, text: str, *, env: dict[str, str] | None = None) -> Any:
    return cli_json("--config", str(cfg), "add", "--dir", ACME, "--db", str(db), text,
                    env=env)


def listed(cfg: Path, db: Path) -> dict[str, dict[str, Any]]:
    rows = cli_json("--config", str(cfg), "list", "--dir", ACME, "--db", str(db), "--all")
    return {m["content"]: m for m in rows}


def test_a_users_correction_added_by_hand_retires_what_it_replaces(
        sample_db: Path, config_file: Path) -> None:
    old = add(config_file, sample_db, POETRY)["memory"]
    new = add(config_file, sample_db, UV)
    assert new["status"] == "added" and new["superseded"] == [old["id"]]
    rows = listed(config_file, sample_db)
    tomb = rows[POETRY]
    assert tomb["status"] == "retired" and tomb["superseded_by"] == new["memory"]["id"]
    assert tomb["retired_reason"] == f"superseded: {UV}"
    entries = cli_json("--config", str(config_file), "journal")
    entry = next(e for e in entries if e.get("action") == "supersede")
    assert entry["run_id"] == tomb["retired_by_run"]
    code, out = cli("--config", str(config_file), "dream", "--undo", entry["run_id"])
    assert code == 0, out
    rows = listed(config_file, sample_db)
    assert rows[POETRY]["status"] == "active" and rows[UV]["status"] == "active"


def test_the_cli_says_what_a_manual_correction_retired(
        sample_db: Path, config_file: Path) -> None:
    old = add(config_file, sample_db, POETRY)["memory"]
    code, out = cli("--config", str(config_file), "add", "--dir", ACME, "--db",
                    str(sample_db), UV)
    assert code == 0 and f"retired {old['id']}" in out, out


def test_an_agents_note_never_retires_what_the_user_said(
        sample_db: Path, config_file: Path, isolated_env: dict[str, str]) -> None:
    add(config_file, sample_db, POETRY)
    note = add(config_file, sample_db, UV, env={**isolated_env, "OPENCODE": "1"})
    assert note["memory"]["provenance"] == "agent" and note["superseded"] == []
    rows = listed(config_file, sample_db)
    assert rows[POETRY]["status"] == "active"
    assert not [e for e in cli_json("--config", str(config_file), "journal")
                if e.get("action") == "supersede"]


@pytest.fixture
def service(config_file: Path, isolated_env: dict[str, str]) -> Iterator[Service]:
    app = App(config=load_config(config_file, None), env=dict(isolated_env))
    with open_local(app) as svc:
        yield svc


def test_a_correction_added_on_the_page_retires_what_it_replaces(
        service: Service, sample_db: Path) -> None:
    client = TestClient(build_app(service, TOKEN), base_url="http://127.0.0.1:4747",
                        headers={"Authorization": f"Bearer {TOKEN}",
                                 "X-CSRF-Token": csrf_token(TOKEN)})
    first = service.add(content=POETRY, type="project", scope="project", directory=ACME,
                        db=str(sample_db))
    resp = client.post("/api/memories", json={"content": UV,
                                              "project": first["memory"]["project_id"]})
    assert resp.status_code == 201, resp.text
    made = [first, resp.json()["result"]]
    assert made[1]["superseded"] == [made[0]["memory"]["id"]]
    shown = client.get(f"/api/memories/{made[0]['memory']['id']}").json()["result"]
    assert shown["memory"]["status"] == "retired"
    assert shown["memory"]["superseded_by"] == made[1]["memory"]["id"]


def test_a_rebuild_keeps_what_a_manual_correction_retired(
        sample_db: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rebuild.toml",
                       f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{sample_db}"]\n'
                       '[extraction]\nmode = "rules"\n')
    old = add(cfg, sample_db, POETRY)["memory"]
    new = add(cfg, sample_db, UV)["memory"]
    store = Path(cli_json("--config", str(cfg), "status")["store"]["path"])
    shutil.rmtree(store)
    cli_json("--config", str(cfg), "rebuild")
    rows = {m["id"]: m for m in cli_json("--config", str(cfg), "list", "--all")}
    assert rows[old["id"]]["status"] == "retired"
    assert rows[old["id"]]["superseded_by"] == new["id"]
    assert rows[new["id"]]["status"] == "active"


def test_a_rebuild_after_the_undo_keeps_the_fact_back(sample_db: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rebuild.toml",
                       f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{sample_db}"]\n'
                       '[extraction]\nmode = "rules"\n')
    old = add(cfg, sample_db, POETRY)["memory"]
    add(cfg, sample_db, UV)
    (tomb,) = [m for m in cli_json("--config", str(cfg), "list", "--all")
               if m["id"] == old["id"]]
    code, out = cli("--config", str(cfg), "dream", "--undo", tomb["retired_by_run"])
    assert code == 0, out
    store = Path(cli_json("--config", str(cfg), "status")["store"]["path"])
    shutil.rmtree(store)
    cli_json("--config", str(cfg), "rebuild")
    rows = {m["id"]: m for m in cli_json("--config", str(cfg), "list", "--all")}
    assert rows[old["id"]]["status"] == "active"
