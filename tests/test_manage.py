"""`add`, `forget` and `profile` through the CLI, the Service and a running daemon; `list` and
`search --dir` without an OpenCode database. Real store, real state file."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, PIPELINE, cli, cli_json, start_daemon, wait_until
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.errors import NotFoundError, RequestError
from opencode_memoryd.store.api import MemoryFilter
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.usecases.service import call, open_local

KEYS = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def every_payload(cfg: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every point of the embedded store, tombstones included (no daemon may run)."""
    store = EdgeStore(store_dir(load_config(cfg, env), env))
    try:
        return {m.id: m.to_payload()
                for m in store.scroll(MemoryFilter(include_retired=True))}
    finally:
        store.close()


def run(cfg: Path, *args: str) -> tuple[int, str]:
    return cli("--config", str(cfg), *args)


def run_json(cfg: Path, *args: str) -> Any:
    return cli_json("--config", str(cfg), *args)


def test_add_then_search_finds_it_and_adding_again_is_one_point(
        config_file: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    added = run_json(config_file, "add", "Releases are tagged vX.Y.Z on the main branch.",
                     "--dir", ACME, "--db", str(sample_db))
    m = added["memory"]
    assert added["status"] == "added" and added["redactions"] == {}
    assert (m["scope"], m["type"], m["source"]) == ("project", "project", "manual")
    assert (m["project_id"], m["project_root"]) == (KEYS[ACME], ACME)
    assert m["session_ids"] == [] and m["message_ids"] == [] and m["user_id"] is None
    hits = run_json(config_file, "search", "how are releases tagged", "--dir", ACME,
                    "--db", str(sample_db))
    assert hits[0]["id"] == m["id"]
    # again, with other spacing and case: the same fact, one point
    again = run_json(config_file, "add", "releases are  tagged vX.Y.Z on the main branch",
                     "--dir", ACME, "--db", str(sample_db))
    assert again["status"] == "duplicate" and again["memory"]["id"] == m["id"]
    points = every_payload(config_file, isolated_env)
    assert [p["id"] for p in points.values() if "tagged" in p["content"]] == [m["id"]]
    # the human form says which it was
    code, out = run(config_file, "add", "Releases are tagged vX.Y.Z on the main branch.",
                    "--dir", ACME, "--db", str(sample_db))
    assert code == 0 and out.startswith(f"already stored as {m['id']}")


def test_add_user_scope_defaults_to_type_user_and_carries_the_identity(
        config_file: Path, isolated_env: dict[str, str]) -> None:
    me = App(config=load_config(config_file, None), env=dict(isolated_env)).user_id
    code, out = run(config_file, "add", "I prefer short commit messages.", "--user")
    assert code == 0 and out.startswith("added ")
    (m,) = run_json(config_file, "list", "--user")
    assert (m["scope"], m["type"], m["user_id"], m["project_id"]) == ("user", "user", me, None)
    assert run_json(config_file, "status")["user_id"] == me
    assert f"user:        {me}" in run(config_file, "status")[1]


def test_add_redacts_a_planted_secret(config_file: Path, sample_db: Path,
                                      isolated_env: dict[str, str], capsys: Any) -> None:
    added = run_json(config_file, "add", f"The CI bot pushes with the token {SECRET}.",
                     "--dir", ACME, "--db", str(sample_db))
    assert added["redactions"] == {"github_token": 1}
    assert added["memory"]["content"] == "The CI bot pushes with the token " \
                                         "[REDACTED:github_token]."
    stored = every_payload(config_file, isolated_env)
    assert SECRET not in json.dumps(stored)
    assert any("[REDACTED:github_token]" in p["content"] for p in stored.values())
    capsys.readouterr()
    code, _ = run(config_file, "add", f"Staging uses {SECRET} too.", "--user")
    assert code == 0 and "redacted before storing: github_token x1" in capsys.readouterr().err
    assert SECRET not in json.dumps(every_payload(config_file, isolated_env))


def test_bad_add_requests_change_nothing(config_file: Path, sample_db: Path,
                                        isolated_env: dict[str, str], capsys: Any) -> None:
    run_json(config_file, "add", "The API lives under /api/v2.", "--dir", ACME,
             "--db", str(sample_db))
    before = every_payload(config_file, isolated_env)
    capsys.readouterr()
    assert run(config_file, "add", "   ", "--user")[0] == 2
    assert "`content` is empty" in capsys.readouterr().err
    assert run(config_file, "add", "x" * 401, "--user")[0] == 2
    assert "the most is 400" in capsys.readouterr().err
    assert run(config_file, "add", "fact", "--user", "--type", "note")[0] == 2  # argparse
    # a folder no session and no memory belongs to: exit 5, naming what the store has
    assert run(config_file, "add", "A fact.", "--dir", "/tmp/projects/nowhere",
               "--db", str(sample_db))[0] == 5
    err = capsys.readouterr().err
    assert "no project found for /tmp/projects/nowhere" in err and ACME in err
    # a folder holding sessions of several projects is ambiguous
    assert run(config_file, "add", "A fact.", "--dir", "/tmp/projects/sample",
               "--db", str(sample_db))[0] == 2
    assert "sessions of 4 projects" in capsys.readouterr().err
    app = App(config=load_config(config_file, None), env=dict(isolated_env))
    with open_local(app) as service:
        for payload, message in [
            ({"content": "A fact.", "type": "note", "scope": "user"}, "unknown type 'note'"),
            ({"content": "A fact.", "type": "user", "scope": "team"}, "unknown scope 'team'"),
            ({"content": "A fact.", "type": "project", "scope": "project"},
             "needs `directory`"),
            ({"content": 42, "type": "user", "scope": "user"}, "must be a string"),
            ({"type": "user", "scope": "user"}, "`content` is required"),
        ]:
            with pytest.raises(RequestError, match=message):
                call(service, "add", payload)
    assert every_payload(config_file, isolated_env) == before


def test_forget_is_a_tombstone_listed_with_all(config_file: Path, sample_db: Path,
                                               isolated_env: dict[str, str],
                                               capsys: Any) -> None:
    keep = run_json(config_file, "add", "Run the linters with `make lint`.", "--dir", ACME,
                    "--db", str(sample_db))["memory"]
    gone = run_json(config_file, "add", "The staging cluster is called kestrel.", "--dir",
                    ACME, "--db", str(sample_db))["memory"]
    assert run_json(config_file, "search", "staging cluster kestrel")[0]["id"] == gone["id"]
    forgot = run_json(config_file, "forget", gone["id"])
    assert forgot["status"] == "forgotten"
    assert forgot["memory"]["status"] == "retired"
    assert forgot["memory"]["retired_reason"] == "forgotten"
    assert all(h["id"] != gone["id"] for h in run_json(config_file, "search", "staging "
                                                       "cluster kestrel"))
    assert [m["id"] for m in run_json(config_file, "list", "--dir", ACME, "--db",
                                      str(sample_db))] == [keep["id"]]
    listed = {m["id"]: m for m in run_json(config_file, "list", "--all")}
    assert listed[gone["id"]]["status"] == "retired"
    assert listed[gone["id"]]["retired_reason"] == "forgotten"
    assert listed[gone["id"]]["superseded_by"] is None
    before = every_payload(config_file, isolated_env)
    capsys.readouterr()
    # already forgotten, unknown, not even an id: exit 5, nothing changed
    assert run(config_file, "forget", gone["id"])[0] == 5
    assert "already retired (forgotten)" in capsys.readouterr().err
    assert run(config_file, "forget", str(uuid.uuid4()))[0] == 5
    assert "no memory with id" in capsys.readouterr().err
    assert run(config_file, "forget", "not-an-id")[0] == 5
    assert every_payload(config_file, isolated_env) == before
    # adding the fact again brings it back
    back = run_json(config_file, "add", "The staging cluster is called kestrel.", "--dir",
                    ACME, "--db", str(sample_db))
    assert back["status"] == "added" and back["memory"]["id"] == gone["id"]
    assert back["memory"]["status"] == "active"


def test_profile_groups_user_memories_by_type(config_file: Path, sample_db: Path) -> None:
    empty = run_json(config_file, "profile")
    assert empty["total"] == 0 and empty["types"] == {} and empty["updated_at"] is None
    assert run(config_file, "profile")[1].startswith("no user-scope memories")
    run_json(config_file, "add", "Answer in British English.", "--user", "--type",
             "feedback")
    run_json(config_file, "add", "Never add emoji to commit messages.", "--user", "--type",
             "feedback")
    run_json(config_file, "add", "I work in the Europe/Berlin time zone.", "--user")
    run_json(config_file, "add", "The API lives under /api/v2.", "--dir", ACME, "--db",
             str(sample_db))
    prof = run_json(config_file, "profile")
    assert prof["total"] == 3
    assert list(prof["types"]) == ["user", "feedback"]
    fb = prof["types"]["feedback"]
    assert fb["count"] == 2
    assert [m["content"] for m in fb["memories"]] == [
        "Never add emoji to commit messages.", "Answer in British English."]
    assert fb["updated_at"] == fb["memories"][0]["updated_at"]
    assert prof["updated_at"] == max(g["updated_at"] for g in prof["types"].values())
    assert run_json(config_file, "profile") == prof  # deterministic
    code, out = run(config_file, "profile")
    assert code == 0 and "feedback (2, last change" in out and "Berlin" in out


def test_dir_without_a_database_uses_the_stored_project_roots(
        config_file: Path, sample_db: Path, isolated_env: dict[str, str],
        capsys: Any) -> None:
    acme = run_json(config_file, "add", "The API lives under /api/v2.", "--dir", ACME,
                    "--db", str(sample_db))["memory"]
    pipe = run_json(config_file, "add", "The ETL loads parquet nightly.", "--dir", PIPELINE,
                    "--db", str(sample_db))["memory"]
    mine = run_json(config_file, "add", "I prefer tabs.", "--user")["memory"]
    # no database from here on: none configured, none in the (isolated) data dir
    assert run(config_file, "maintain", "--all")[0] == 4
    for folder in (ACME, ACME + "/src/components"):
        assert [m["id"] for m in run_json(config_file, "list", "--dir", folder)] == [acme["id"]]
    hits = run_json(config_file, "search", "api parquet tabs", "--dir", ACME + "/src")
    assert {h["id"] for h in hits} == {acme["id"], mine["id"]}
    capsys.readouterr()
    # nothing stored for that folder: said on stderr, with what the store does hold (exit 5)
    code, out = run(config_file, "list", "--dir", "/tmp/projects/elsewhere")
    err = capsys.readouterr().err
    assert code == 5 and out == ""
    assert "no memories for /tmp/projects/elsewhere's project" in err
    assert f"the store has memories for: {ACME}, {PIPELINE}" in err
    code, out = run(config_file, "search", "tabs", "--dir", "/srv")
    assert code == 5 and mine["id"] not in out
    assert "no memories for /srv's project" in capsys.readouterr().err
    # a parent of two stored roots is neither of them; with --json the error is an object
    code, out = run(config_file, "list", "--dir", "/tmp/projects/sample", "--json")
    error = json.loads(out)["error"]
    assert (code, error["type"], error["exit_code"]) == (5, "NotFoundError", 5)
    assert "no memories for /tmp/projects/sample's project" in error["message"]
    # `add --dir` resolves the same way
    more = run_json(config_file, "add", "The ingest service is written in Go.", "--dir",
                    PIPELINE + "/services/ingest")["memory"]
    assert (more["project_id"], more["project_root"]) == (pipe["project_id"], PIPELINE)
    # a project whose database has sessions but no memories says nothing extra
    run_json(config_file, "list", "--dir", "/tmp/projects/sample/notes-app", "--db",
             str(sample_db))
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- the daemon


@pytest.fixture
def daemon(tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]
           ) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    cfg = tmp_path / "daemon.toml"
    cfg.write_text(f'[opencode]\nsettle_seconds = 0\ndb_paths = ["{sample_db}"]\n'
                   '[extraction]\nmode = "rules"\n[daemon]\nquiet_period_seconds = 1\n'
                   '[dream]\nenabled = false\n')
    proc = start_daemon(cfg, isolated_env)
    state = Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd"
    try:
        assert wait_until(lambda: (state / "daemon.json").exists())
        yield cfg, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_add_forget_profile_through_a_running_daemon(
        daemon: tuple[Path, subprocess.Popen[str]], capsys: Any) -> None:
    cfg, proc = daemon
    # the daemon owns the embedded store: these succeed only through its socket
    added = run_json(cfg, "add", "Hotfixes branch off the latest release tag.", "--dir", ACME)
    assert added["status"] == "added"
    assert run_json(cfg, "add", "Hotfixes branch off the latest release tag.",
                    "--dir", ACME)["status"] == "duplicate"
    run_json(cfg, "add", "I review diffs before committing.", "--user")
    assert run_json(cfg, "profile")["total"] == 1
    mid = added["memory"]["id"]
    assert run_json(cfg, "search", "hotfix branch release tag")[0]["id"] == mid
    assert run_json(cfg, "forget", mid)["memory"]["retired_reason"] == "forgotten"
    assert all(h["id"] != mid for h in run_json(cfg, "search", "hotfix branch release tag"))
    assert {m["id"]: m for m in run_json(cfg, "list", "--all")}[mid]["status"] == "retired"
    capsys.readouterr()
    assert run(cfg, "forget", mid)[0] == 5
    assert "already retired" in capsys.readouterr().err
    assert run(cfg, "forget", str(uuid.uuid4()))[0] == 5
    assert run(cfg, "add", " ", "--user")[0] == 2
    assert "`content` is empty" in capsys.readouterr().err
    assert proc.poll() is None


def test_not_found_is_http_404() -> None:
    from opencode_memoryd.serve.control.protocol import error_status

    assert error_status(NotFoundError("no memory")) == 404
    assert error_status(RequestError("bad")) == 400
