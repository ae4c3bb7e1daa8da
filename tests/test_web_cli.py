"""`edit`, `restore` and `web` on the command line, and the web server on a real socket
(uvicorn in its thread, as the daemon runs it)."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ACME, cli, cli_json, write_config
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.usecases.service import open_local
from opencode_memoryd.web import token as token_mod
from opencode_memoryd.web.server import WebServer, start_web
from opencode_memoryd.web.token import TOKEN_FILE, WEB_INFO_FILE, csrf_token


def _run(cfg: Path, *args: str) -> tuple[int, str]:
    return cli("--config", str(cfg), *args)


def test_edit_then_restore_on_the_command_line(config_file: Path, sample_db: Path) -> None:
    added = cli_json("--config", str(config_file), "add",
                     "Releases are tagged vX.Y.Z on the main branch.", "--dir", ACME,
                     "--db", str(sample_db))["memory"]
    edited = cli_json("--config", str(config_file), "edit", added["id"],
                      "Releases are tagged release-X.Y.Z on the trunk.", "--type", "reference")
    m = edited["memory"]
    assert edited["status"] == "edited" and m["type"] == "reference"
    assert m["history"][0]["content"] == "Releases are tagged vX.Y.Z on the main branch."
    hits = cli_json("--config", str(config_file), "search", "release trunk")
    assert hits[0]["id"] == added["id"]
    journal = cli_json("--config", str(config_file), "journal")
    assert journal[0]["action"] == "edit" and journal[0]["run_id"] == edited["run_id"]
    code, out = _run(config_file, "edit", added["id"], "--type", "reference")
    assert code == 0 and out.startswith("unchanged ")
    assert _run(config_file, "edit", added["id"])[0] == 2  # nothing to change
    assert _run(config_file, "restore", added["id"])[0] == 6  # it is active
    assert _run(config_file, "forget", added["id"])[0] == 0
    assert _run(config_file, "edit", added["id"], "new words")[0] == 6  # retired
    code, out = _run(config_file, "restore", added["id"])
    assert code == 0 and out.startswith(f"restored {added['id']}")
    assert added["id"] in {x["id"] for x in cli_json("--config", str(config_file), "list")}
    assert _run(config_file, "restore", "00000000-0000-4000-8000-000000000000")[0] == 5


def test_web_command_when_off_or_not_served(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    off = write_config(tmp_path / "off.toml")
    assert _run(off, "web", "--print")[0] == 1
    assert "enabled = true" in capsys.readouterr().err
    on = write_config(tmp_path / "on.toml", "[web]\nenabled = true\n")
    assert _run(on, "web", "--print")[0] == 1
    assert "no daemon serves the web page" in capsys.readouterr().err


def test_the_server_serves_on_a_loopback_port_and_stops(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path / "c.toml", '[extraction]\nmode = "rules"\n'
                       "[web]\nenabled = true\nport = 0\n")
    app = App(config=load_config(cfg, None), env=dict(isolated_env))
    with open_local(app) as service:
        web = start_web(service, app.config.web, app.state_dir)
        assert isinstance(web, WebServer) and web.url is not None
        try:
            info: dict[str, Any] = json.loads((app.state_dir / WEB_INFO_FILE).read_text())
            token_path = app.state_dir / TOKEN_FILE
            assert stat.S_IMODE(token_path.stat().st_mode) == 0o600
            token = token_path.read_text().strip()
            base = f"http://127.0.0.1:{info['port']}"
            assert web.url == base + "/"
            assert httpx.get(base + "/api/stats").status_code == 401
            auth = {"Authorization": f"Bearer {token}"}
            got = httpx.get(base + "/api/stats", headers=auth).json()
            assert set(got) == {"result"} and got["result"]["memories"]["active"] == 0
            made = httpx.post(base + "/api/memories", headers={
                **auth, "X-CSRF-Token": csrf_token(token), "Origin": base},
                json={"content": "The user likes short answers.", "scope": "user"})
            assert made.status_code == 201, made.text
            # `web --print`: the address with a one-time code, never the token
            code, out = _run(cfg, "web", "--print")
            assert code == 0 and out.strip().startswith(f"{base}/#code=")
            assert token not in out
            login_code = out.strip().split("#code=")[1]
            with httpx.Client(base_url=base) as browser:
                first = browser.post("/api/session", headers={"X-Login-Code": login_code,
                                                              "Origin": base})
                assert first.status_code == 200, first.text
                got = first.json()["result"]
                # a page session of its own: neither the token nor the token's CSRF token
                assert got["token"] != token and got["csrf_token"] != csrf_token(token)
                assert "set-cookie" not in first.headers
                page = {"Authorization": f"Bearer {got['token']}"}
                assert browser.get("/api/stats", headers=page).status_code == 200
            # each code is good once, for two minutes, same-origin only
            again = httpx.post(base + "/api/session", headers={"X-Login-Code": login_code})
            assert again.status_code == 401
            stale = token_mod.login_code(token, time.time() - 300)
            assert httpx.post(base + "/api/session",
                              headers={"X-Login-Code": stale}).status_code == 401
            fresh = token_mod.login_code(token, time.time())
            assert httpx.post(base + "/api/session", headers={
                "X-Login-Code": fresh, "Origin": "http://evil.example"}).status_code == 403
            assert httpx.post(base + "/api/session", headers={
                "X-Login-Code": "1" + fresh}).status_code == 401
            assert httpx.get(base + "/api/stats",  # a code is no token
                             headers={"X-Login-Code": fresh}).status_code == 401
        finally:
            web.stop()
        assert not (app.state_dir / WEB_INFO_FILE).exists()
        with pytest.raises(httpx.TransportError):
            httpx.get(base + "/", timeout=2)
        # a port already taken: logged, not raised; the daemon goes on without the page
        busy = WebServer(service, app.config.web, app.state_dir)
        busy.start()
        try:
            taken = app.config.web.model_copy(update={"port": int(busy.url.rsplit(":", 1)[1]
                                                                  .rstrip("/"))})
            assert start_web(service, taken, app.state_dir) is None
        finally:
            busy.stop()
