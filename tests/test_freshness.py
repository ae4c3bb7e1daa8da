"""Freshness against the code: memories captured by the rules from a real OpenCode
database, about a real git worktree; a dream marks those naming a path, dependency or
script the worktree no longer has, every place shows the mark, and the next dream clears
it when the thing is back. Nothing is ever retired for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import cli, cli_json, start_daemon, wait_until, write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.service import open_local
from opencode_memoryd.web.app import build_app
from opencode_memoryd.web.token import csrf_token
from opencode_writer import OpenCodeWriter

PACKAGE = {"name": "shop", "scripts": {"build": "tsc", "test:unit": "vitest run"},
           "dependencies": {"hono": "4.0.0"},
           "devDependencies": {"jest": "29.0.0", "typescript": "5.4.0"}}
PYPROJECT = '[project]\nname = "shop-tools"\ndependencies = ["requests>=2", "Flask_Login"]\n'
PNPM_LOCK = """\
lockfileVersion: '9.0'
importers:
  .:
    dependencies:
      hono:
        specifier: 4.0.0
        version: 4.0.0
packages:
  hono@4.0.0:
    resolution: {integrity: sha512-aaa}
  esbuild@0.21.5:
    resolution: {integrity: sha512-bbb}
"""
FILES = {"package.json": json.dumps(PACKAGE, indent=2), "pyproject.toml": PYPROJECT,
         "pnpm-lock.yaml": PNPM_LOCK, "src/legacy/api.ts": "export {}\n",
         "docs/setup.md": "# Setup\n", "Makefile": "lint:\n\truff check .\n"}
#: What the user says (rules mode stores each as one memory), by name.
SAID = {
    "path": "Remember that the old API client lives in `src/legacy/api.ts`.",
    "dep": "Remember that we use Jest for the snapshot tests.",
    "lock": "Remember that the `esbuild` package does the bundling under the hood.",
    "script": "From now on always run `pnpm test:unit` before pushing.",
    "docs": "Remember that the setup notes are in docs/setup.md.",
    "plain": "Remember that we deploy on Fridays after the standup.",
    "make": "From now on always run `make lint` before a commit.",
    "py": "Remember that the scraper uses requests, never urllib.",
}
KEYS = {"path": "src/legacy", "dep": "Jest", "lock": "esbuild", "script": "pnpm test",
        "docs": "docs/setup", "plain": "Fridays", "make": "make lint", "py": "scraper"}
STALE = {"path", "dep", "lock", "script"}
EARLIER = "2026-01-02T10:00:00+00:00"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test",
           "GIT_AUTHOR_DATE": EARLIER, "GIT_COMMITTER_DATE": EARLIER}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def make_repo(repo: Path) -> str:
    """A git worktree with :data:`FILES` committed (before anything was said); its root
    commit, OpenCode's project id."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return git(repo, "rev-list", "--max-parents=0", "HEAD")


def change_worktree(repo: Path) -> None:
    """Remove the file, the dependency, the lockfile-only package; rename the script."""
    (repo / "src/legacy/api.ts").unlink()
    (repo / "src/legacy").rmdir()
    pkg = json.loads(json.dumps(PACKAGE))
    del pkg["devDependencies"]["jest"]
    pkg["devDependencies"]["vitest"] = "1.6.0"
    pkg["scripts"]["test:units"] = pkg["scripts"].pop("test:unit")
    (repo / "package.json").write_text(json.dumps(pkg, indent=2))
    (repo / "pnpm-lock.yaml").write_text(PNPM_LOCK.replace(
        "  esbuild@0.21.5:\n    resolution: {integrity: sha512-bbb}\n", ""))


def restore_worktree(repo: Path) -> None:
    """Put everything back as it was committed."""
    git(repo, "checkout", "--", ".")


@pytest.fixture
def setup(tmp_path: Path, sample_db: Path) -> tuple[Path, Path, dict[str, str]]:
    """(config, repo, memory id by name): the rules captured :data:`SAID` from an OpenCode
    session of the repo."""
    repo = tmp_path / "shop"
    pid = make_repo(repo)
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
    ids = {}
    facts = [m for m in cli_json("--config", str(cfg), "list") if m["project_root"] == str(repo)]
    for name in SAID:
        found = [m for m in facts if KEYS[name] in m["content"]]
        assert len(found) == 1, (name, [m["content"] for m in facts])
        ids[name] = found[0]["id"]
    return cfg, repo, ids


def _by_id(cfg: Path) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in cli_json("--config", str(cfg), "list", "--all")}


def _dream(cfg: Path, repo: Path) -> dict[str, Any]:
    entry: dict[str, Any] = cli_json("--config", str(cfg), "dream", "--dir", str(repo))
    return entry


def test_each_kind_is_marked_shown_everywhere_and_cleared_when_back(
        setup: tuple[Path, Path, dict[str, str]]) -> None:
    cfg, repo, ids = setup
    first = _dream(cfg, repo)  # nothing changed yet: nothing is marked
    assert first["freshness"]["stale"] == 0 and first["freshness"]["checked"] == len(SAID)
    assert all(not m["stale"] for m in _by_id(cfg).values())

    change_worktree(repo)
    code, out = cli("--config", str(cfg), "dream", "--dir", str(repo))
    assert code == 0 and (f"  freshness: {len(STALE)} may be out of date ({len(STALE)} newly "
                          "marked, 0 cleared, 0 unknown)") in out
    entry = cli_json("--config", str(cfg), "journal")[0]
    assert entry["freshness"]["marked"] == len(STALE)
    mems = _by_id(cfg)
    marks = {name: mems[ids[name]]["stale"] for name in SAID}
    today = datetime.now(UTC).date().isoformat()
    assert marks["path"] == [{"kind": "path", "what": "src/legacy/api.ts", "where": "",
                              "since": today}]
    assert marks["dep"] == [{"kind": "dependency", "what": "Jest", "where": "package.json",
                             "since": today}]
    assert marks["lock"] == [{"kind": "dependency", "what": "esbuild",
                              "where": "pnpm-lock.yaml", "since": today}]
    assert marks["script"] == [{"kind": "script", "what": "test:unit",
                                "where": "package.json", "since": today}]
    assert {n for n, m in marks.items() if m} == STALE
    assert all(m["status"] == "active" for m in mems.values())  # never retired

    # the context block: inside the fence, the name quoted like memory text
    code, block = cli("--config", str(cfg), "context", "--dir", str(repo))
    assert code == 0
    line = next(x for x in block.splitlines() if "src/legacy/api.ts" in x)
    assert line.endswith(f'(may be out of date: "src/legacy/api.ts" changed on {today} '
                         "(no longer in the worktree))")
    assert block.count("may be out of date:") == len(STALE)
    assert 'Jest" changed on' in block and "(no longer in package.json)" in block
    assert "(no longer a script of package.json)" in block
    # search and show, text and JSON
    code, out = cli("--config", str(cfg), "search", "snapshot tests", "--dir", str(repo))
    assert f"may be out of date: Jest changed on {today} (no longer in package.json)" in out
    hits = cli_json("--config", str(cfg), "search", "snapshot tests", "--dir", str(repo))
    assert hits[0]["id"] == ids["dep"] and hits[0]["stale"] == marks["dep"]
    code, out = cli("--config", str(cfg), "show", ids["lock"])
    assert (f"may be out of date: esbuild changed on {today} (no longer in pnpm-lock.yaml)"
            in out)
    code, out = cli("--config", str(cfg), "list")
    assert out.count("may be out of date:") == len(STALE)
    # doctor lists them
    doctor = cli_json("--config", str(cfg), "doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "freshness")
    assert check["status"] == "warn"
    assert check["detail"].startswith(f"{len(STALE)} memories may be out of date: ")
    assert "src/legacy/api.ts" in check["detail"]

    # the mark keeps its first day while the thing stays gone; back -> cleared
    again = _dream(cfg, repo)
    assert again["freshness"]["marked"] == 0 and again["freshness"]["stale"] == len(STALE)
    restore_worktree(repo)
    back = _dream(cfg, repo)
    assert back["freshness"]["cleared"] == len(STALE) and back["freshness"]["stale"] == 0
    assert all(not m["stale"] and m["status"] == "active" for m in _by_id(cfg).values())
    code, block = cli("--config", str(cfg), "context", "--dir", str(repo))
    assert "may be out of date:" not in block
    doctor = cli_json("--config", str(cfg), "doctor")
    assert next(c for c in doctor["checks"] if c["name"] == "freshness")["status"] == "ok"


def test_the_page_and_mcp_answers_carry_the_mark(
        setup: tuple[Path, Path, dict[str, str]], isolated_env: dict[str, str]) -> None:
    cfg, repo, ids = setup
    change_worktree(repo)
    _dream(cfg, repo)
    from opencode_memoryd.serve.mcp.tool import _memory

    app = App(config=load_config(cfg, None), env=dict(isolated_env))
    with open_local(app) as svc:
        client = TestClient(build_app(svc, "tok"), base_url="http://127.0.0.1:4747",
                            headers={"Authorization": "Bearer tok",
                                     "X-CSRF-Token": csrf_token("tok")})
        shown = client.get(f"/api/memories/{ids['path']}").json()["result"]["memory"]
        listed = client.get("/api/memories").json()["result"]["memories"]
        script = (Path(__file__).parents[1] / "daemon/opencode_memoryd/web/static/app.js"
                  ).read_text()
    assert shown["stale"][0]["what"] == "src/legacy/api.ts"
    assert sum(1 for m in listed if m["stale"]) == len(STALE)
    assert "staleNote(m)" in script and 'id: "detail-stale"' in script
    answer = _memory(shown)
    assert answer["outOfDate"].startswith("may be out of date: src/legacy/api.ts changed on ")
    assert "outOfDate" not in _memory({**shown, "stale": []})


def test_a_missing_worktree_marks_nothing_and_clears_nothing(
        setup: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    cfg, repo, ids = setup
    change_worktree(repo)
    _dream(cfg, repo)
    moved = tmp_path / "elsewhere"
    shutil.move(str(repo), str(moved))
    entry = _dream(cfg, repo)
    assert entry["freshness"]["checked"] == 0 and entry["freshness"]["unknown"] == len(SAID)
    assert entry["freshness"]["marked"] == entry["freshness"]["cleared"] == 0
    # marks from before stay as they were: unknown is neither stale nor fresh
    assert {n for n in SAID if _by_id(cfg)[ids[n]]["stale"]} == STALE


def test_a_worktree_that_was_never_seen_stale_marks_nothing(
        setup: tuple[Path, Path, dict[str, str]]) -> None:
    cfg, repo, _ids = setup
    shutil.rmtree(repo)  # gone before the first dream
    entry = _dream(cfg, repo)
    assert entry["freshness"]["stale"] == 0
    assert all(not m["stale"] for m in _by_id(cfg).values())


def test_the_switch_turns_the_check_off(setup: tuple[Path, Path, dict[str, str]]) -> None:
    cfg, repo, _ids = setup
    cfg.write_text(cfg.read_text() + "[dream]\ncheck_freshness = false\n")
    change_worktree(repo)
    entry = _dream(cfg, repo)
    assert "freshness" not in entry
    assert all(not m["stale"] for m in _by_id(cfg).values())


def test_a_scheduled_dream_of_the_running_daemon_marks_them(
        setup: tuple[Path, Path, dict[str, str]], isolated_env: dict[str, str]) -> None:
    cfg, repo, ids = setup
    cfg.write_text(cfg.read_text() + "[dream]\nmin_new_memories = 1\n"
                                      "check_interval_minutes = 600\n")
    change_worktree(repo)
    proc = start_daemon(cfg, isolated_env)
    try:
        def dreamed() -> bool:
            code, out = cli("--config", str(cfg), "journal", "--json")
            return code == 0 and any(e.get("freshness") for e in json.loads(out))
        assert wait_until(dreamed, timeout=90)
        entry = next(e for e in cli_json("--config", str(cfg), "journal")
                     if e.get("freshness"))
        assert entry["trigger"] in ("auto", "catch-up")
        assert entry["freshness"]["marked"] == len(STALE)
        listed = {m["id"]: m for m in cli_json("--config", str(cfg), "list")}  # the daemon's
        assert {n for n in SAID if listed[ids[n]]["stale"]} == STALE
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_an_edit_drops_the_mark_and_the_next_dream_judges_the_new_text(
        setup: tuple[Path, Path, dict[str, str]]) -> None:
    cfg, repo, ids = setup
    change_worktree(repo)
    _dream(cfg, repo)
    assert _by_id(cfg)[ids["path"]]["stale"]
    edited = cli_json("--config", str(cfg), "edit", ids["path"],
                      "The API client moved to src/api.ts.")
    assert edited["status"] == "edited" and not edited["memory"]["stale"]
    cli_json("--config", str(cfg), "edit", ids["plain"],
             "We deploy on Fridays; the deploy notes are in src/legacy/api.ts.")
    dreamed = _dream(cfg, repo)
    assert dreamed["freshness"]["marked"] == 1 and dreamed["freshness"]["cleared"] == 0
    mems = _by_id(cfg)
    assert not mems[ids["path"]]["stale"]
    assert [m["what"] for m in mems[ids["plain"]]["stale"]] == ["src/legacy/api.ts"]


@pytest.mark.slow
def test_the_page_shows_the_mark_in_chromium(
        setup: tuple[Path, Path, dict[str, str]], isolated_env: dict[str, str]) -> None:
    from test_web_browser import CHROMIUM, CHROMIUM_ARGS, _browser_or_skip

    sync_playwright = _browser_or_skip()
    cfg, repo, ids = setup
    change_worktree(repo)
    _dream(cfg, repo)
    cfg.write_text(cfg.read_text() + "[dream]\nenabled = false\n[web]\nenabled = true\n"
                                      "port = 0\n")
    proc = start_daemon(cfg, isolated_env)
    try:
        def url() -> str:
            code, out = cli("--config", str(cfg), "web", "--print")
            return out.strip() if code == 0 and "#code=" in out else ""
        assert wait_until(url, timeout=60)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(url())
                page.wait_for_selector("body[data-ready='true']")
                row = page.locator(f"#memory-rows tr[data-id='{ids['path']}']")
                row.wait_for()
                note = row.locator(".stale").inner_text()
                assert note.startswith(" (may be out of date: src/legacy/api.ts changed on ")
                assert note.endswith(" (no longer in the worktree))")
                assert page.locator(
                    f"#memory-rows tr[data-id='{ids['plain']}'] .stale").count() == 0
                row.click()
                page.wait_for_selector("#detail:not([hidden]) #detail-stale")
                assert page.inner_text("#detail-stale").startswith(
                    "may be out of date: src/legacy/api.ts changed on ")
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_project_whose_gate_is_closed_is_still_checked_by_the_daemon(
        setup: tuple[Path, Path, dict[str, str]], isolated_env: dict[str, str]) -> None:
    cfg, repo, ids = setup
    cfg.write_text(cfg.read_text() + "[dream]\nmin_new_memories = 100\n"
                                      "check_interval_minutes = 600\n")
    change_worktree(repo)
    proc = start_daemon(cfg, isolated_env)
    try:
        def marked() -> bool:
            code, out = cli("--config", str(cfg), "list", "--json")
            return code == 0 and sum(1 for m in json.loads(out) if m["stale"]) == len(STALE)
        assert wait_until(marked, timeout=90)
        listed = {m["id"]: m for m in cli_json("--config", str(cfg), "list")}
        assert {n for n in SAID if listed[ids[n]]["stale"]} == STALE
        assert cli_json("--config", str(cfg), "journal") == []  # no dream ran
    finally:
        proc.terminate()
        proc.wait(timeout=30)
