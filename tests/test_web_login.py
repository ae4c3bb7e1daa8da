"""The page's login and sessions: `web` starts a browser whose command line another user
of the machine can read, so nothing on it may log in; a login code is good once; a page
session's token is replaced now and then, and a session ends when idle and at its limit.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx
import pytest
from starlette.testclient import TestClient

from conftest import write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.web import WebConfig
from opencode_memoryd.errors import StateError
from opencode_memoryd.usecases.service import Service, open_local
from opencode_memoryd.web.app import build_app
from opencode_memoryd.web.server import WebServer
from opencode_memoryd.web.sessions import GRACE_SECONDS, ROTATED_HEADER
from opencode_memoryd.web.token import (
    LOGIN_PAGE_FILE,
    TOKEN_FILE,
    load_or_create_token,
    login_code,
)

BASE = "http://127.0.0.1:4747"
TOKEN = "t0ken-for-tests"
#: What a login code looks like (``<seconds>.<64 hex>``).
CODE_RE = re.compile(r"\d+\.[0-9a-f]{64}")
FAKE_BROWSER = """#!/bin/sh
# records its own command line as /proc shows it to every user, NUL-separated
cat /proc/$$/cmdline > "$0.argv"
"""


@pytest.fixture
def served(tmp_path: Path, isolated_env: dict[str, str]) -> Iterator[tuple[Path, str, App]]:
    """A config with the page on, and the page served on a free port: ``(config file,
    the page's base address, the app)``."""
    cfg = write_config(tmp_path / "c.toml", '[extraction]\nmode = "rules"\n'
                       "[web]\nenabled = true\nport = 0\n")
    app = App(config=load_config(cfg, None), env=dict(isolated_env))
    with open_local(app) as service:
        web = WebServer(service, app.config.web, app.state_dir)
        web.start()
        try:
            assert web.url is not None
            yield cfg, web.url.rstrip("/"), app
        finally:
            web.stop()


def _login(base: str, code: str) -> httpx.Response:
    return httpx.post(base + "/api/session", headers={"X-Login-Code": code, "Origin": base})


def test_the_browser_command_line_holds_nothing_that_logs_in(
        served: tuple[Path, str, App], tmp_path: Path, isolated_env: dict[str, str]) -> None:
    cfg, base, app = served
    browser = tmp_path / "browser.sh"
    browser.write_text(FAKE_BROWSER)
    browser.chmod(0o755)
    env = {**isolated_env, "BROWSER": str(browser), "DISPLAY": ""}
    run = subprocess.run([sys.executable, "-m", "opencode_memoryd", "--config", str(cfg),
                          "web"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    argv = Path(str(browser) + ".argv").read_bytes().split(b"\0")
    seen = b" ".join(argv).decode()
    token = (app.state_dir / TOKEN_FILE).read_text().strip()
    # what another user reads in /proc/<pid>/cmdline: no token, no code, nothing that
    # logs in (each word, and each fragment of one, tried as a code)
    assert token not in seen and not CODE_RE.search(seen)
    tried = {w.decode() for w in argv if w} | {w.decode().rpartition("#code=")[2]
                                               for w in argv if w}
    for word in tried:
        assert _login(base, word).status_code == 401, word
    # the browser got the path of a 0600 file of ours, which holds the code
    [uri] = [w.decode() for w in argv if w.startswith(b"file://")]
    page = Path(unquote(urlparse(uri).path))
    assert page == app.state_dir / LOGIN_PAGE_FILE
    assert stat.S_IMODE(page.stat().st_mode) == 0o600 and page.stat().st_uid == os.getuid()
    assert run.stdout.strip() == base + "/"  # the address, no secret in it either
    [code] = set(CODE_RE.findall(page.read_text()))
    first = _login(base, code)
    assert first.status_code == 200, first.text
    bearer = {"Authorization": f"Bearer {first.json()['result']['token']}"}
    assert httpx.get(base + "/api/stats", headers=bearer).status_code == 200
    # replayed: refused
    again = _login(base, code)
    assert again.status_code == 401 and "used or expired" in again.json()["error"]["message"]


def test_the_login_page_replaces_a_symlink_and_never_follows_it(
        served: tuple[Path, str, App], tmp_path: Path, isolated_env: dict[str, str]) -> None:
    cfg, _, app = served
    elsewhere = tmp_path / "elsewhere.html"
    elsewhere.write_text("kept\n")
    (app.state_dir / LOGIN_PAGE_FILE).symlink_to(elsewhere)
    browser = tmp_path / "browser.sh"
    browser.write_text(FAKE_BROWSER)
    browser.chmod(0o755)
    run = subprocess.run([sys.executable, "-m", "opencode_memoryd", "--config", str(cfg),
                          "web"], env={**isolated_env, "BROWSER": str(browser)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert elsewhere.read_text() == "kept\n"
    page = app.state_dir / LOGIN_PAGE_FILE
    assert not page.is_symlink() and CODE_RE.search(page.read_text())


class Clock:
    """Monotonic seconds a test moves on by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def service(config_file: Path, isolated_env: dict[str, str]) -> Iterator[Service]:
    app = App(config=load_config(config_file, None), env=dict(isolated_env))
    with open_local(app) as svc:
        yield svc


def _page(service: Service, clock: Clock) -> tuple[TestClient, dict[str, str]]:
    """A client logged in as the page is (with the access token): ``(client, the
    session's headers)``."""
    cfg = WebConfig(session_idle_seconds=600, session_max_seconds=3600,
                    session_rotate_seconds=300)
    c = TestClient(build_app(service, TOKEN, cfg, clock=clock), base_url=BASE)
    got = c.post("/api/session", headers={"Authorization": f"Bearer {TOKEN}",
                                          "Origin": BASE})
    assert got.status_code == 200, got.text
    data = got.json()["result"]
    assert data["token"] != TOKEN and (data["idle_seconds"], data["max_seconds"]) == (600,
                                                                                      3600)
    return c, {"Authorization": f"Bearer {data['token']}", "X-CSRF-Token": data["csrf_token"],
               "Origin": BASE}


def _get(c: TestClient, page: dict[str, str]) -> httpx.Response:
    """``GET /api/stats`` as the page does it: a rotated token replaces the tab's."""
    got = c.get("/api/stats", headers=page)
    if ROTATED_HEADER.lower() in got.headers:
        page["Authorization"] = f"Bearer {got.headers[ROTATED_HEADER]}"
    return got


def test_an_idle_session_ends(service: Service) -> None:
    clock = Clock()
    c, page = _page(service, clock)
    clock.now += 590
    assert _get(c, page).status_code == 200  # activity: still on
    clock.now += 590
    assert _get(c, page).status_code == 200
    clock.now += 601
    ended = c.get("/api/stats", headers=page)
    assert ended.status_code == 401 and "without a request" in ended.json()["error"]["message"]
    assert "session_idle_seconds" in ended.json()["error"]["message"]
    # and for good, whatever comes next
    assert c.get("/api/stats", headers=page).status_code == 401


def test_a_session_ends_at_its_limit_however_active(service: Service) -> None:
    clock = Clock()
    c, page = _page(service, clock)
    token = page["Authorization"]
    while clock.now < 1000 + 3590:
        clock.now += 200
        assert _get(c, page).status_code == 200
    assert page["Authorization"] != token  # rotated on the way
    clock.now += 200
    ended = c.get("/api/stats", headers=page)
    assert ended.status_code == 401 and "session_max_seconds" in ended.json()["error"]["message"]


def test_the_session_token_rotates_and_the_old_one_then_stops(service: Service) -> None:
    clock = Clock()
    c, page = _page(service, clock)
    old = dict(page)
    first = c.get("/api/stats", headers=page)
    assert first.status_code == 200 and ROTATED_HEADER.lower() not in first.headers
    clock.now += 301
    due = c.get("/api/stats", headers=page)
    assert due.status_code == 200
    new = due.headers[ROTATED_HEADER]
    assert new not in (old["Authorization"][7:], TOKEN)
    page["Authorization"] = f"Bearer {new}"
    # the same session: its CSRF token still goes with the new token
    made = c.post("/api/memories", headers=page,
                  json={"content": "The user likes short answers.", "scope": "user"})
    assert made.status_code == 201, made.text
    # the old token: good for requests already under way, then never again
    clock.now += GRACE_SECONDS / 2
    assert c.get("/api/stats", headers=old).status_code == 200
    clock.now += GRACE_SECONDS
    gone = c.get("/api/stats", headers=old)
    assert gone.status_code == 401 and "expired" in gone.json()["error"]["message"]
    assert c.get("/api/stats", headers=page).status_code == 200
    # a session's CSRF token is its own: another login's does not pass
    _, other = _page(service, clock)
    crossed = c.post("/api/memories", headers={**page, "X-CSRF-Token": other["X-CSRF-Token"]},
                     json={"content": "The user likes long answers.", "scope": "user"})
    assert crossed.status_code == 403


def test_a_token_file_that_is_a_symlink_is_neither_followed_nor_chmod_ed(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not-a-token-of-ours\n")
    elsewhere.chmod(0o644)
    (state / TOKEN_FILE).symlink_to(elsewhere)
    with pytest.raises(StateError, match=TOKEN_FILE):
        load_or_create_token(state)
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o644


def test_a_code_made_before_the_server_started_is_refused(service: Service) -> None:
    """The codes a server took are known to it alone: one taken before a restart could
    otherwise be replayed after it."""
    before = login_code(TOKEN, time.time() - 10)
    c = TestClient(build_app(service, TOKEN), base_url=BASE)
    stale = c.post("/api/session", headers={"X-Login-Code": before, "Origin": BASE})
    assert stale.status_code == 401 and "used or expired" in stale.json()["error"]["message"]
    fresh = c.post("/api/session", headers={"X-Login-Code": login_code(TOKEN, time.time()),
                                            "Origin": BASE})
    assert fresh.status_code == 200, fresh.text
