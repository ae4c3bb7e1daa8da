"""The web page in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright with the system executable) against a real daemon on a sandbox store.

Search finds a memory; editing it in the page changes what ``opencode-memoryd search``
returns; forgetting hides it; the journal shows a dream, and its undo (confirmed in the
browser's dialog) restores the memories; the login page (a one-time code) `web` opens
the browser with logs a fresh browser in once. Screenshots of the main views are saved under
``tests/artifacts/web/`` (or ``$TEST_ARTIFACTS_DIR/web``).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, cli, start_daemon, wait_until, write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, store_dir
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.web.token import WEB_INFO_FILE
from web_seed import DUPLICATE, FACTS, seed

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
KEY = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}[ACME]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR")
                 or Path(__file__).parent / "artifacts") / "web"
NEW_TEXT = "The dev database is MariaDB 11 on port 3307."

pytestmark = pytest.mark.slow


def _browser_or_skip() -> Any:
    """Playwright's sync API, or a skip (a failure under CI, which must have both)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return sync_playwright


@pytest.fixture
def daemon(tmp_path: Path, isolated_env: dict[str, str], sample_db: Path
           ) -> Iterator[dict[str, Any]]:
    """A real daemon serving the page on a free port, over a seeded sandbox store."""
    empty = tmp_path / "no-opencode"
    empty.mkdir()
    cfg = write_config(tmp_path / "config.toml",
                       f'[opencode]\nsettle_seconds = 0\ndata_dir = "{empty}"\n'
                       '[extraction]\nmode = "rules"\n[dream]\nenabled = false\n'
                       '[web]\nenabled = true\nport = 0\n')
    config = load_config(cfg, isolated_env)
    store = EdgeStore(store_dir(config, isolated_env))
    try:
        ids = seed(store, KEY, ACME, App(config=config, env=dict(isolated_env)).user_id)
    finally:
        store.close()
    proc = start_daemon(cfg, isolated_env)
    info_path = state_dir(config, isolated_env) / WEB_INFO_FILE
    try:
        assert wait_until(lambda: info_path.exists() or proc.poll() is not None, 60)
        assert proc.poll() is None, "the daemon exited"
        yield {"cfg": cfg, "ids": ids, "proc": proc, "db": sample_db}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert not info_path.exists()  # removed at shutdown


def run_json(cfg: Path, *args: str) -> Any:
    code, out = cli("--config", str(cfg), *args, "--json")
    assert code == 0, out
    return json.loads(out)


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_search_edit_forget_and_undo_a_dream_in_chromium(
        daemon: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    sync_playwright = _browser_or_skip()
    cfg, ids = daemon["cfg"], daemon["ids"]
    code, out = cli("--config", str(cfg), "web", "--print")
    assert code == 0, out
    url = out.strip()
    assert url.startswith("http://127.0.0.1:") and "#code=" in url
    target = ids["fact0"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            # without the code: the page says how to get in, and shows no data
            page.goto(url.split("#")[0])
            page.wait_for_selector("#login:not([hidden])")
            assert page.locator("#memory-rows tr").count() == 0
            page.goto(url)  # the same page with the code: it starts again
            page.wait_for_selector("body[data-ready='true']")
            assert "#code" not in page.url  # the code left the address bar
            page.wait_for_selector("#scopes button[data-scope='project']")
            assert "acme-web" in page.inner_text("#scopes")
            assert page.locator("#memory-rows tr").count() == 6
            shot(page, "memories")

            # search finds the memory (keyboard: / focuses the search box); unsearched,
            # the table shows it below the first row
            assert page.locator("#memory-rows tr").first.get_attribute("data-id") != target
            page.locator("body").press("/")
            page.keyboard.type("PostgreSQL database")
            page.keyboard.press("Enter")
            row = page.locator(f"#memory-rows tr[data-id='{target}']")
            # the unfiltered table already holds the row: wait for the search's answer,
            # which ranks it first (a timeout fails the test)
            page.wait_for_function(
                "id => document.querySelector('#memory-rows tr')?.dataset.id === id",
                arg=target)
            assert page.locator("#memory-rows tr").first.get_attribute("data-id") == target
            shot(page, "search")

            # edit it in the detail view
            row.focus()
            page.keyboard.press("Enter")
            page.wait_for_selector("#detail:not([hidden]) #edit")
            page.click("#edit")
            page.fill("#edit-content", NEW_TEXT)
            page.click("#save")
            page.wait_for_function(
                "t => document.querySelector('#detail-text')?.textContent === t", arg=NEW_TEXT)
            assert FACTS[0] in page.inner_text(".history")
            shot(page, "detail")
            hits = run_json(cfg, "search", "MariaDB")
            assert hits and hits[0]["id"] == target and hits[0]["content"] == NEW_TEXT
            assert target not in {h["id"] for h in run_json(cfg, "search", "PostgreSQL")}

            # forgetting hides it
            page.click("#forget")
            page.wait_for_function(
                "() => document.querySelector('#detail-status')?.textContent"
                ".startsWith('retired')")
            page.click("#clear")
            page.wait_for_function(
                "id => !document.querySelector(`#memory-rows tr[data-id='${id}']`)"
                " && document.querySelectorAll('#memory-rows tr').length === 5", arg=target)
            assert target not in {m["id"] for m in run_json(cfg, "list")}
            assert target not in {h["id"] for h in run_json(cfg, "search", "MariaDB")}

            # a dream (served by the daemon; the sample database names the project's key)
            # merges the duplicates; the journal shows it
            entry = run_json(cfg, "dream", "--dir", ACME, "--db", str(daemon["db"]))
            assert entry["status"] == "ok" and entry["counts"]["merged"] == 1, entry
            listed = {m["id"] for m in run_json(cfg, "list")}
            assert len({ids["dup1"], ids["dup2"]} & listed) == 1
            page.click("#tab-journal")
            dream = page.locator(f"article[data-run='{entry['run_id']}']")
            dream.wait_for()
            assert "merge" in dream.inner_text() and DUPLICATE[:30] in dream.inner_text()
            assert page.locator("article[data-action='edit']").count() == 1
            shot(page, "journal")

            # undo, confirmed in the browser's dialog, restores both duplicates
            dialogs: list[str] = []

            def accept(d: Any) -> None:
                dialogs.append(d.message)
                d.accept()

            page.on("dialog", accept)
            dream.locator("button.undo").click()
            page.wait_for_selector(f"article[data-run='{entry['run_id']}'] h3:has-text('undone')")
            assert dialogs and entry["run_id"] in dialogs[0]
            listed = {m["id"] for m in run_json(cfg, "list")}
            assert {ids["dup1"], ids["dup2"]} <= listed
            assert errors == []

            # `web` opens the browser with a 0600 login page that holds a one-time code:
            # the page logs in with it once
            opened: list[str] = []
            monkeypatch.setattr("webbrowser.open", lambda u: opened.append(u) or True)
            assert cli("--config", str(cfg), "web")[0] == 0
            assert opened[0].startswith("file://") and "#code=" not in opened[0]
            fresh = browser.new_context().new_page()
            fresh.goto(opened[0])
            fresh.wait_for_selector("body[data-ready='true']")
            assert "#code" not in fresh.url
            fresh.wait_for_selector("#memory-rows tr[data-id]")
            again = browser.new_context().new_page()
            again.goto(opened[0])
            again.wait_for_selector("#login:not([hidden])")
        finally:
            browser.close()
    for name in ("memories", "search", "detail", "journal"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000


def test_the_agents_pending_note_is_confirmed_or_rejected_in_chromium(
        daemon: dict[str, Any], isolated_env: dict[str, str]) -> None:
    sync_playwright = _browser_or_skip()
    cfg = daemon["cfg"]
    as_agent = {**isolated_env, "OPENCODE": "1"}
    notes = {}
    for name, text in (("keep", "The user writes commit messages in English."),
                       ("drop", "The user wants every answer to start with banana.")):
        code, out = cli("--config", str(cfg), "add", "--user", text, "--json", env=as_agent)
        assert code == 0, out
        notes[name] = json.loads(out)["memory"]["id"]
    assert "commit messages" not in run_json(cfg, "context", "--dir", ACME)["text"]
    code, out = cli("--config", str(cfg), "web", "--print")
    assert code == 0, out
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(out.strip())
            page.wait_for_selector("body[data-ready='true']")
            page.wait_for_function("() => document.querySelector('#stats')?.textContent"
                                   ".includes('2 pending your confirmation')")
            for name, button, status in (("keep", "#confirm", "user"),
                                         ("drop", "#reject", "retired")):
                row = page.locator(f"#memory-rows tr[data-id='{notes[name]}']")
                row.wait_for()
                assert "pending" in row.inner_text()
                row.click()
                page.wait_for_selector(f"#detail:not([hidden]) {button}")
                assert "pending your confirmation" in page.inner_text("#detail-provenance")
                if name == "keep":
                    shot(page, "pending")
                page.click(button)
                watched = "#detail-provenance" if status == "user" else "#detail-status"
                page.wait_for_function(
                    "([sel, s]) => document.querySelector(sel)?.textContent.startsWith(s)",
                    arg=[watched, status])
            assert errors == []
        finally:
            browser.close()
    kept = run_json(cfg, "show", notes["keep"])["memory"]
    assert (kept["provenance"], kept["pending"]) == ("user", False)
    dropped = run_json(cfg, "show", notes["drop"])["memory"]
    assert (dropped["status"], dropped["retired_reason"]) == ("retired", "rejected")
    block = run_json(cfg, "context", "--dir", ACME)["text"]
    assert "commit messages in English" in block and "banana" not in block
