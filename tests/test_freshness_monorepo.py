"""Freshness in a monorepo: the manifests of workspace packages count as the project's, so a
dependency that moved from the root manifest into a package is still declared (never marked),
and one that left a package's manifest is marked, naming that manifest. Manifests of vendored,
test and example code are not the project's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import cli_json, write_config
from opencode_memoryd.source.freshness import open_worktree
from opencode_writer import OpenCodeWriter
from test_freshness import git

ROOT_PKG = {"name": "mono", "private": True, "workspaces": ["packages/*"],
            "dependencies": {"zod": "3.0.0"}, "devDependencies": {"turbo": "2.0.0"}}
API_PKG = {"name": "@mono/api", "dependencies": {"express": "4.0.0", "pino": "9.0.0"}}
WEB_PKG = {"name": "@mono/web", "dependencies": {"react": "18.0.0"}}
FIXTURE_PKG = {"name": "fixture", "dependencies": {"left-pad": "1.0.0"}}
FILES = {"package.json": ROOT_PKG, "packages/api/package.json": API_PKG,
         "packages/web/package.json": WEB_PKG, "packages/api/tests/fixtures/package.json":
         FIXTURE_PKG}
SAID = {
    "moved": "Remember that we validate every request body with zod.",
    "gone": "Remember that the api service uses express for routing.",
    "kept": "Remember that the web app is written in react with hooks only.",
}


def make_monorepo(repo: Path) -> str:
    """The monorepo committed; its root commit (OpenCode's project id)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for name, data in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(json.dumps(data, indent=2))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return git(repo, "rev-list", "--max-parents=0", "HEAD")


def change_monorepo(repo: Path) -> None:
    """zod moves from the root into packages/api; express leaves packages/api."""
    root = json.loads(json.dumps(ROOT_PKG))
    del root["dependencies"]["zod"]
    api = json.loads(json.dumps(API_PKG))
    del api["dependencies"]["express"]
    api["dependencies"]["zod"] = "3.0.0"
    (repo / "package.json").write_text(json.dumps(root, indent=2))
    (repo / "packages/api/package.json").write_text(json.dumps(api, indent=2))


def test_the_workspace_manifests_are_read_then_and_now(tmp_path: Path) -> None:
    repo = tmp_path / "mono"
    make_monorepo(repo)
    rev = git(repo, "rev-parse", "HEAD")
    change_monorepo(repo)
    wt = open_worktree(str(repo))
    assert wt is not None
    then, now = wt.declared_at(rev), wt.declared_now()
    assert then.where("express", "dependency") == ["packages/api/package.json"]
    assert now.where("express", "dependency") == []
    assert then.where("zod", "dependency") == ["package.json"]
    assert now.where("zod", "dependency") == ["packages/api/package.json"]
    # a test fixture's manifest is not the project's
    assert then.where("left-pad", "dependency") == []
    assert "packages/api/tests/fixtures/package.json" not in now.files


@pytest.fixture
def captured(tmp_path: Path, sample_db: Path) -> tuple[Path, Path, dict[str, str]]:
    """(config, repo, memory id by name): the rules captured :data:`SAID` in the monorepo."""
    repo = tmp_path / "mono"
    pid = make_monorepo(repo)
    w = OpenCodeWriter(sample_db)
    sid = w.new_session(project_id=pid, directory=str(repo), worktree=str(repo))
    for text in SAID.values():
        w.append_turn(sid, text, "Noted.")
    w.close()
    cfg = write_config(tmp_path / "cfg.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
""")
    cli_json("--config", str(cfg), "maintain", "--dir", str(repo))
    facts = [m for m in cli_json("--config", str(cfg), "list") if m["project_root"] == str(repo)]
    keys = {"moved": "zod", "gone": "express", "kept": "react"}
    ids = {name: next(m["id"] for m in facts if keys[name] in m["content"]) for name in SAID}
    return cfg, repo, ids


def test_a_dream_marks_what_left_a_package_not_what_moved(
        captured: tuple[Path, Path, dict[str, str]]) -> None:
    cfg, repo, ids = captured
    change_monorepo(repo)
    entry: dict[str, Any] = cli_json("--config", str(cfg), "dream", "--dir", str(repo))
    assert entry["freshness"]["stale"] == 1
    mems = {m["id"]: m for m in cli_json("--config", str(cfg), "list", "--all")}
    marks = {name: mems[ids[name]]["stale"] for name in SAID}
    assert [(m["what"], m["where"]) for m in marks["gone"]] == [
        ("express", "packages/api/package.json")]
    assert not marks["moved"] and not marks["kept"]
