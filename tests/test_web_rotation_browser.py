"""The page follows its session token's rotation, in a real browser (headless Chromium):
the server's clock is a test clock, moved past the rotation and then past the old token's
grace; the page keeps working on the new token, and an idle session sends it back to the
login."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from conftest import ACME, MANIFEST
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.web import WebConfig
from opencode_memoryd.usecases.service import open_local
from opencode_memoryd.web.app import build_app
from opencode_memoryd.web.sessions import GRACE_SECONDS
from test_web_browser import CHROMIUM, CHROMIUM_ARGS, _browser_or_skip
from web_seed import seed

pytestmark = pytest.mark.slow

KEY = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}[ACME]
TOKEN = "t0ken-for-the-rotation-test"


class Clock:
    """Monotonic seconds the test moves on by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def served(config_file: Path, isolated_env: dict[str, str]) -> Iterator[tuple[str, Clock]]:
    """The page over a seeded store on a free loopback port, on a test clock."""
    app = App(config=load_config(config_file, None), env=dict(isolated_env))
    clock = Clock()
    cfg = WebConfig(session_idle_seconds=600, session_max_seconds=3600,
                    session_rotate_seconds=300)
    with open_local(app) as service:
        seed(service.store, KEY, ACME, service.app.user_id)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        server = uvicorn.Server(uvicorn.Config(build_app(service, TOKEN, cfg, clock=clock),
                                               lifespan="off", log_config=None,
                                               access_log=False))
        thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}", clock
        finally:
            server.should_exit = True
            thread.join(timeout=10)
            sock.close()


def test_the_page_follows_the_rotation_and_an_idle_session_ends(
        served: tuple[str, Clock]) -> None:
    sync_playwright = _browser_or_skip()
    base, clock = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/#token={TOKEN}")
            page.wait_for_selector("body[data-ready='true']")
            page.wait_for_selector("#memory-rows tr[data-id]")
            first = page.evaluate("sessionStorage.getItem('memoryd-token')")
            assert first and first != TOKEN  # a session token, not the access token

            def show(view: str) -> Any:
                with page.expect_response(lambda r: "/api/" in r.url) as answer:
                    page.click(f"#tab-{view}")
                return answer.value

            clock.now += 301  # past the rotation: the next answer carries a new token
            assert show("journal").headers.get("x-session-token")
            page.wait_for_function(
                "t => sessionStorage.getItem('memoryd-token') !== t", arg=first)
            second = page.evaluate("sessionStorage.getItem('memoryd-token')")
            clock.now += GRACE_SECONDS + 1  # the first token is no good any more
            assert show("memories").ok
            page.wait_for_selector("#memory-rows tr[data-id]")
            assert page.is_hidden("#login")
            assert page.evaluate("sessionStorage.getItem('memoryd-token')") == second
            clock.now += 601  # idle: the session ends, the page says how to get in
            assert show("journal").status == 401
            page.wait_for_selector("#login:not([hidden])")
            assert "session_idle_seconds" in page.inner_text("#login-reason")
            assert page.evaluate("sessionStorage.getItem('memoryd-token')") is None
            assert errors == []
        finally:
            browser.close()
