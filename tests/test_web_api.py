"""The web page's REST API over a real Service (embedded store, state file, journal):
every route, the envelope, the error statuses, and the guard (token, Host, CSRF)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import ACME, MANIFEST
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.errors import ConfigError, MemorydError, StoreError
from opencode_memoryd.usecases.service import Service, open_local
from opencode_memoryd.web.api import error_response
from opencode_memoryd.web.app import build_app
from opencode_memoryd.web.token import TOKEN_FILE, csrf_token, load_or_create_token, page_url
from web_seed import FACTS, seed

KEY = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}[ACME]
TOKEN = "t0ken-for-tests"
BASE = "http://127.0.0.1:4747"


@pytest.fixture
def service(config_file: Path, isolated_env: dict[str, str]) -> Iterator[Service]:
    app = App(config=load_config(config_file, None), env=dict(isolated_env))
    with open_local(app) as svc:
        yield svc


@pytest.fixture
def ids(service: Service) -> dict[str, str]:
    return seed(service.store, KEY, ACME, service.app.user_id)


@pytest.fixture
def client(service: Service, ids: dict[str, str]) -> TestClient:
    """Logged in with the bearer token, sending the CSRF token."""
    return TestClient(build_app(service, TOKEN), base_url=BASE,
                      headers={"Authorization": f"Bearer {TOKEN}",
                               "X-CSRF-Token": csrf_token(TOKEN)})


def data(resp: Any, status: int = 200) -> Any:
    """The ``result`` of a success envelope (asserting the status)."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"result"}
    return body["result"]


def err(resp: Any, status: int) -> str:
    """The message of an error envelope, the control socket's (asserting the status)."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message", "kind"}
    assert isinstance(body["error"]["type"], str) and body["error"]["type"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return str(body["error"]["message"])


# -- the routes ---------------------------------------------------------------------------

def test_list_filters_and_pages(client: TestClient, ids: dict[str, str]) -> None:
    page = data(client.get("/api/memories"))
    assert page["total"] == 6 and page["offset"] == 0 and page["limit"] == 50
    # most recently changed first
    assert [m["id"] for m in page["memories"]][:3] == [ids["fact2"], ids["fact1"], ids["fact0"]]
    assert data(client.get("/api/memories", params={"project": KEY}))["total"] == 5
    user = data(client.get("/api/memories", params={"scope": "user"}))
    assert [m["id"] for m in user["memories"]] == [ids["user"]]
    assert data(client.get("/api/memories", params={"type": "feedback"}))["total"] == 1
    found = data(client.get("/api/memories", params={"text": "POSTGRESQL"}))
    assert [m["id"] for m in found["memories"]] == [ids["fact0"]]
    two = data(client.get("/api/memories", params={"offset": 1, "limit": 2}))
    assert two["total"] == 6 and [m["id"] for m in two["memories"]] == [ids["fact1"],
                                                                        ids["fact0"]]
    assert data(client.get("/api/memories", params={"status": "retired"}))["total"] == 0


def test_get_create_forget_restore(client: TestClient, ids: dict[str, str]) -> None:
    shown = data(client.get(f"/api/memories/{ids['fact0']}"))
    assert shown["memory"]["content"] == FACTS[0]
    assert shown["lineage"]["sessions"] == ["ses_seed"]
    made = data(client.post("/api/memories", json={
        "content": "Staging deploys run every night at 02:00 UTC.", "type": "reference",
        "project": KEY}), 201)
    m = made["memory"]
    assert made["status"] == "added" and (m["project_id"], m["project_root"]) == (KEY, ACME)
    assert (m["type"], m["source"]) == ("reference", "manual")
    mine = data(client.post("/api/memories", json={
        "content": "The user writes commit messages in English.", "scope": "user"}), 201)
    assert mine["memory"]["scope"] == "user" and mine["memory"]["type"] == "user"
    gone = data(client.delete(f"/api/memories/{m['id']}"))
    assert gone["status"] == "forgotten" and gone["memory"]["status"] == "retired"
    assert m["id"] not in {x["id"] for x in data(client.get("/api/memories"))["memories"]}
    retired = data(client.get("/api/memories", params={"status": "retired"}))
    assert [x["id"] for x in retired["memories"]] == [m["id"]]
    back = data(client.post(f"/api/memories/{m['id']}/restore"))
    assert back["status"] == "restored" and back["memory"]["status"] == "active"
    assert back["memory"]["retired_reason"] is None
    hits = data(client.get("/api/search", params={"q": "staging deploys nightly"}))
    assert hits[0]["id"] == m["id"]


def test_edit_is_journaled_and_searchable_under_its_new_text(
        client: TestClient, ids: dict[str, str], service: Service) -> None:
    mid = ids["fact0"]
    new = "The dev database is MariaDB 11 on port 3307."
    edited = data(client.patch(f"/api/memories/{mid}", json={"content": new,
                                                            "type": "reference"}))
    m = edited["memory"]
    assert edited["status"] == "edited" and edited["run_id"].startswith("edit-")
    assert (m["id"], m["content"], m["type"]) == (mid, new, "reference")
    # provenance kept, the old version in the history
    assert m["session_ids"] == ["ses_seed"] and m["message_ids"] == ["msg_seed10"]
    assert m["source"] == "llm" and m["created_at"] == "2025-03-01T09:10:00.000Z"
    assert [(h["content"], h["type"], h["run_id"]) for h in m["history"]] == [
        (FACTS[0], "project", edited["run_id"])]
    # searchable under the new text, not under the old
    hits = data(client.get("/api/search", params={"q": "MariaDB"}))
    assert hits and hits[0]["id"] == mid
    assert mid not in {h["id"] for h in data(client.get("/api/search",
                                                        params={"q": "PostgreSQL"}))}
    # journaled as a manual edit, and in the memory's lineage
    journal = data(client.get("/api/journal"))
    entry = journal["entries"][0]
    assert (entry["run_id"], entry["action"], entry["status"]) == (edited["run_id"], "edit",
                                                                   "ok")
    assert entry["operations"][0]["texts"] == [FACTS[0]]
    assert entry["operations"][0]["new_text"] == new
    shown = data(client.get(f"/api/memories/{mid}"))
    assert [d["run_id"] for d in shown["lineage"]["dreams"]] == [edited["run_id"]]
    # the same text again changes nothing and journals nothing
    same = data(client.patch(f"/api/memories/{mid}", json={"content": new}))
    assert same["status"] == "unchanged" and same["run_id"] is None
    assert data(client.get("/api/journal"))["total"] == 1
    # the edit does not open the dream gate's "last dream" (it is no dream)
    assert service.journal.entries()[0]["action"] == "edit"


def test_projects_profile_stats_openapi(client: TestClient, ids: dict[str, str]) -> None:
    p = data(client.get("/api/projects"))
    assert p["projects"] == [{"id": KEY, "root": ACME, "name": "acme-web",
                              "counts": {"active": 5, "retired": 0, "types": {"project": 5}}}]
    assert p["user"]["counts"]["active"] == 1
    prof = data(client.get("/api/profile"))
    assert prof["total"] == 1 and list(prof["types"]) == ["feedback"]
    st = data(client.get("/api/stats"))
    assert st["memories"]["active"] == 6 and st["projects"] == 1
    assert st["journal"]["entries"] == 0
    doc = client.get("/api/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert {"/api/memories", "/api/memories/{memory_id}", "/api/memories/{memory_id}/restore",
            "/api/search", "/api/projects", "/api/profile", "/api/stats", "/api/journal",
            "/api/journal/{run_id}/undo", "/api/session"} <= set(doc["paths"])
    assert set(doc["paths"]["/api/memories/{memory_id}"]) == {"get", "patch", "delete"}


def test_journal_shows_a_dream_and_undo_restores(client: TestClient, ids: dict[str, str],
                                                 service: Service) -> None:
    entry = service.dream(project_key=KEY, project_root=ACME)
    assert entry["status"] == "ok" and entry["counts"]["merged"] == 1, entry
    after = {m["id"] for m in data(client.get("/api/memories"))["memories"]}
    assert len({ids["dup1"], ids["dup2"]} & after) == 1
    page = data(client.get("/api/journal", params={"project": KEY}))
    shown = page["entries"][0]
    assert shown["run_id"] == entry["run_id"] and shown["undone"] is False
    assert any(op["op"] == "merge" for op in shown["operations"])
    undone = data(client.post(f"/api/journal/{entry['run_id']}/undo"))
    assert undone["status"] == "undone"
    after = {m["id"] for m in data(client.get("/api/memories"))["memories"]}
    assert {ids["dup1"], ids["dup2"]} <= after
    entries = data(client.get("/api/journal"))["entries"]
    assert [(e["status"], e["undone"]) for e in entries] == [("undone", False), ("ok", True)]
    # undoing it again is refused: 409
    err(client.post(f"/api/journal/{entry['run_id']}/undo"), 409)


# -- the error envelope -------------------------------------------------------------------

def test_errors_400_404_409(client: TestClient, ids: dict[str, str]) -> None:
    assert "unknown type" in err(client.post("/api/memories", json={
        "content": "x y z", "type": "nonsense", "scope": "user"}), 400)
    assert "unknown field" in err(client.patch(f"/api/memories/{ids['fact1']}",
                                               json={"text": "x"}), 400)
    assert "not valid JSON" in err(client.post("/api/memories", content=b"{nope"), 400)
    assert "limit" in err(client.get("/api/memories", params={"limit": 0}), 400)
    assert "integer" in err(client.get("/api/memories", params={"offset": "x"}), 400)
    assert "unknown status" in err(client.get("/api/memories", params={"status": "gone"}), 400)
    assert "`q`" in err(client.get("/api/search"), 400)
    assert "give `content`" in err(client.patch(f"/api/memories/{ids['fact1']}", json={}), 400)
    err(client.get("/api/memories/00000000-0000-4000-8000-000000000000"), 404)
    err(client.get("/api/memories/not-a-uuid"), 404)
    err(client.delete("/api/memories/00000000-0000-4000-8000-000000000000"), 404)
    err(client.get("/api/nowhere"), 404)
    # a missing memory is the same error whichever route looks for it; a missing route or
    # token is the status's own type
    missing = [client.get("/api/memories/00000000-0000-4000-8000-000000000000"),
               client.delete("/api/memories/00000000-0000-4000-8000-000000000000")]
    assert [r.json()["error"]["type"] for r in missing] == ["NotFoundError"] * 2
    assert client.get("/api/nowhere").json()["error"]["type"] == "NotFound"
    err(client.post("/api/journal/no-such-run/undo"), 404)
    assert "active" in err(client.post(f"/api/memories/{ids['fact1']}/restore"), 409)
    data(client.delete(f"/api/memories/{ids['fact1']}"))
    assert "retired" in err(client.patch(f"/api/memories/{ids['fact1']}",
                                         json={"content": "new words here"}), 409)


@pytest.mark.parametrize("fields", [{"directory": 5}, {"directory": ["/tmp"]},
                                    {"directory": "relative/folder"}, {"project": 5},
                                    {"scope": {}}, {"scope": ["user"]}, {"type": 7}])
def test_create_with_a_field_of_the_wrong_kind_is_a_400(client: TestClient,
                                                        fields: dict[str, Any]) -> None:
    before = data(client.get("/api/stats"))["memories"]["active"]
    err(client.post("/api/memories", json={"content": "The CI runs on Fridays.", **fields}),
        400)
    assert data(client.get("/api/stats"))["memories"]["active"] == before


def test_an_oversized_body_is_refused_whatever_its_declared_length(
        client: TestClient, ids: dict[str, str]) -> None:
    big = b'{"content": "' + b"a" * 70_000 + b'"}'
    assert "over" in err(client.post("/api/memories", content=big), 400)

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked
        yield big[:40_000]
        yield big[40_000:]

    assert "over" in err(client.patch(f"/api/memories/{ids['fact1']}", content=chunks()), 400)
    assert data(client.get(f"/api/memories/{ids['fact1']}"))["memory"]["content"] == FACTS[1]


def test_500_says_what_failed_or_only_that_the_log_has_it() -> None:
    resp = error_response(StoreError("the store is gone"))
    assert resp.status_code == 500 and b'"the store is gone"' in resp.body
    resp = error_response(KeyError("secret internals"))
    assert resp.status_code == 500 and b"secret" not in resp.body
    assert isinstance(StoreError("x"), MemorydError)


# -- the guard ----------------------------------------------------------------------------

def test_no_token_or_a_wrong_one_is_401(service: Service, ids: dict[str, str]) -> None:
    anon = TestClient(build_app(service, TOKEN), base_url=BASE)
    for path in ("/api/memories", "/api/stats", "/api/openapi.json", "/api/session"):
        resp = anon.get(path)
        assert "token" in err(resp, 401) and resp.headers["www-authenticate"] == "Bearer"
    err(anon.get("/api/memories", headers={"Authorization": "Bearer nope"}), 401)
    crumbs = TestClient(build_app(service, TOKEN), base_url=BASE,
                        cookies={"memoryd_token": "nope"})
    err(crumbs.get("/api/memories"), 401)
    err(anon.delete(f"/api/memories/{ids['fact0']}",
                    headers={"X-CSRF-Token": csrf_token(TOKEN)}), 401)
    # the page itself holds no data: served without a token
    page = anon.get("/")
    assert page.status_code == 200 and "opencode-memoryd" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert anon.get("/static/app.js").status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example:4747",
                                  "192.168.1.5:4747", "localhost.:4747", "", "127.1:4747",
                                  "0x7f000001:4747", "2130706433", "[::ffff:127.0.0.1]",
                                  "127.0.0.1:http", "[::1]x"])
def test_a_host_that_is_not_loopback_is_refused(service: Service, host: str) -> None:
    c = TestClient(build_app(service, TOKEN), base_url=BASE)
    headers = {"Authorization": f"Bearer {TOKEN}", "Host": host}
    assert "Host" in err(c.get("/api/memories", headers=headers), 400)
    assert c.get("/", headers={"Host": host}).status_code == 400


@pytest.mark.parametrize("host", ["127.0.0.1:4747", "localhost:4747", "[::1]:4747",
                                  "localhost", "127.0.0.2:4747",
                                  "[0:0:0:0:0:0:0:1]:4747"])
def test_loopback_hosts_pass(service: Service, ids: dict[str, str], host: str) -> None:
    c = TestClient(build_app(service, TOKEN), base_url=BASE)
    data(c.get("/api/stats", headers={"Authorization": f"Bearer {TOKEN}", "Host": host}))


def test_state_changes_need_csrf_and_the_same_origin(service: Service,
                                                     ids: dict[str, str]) -> None:
    c = TestClient(build_app(service, TOKEN), base_url=BASE)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    target = f"/api/memories/{ids['fact0']}"
    # a cross-site form post: no CSRF token
    assert "CSRF" in err(c.delete(target, headers={**auth, "Origin": BASE}), 403)
    assert "CSRF" in err(c.post("/api/memories", headers=auth,
                                json={"content": "a b c", "scope": "user"}), 403)
    assert "CSRF" in err(c.delete(target, headers={**auth, "X-CSRF-Token": "0" * 64}), 403)
    good = {**auth, "X-CSRF-Token": csrf_token(TOKEN)}
    assert "cross-site" in err(c.delete(target, headers={
        **good, "Origin": "http://evil.example"}), 403)
    assert "cross-site" in err(c.delete(target, headers={
        **good, "Origin": "http://localhost:9999"}), 403)
    assert "cross-site" in err(c.delete(target, headers={**good,
                                                         "Sec-Fetch-Site": "cross-site"}), 403)
    assert data(c.get(target, headers=auth))["memory"]["status"] == "active"  # unchanged
    assert data(c.delete(target, headers={**good, "Origin": BASE,
                                          "Sec-Fetch-Site": "same-origin"}))[
        "status"] == "forgotten"


def test_no_cookie_carries_the_token(service: Service, ids: dict[str, str]) -> None:
    """A browser sends a host's cookies to every port of it (cookies know no ports): a
    cookie holding the token would reach any other server on 127.0.0.1, another user's
    too. The page keeps the token in its tab (sessionStorage) and sends it as a bearer."""
    c = TestClient(build_app(service, TOKEN), base_url=BASE)
    resp = c.post("/api/session", headers={"Authorization": f"Bearer {TOKEN}",
                                           "Origin": BASE})
    got = data(resp)
    assert got["token"] not in (TOKEN, "") and got["csrf_token"] != csrf_token(TOKEN)
    assert "set-cookie" not in resp.headers and not c.cookies
    # a cookie with the token (an older page's) is no credential
    crumbs = TestClient(build_app(service, TOKEN), base_url=BASE,
                        cookies={"memoryd_token": TOKEN})
    err(crumbs.get("/api/session"), 401)
    err(crumbs.delete(f"/api/memories/{ids['fact2']}",
                      headers={"X-CSRF-Token": csrf_token(TOKEN)}), 401)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert data(c.get(f"/api/memories/{ids['fact2']}", headers=auth))["memory"][
        "status"] == "active"
    # a login without a token or a code is refused
    err(c.post("/api/session"), 401)


def test_no_cors(client: TestClient) -> None:
    resp = client.options("/api/memories", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "DELETE"})
    assert resp.status_code in (401, 404, 405)
    assert not any(h.lower().startswith("access-control-") for h in resp.headers)
    resp = client.get("/api/stats", headers={"Origin": "http://evil.example"})
    assert not any(h.lower().startswith("access-control-") for h in resp.headers)
    assert resp.headers["cache-control"] == "no-store"


# -- the token file and the config ----------------------------------------------------------

def test_token_file_is_private_and_kept(tmp_path: Path) -> None:
    first = load_or_create_token(tmp_path / "state")
    path = tmp_path / "state" / TOKEN_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) >= 40
    path.chmod(0o644)
    assert load_or_create_token(tmp_path / "state") == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_a_non_loopback_bind_is_a_config_error(tmp_path: Path, host: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[web]\nenabled = true\nhost = "{host}"\n')
    with pytest.raises(ConfigError, match=r"web\.host"):
        load_config(cfg, None)


@pytest.mark.parametrize("host", ["127.0.0.2", "0:0:0:0:0:0:0:1"])
def test_every_loopback_address_the_config_accepts_serves_the_page(
        tmp_path: Path, service: Service, ids: dict[str, str], host: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[web]\nenabled = true\nhost = "{host}"\n')
    web = load_config(cfg, None).web
    base = page_url(web.host, web.port).rstrip("/")
    c = TestClient(build_app(service, TOKEN), base_url=base)
    page = c.post("/api/session", headers={"Authorization": f"Bearer {TOKEN}",
                                           "Origin": base})
    session = data(page)
    assert data(c.delete(f"/api/memories/{ids['fact0']}",
                         headers={"Authorization": f"Bearer {session['token']}",
                                  "X-CSRF-Token": session["csrf_token"],
                                  "Origin": base}))["status"] == "forgotten"


def test_loopback_binds_and_defaults(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[web]\nenabled = true\nhost = "::1"\nport = 0\n')
    web = load_config(cfg, None).web
    assert (web.enabled, web.host, web.port) == (True, "::1", 0)
    cfg.write_text("")
    web = load_config(cfg, None).web
    assert (web.enabled, web.host, web.port) == (False, "127.0.0.1", 4747)
