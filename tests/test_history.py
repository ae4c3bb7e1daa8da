"""The read-only history browser on the real OpenCode sample database: sessions, messages
(paged), text search and compaction checkpoints, through the Service, the control socket
and the CLI; redaction of planted secrets; bad arguments and unknown sessions."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, PIPELINE, cli, cli_json
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.errors import NotFoundError, RemoteError, RequestError, SourceError
from opencode_memoryd.serve.control.client import ControlClient
from opencode_memoryd.serve.control.server import ControlServer
from opencode_memoryd.usecases.service import ROUTES, Service, call, open_local
from opencode_writer import OpenCodeWriter

SESSIONS = {s["key"]: s for s in MANIFEST["sessions"]}
ACME_ID = next(p["project_id"] for p in MANIFEST["projects"] if p["name"] == "acme-web")
AUTO = SESSIONS["ingest-autocompact"]["id"]
MANUAL = SESSIONS["ingest-nested"]["id"]
TODOS = SESSIONS["web-todos-subagent"]["id"]
SUBAGENT = SESSIONS["web-todos-subagent/subagent-1"]["id"]
SCRATCH = "/tmp/projects/sample/scratch"
AWS_KEY = "AKIAIOSFODNN7EXAMPLF"
GH_TOKEN = "ghp_" + "x7Rk2Lq9Zt4Wm8Np3Vb6Yc1Hd5Jf0Gs2Ke7A"


@pytest.fixture
def service(isolated_env: dict[str, str]) -> Iterator[Service]:
    """A one-shot Service (state file and embedded store in the isolated home)."""
    app = App(config=load_config(None, isolated_env), env=isolated_env)
    with open_local(app) as svc:
        yield svc


def route(svc: Service, name: str, **payload: Any) -> Any:
    """Call a route the way the control socket does (a JSON payload)."""
    return call(svc, name, json.loads(json.dumps(payload)))


def db_messages(db: Path, session_id: str) -> list[tuple[str, str]]:
    """(id, role) of every message of a session, in OpenCode's order, read directly."""
    with sqlite3.connect(db) as c:
        return [(r[0], json.loads(r[1])["role"]) for r in c.execute(
            "SELECT id, data FROM message WHERE session_id=? ORDER BY time_created, id",
            (session_id,))]


# -- sessions -------------------------------------------------------------------------

def test_sessions_of_a_project_newest_first_with_counts_and_no_subagents(
        service: Service, sample_db: Path) -> None:
    got = route(service, "history_sessions", directory=ACME, db=str(sample_db))
    expected = [s for s in MANIFEST["sessions"]
                if s["project_id"] == ACME_ID and s["kind"] != "subagent"]
    assert {s["id"] for s in got} == {s["id"] for s in expected}
    assert SUBAGENT not in {s["id"] for s in got}
    assert [s["updated"] for s in got] == sorted((s["updated"] for s in got), reverse=True)
    for s in got:
        m = SESSIONS[next(k for k, v in SESSIONS.items() if v["id"] == s["id"])]
        assert s["title"] == m["title"] and s["directory"] == m["directory"]
        assert s["parent_id"] is None and s["archived"] is False
        assert s["user_messages"] == len(m["user_turns"])
        assert s["user_messages"] + s["assistant_messages"] == m["message_count"]
        assert s["created"].endswith("Z") and s["created"] <= s["updated"]
        assert s["subagents"] == (1 if s["id"] == TODOS else 0)


def test_a_nested_folder_selects_its_whole_project_and_limit_bounds(
        service: Service, sample_db: Path) -> None:
    everything = route(service, "history_sessions", directory=PIPELINE + "/services/ingest",
                       db=str(sample_db))
    assert {s["id"] for s in everything} == {
        SESSIONS[k]["id"] for k in ("ingest-nested", "ingest-watched", "ingest-autocompact")}
    one = route(service, "history_sessions", directory=PIPELINE, limit=1, db=str(sample_db))
    assert one == everything[:1]


def test_non_git_folder_archived_sessions_and_unknown_folders(
        service: Service, sample_db: Path) -> None:
    scratch = route(service, "history_sessions", directory=SCRATCH, db=str(sample_db))
    assert {s["id"] for s in scratch} == {SESSIONS["scratch-global"]["id"],
                                          SESSIONS["scratch-empty"]["id"]}
    empty = next(s for s in scratch if s["id"] == SESSIONS["scratch-empty"]["id"])
    assert (empty["user_messages"], empty["assistant_messages"]) == (0, 0)
    notes = route(service, "history_sessions", directory="/tmp/projects/sample/notes-app",
                  db=str(sample_db))
    archived = {s["id"] for s in notes if s["archived"]}
    assert archived == {SESSIONS["notes-archived"]["id"]}
    assert route(service, "history_sessions", directory="/nowhere/at/all",
                 db=str(sample_db)) == []


# -- messages -------------------------------------------------------------------------

def test_messages_page_through_the_whole_session(service: Service, sample_db: Path) -> None:
    seen: list[dict[str, Any]] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = route(service, "history_messages", session_id=AUTO, offset=offset, limit=3,
                     db=str(sample_db))
        assert page["offset"] == offset and page["limit"] == 3 and page["total"] == 8
        seen += page["messages"]
        offset = page["next_offset"]
        pages += 1
    assert pages == 3
    assert [(m["id"], m["role"]) for m in seen] == db_messages(sample_db, AUTO)
    assert page["session"]["title"] == SESSIONS["ingest-autocompact"]["title"]
    compaction = next(c for c in MANIFEST["compactions"] if c["session_id"] == AUTO)
    by_id = {m["id"]: m for m in seen}
    assert by_id[compaction["request_message_id"]]["kind"] == "compaction"
    assert by_id[compaction["request_message_id"]]["text"] == \
        "[compaction requested: automatic]"
    assert by_id[compaction["summary_message_id"]]["kind"] == "summary"
    assert "lack primary keys" in by_id[compaction["summary_message_id"]]["text"]
    synthetic = [m for m in seen if m["kind"] == "synthetic"]
    assert len(synthetic) == 1 and synthetic[0]["text"].startswith("Continue if you have")
    past = route(service, "history_messages", session_id=AUTO, offset=8, db=str(sample_db))
    assert past["messages"] == [] and past["next_offset"] is None


def test_message_text_condenses_tools_and_marks_files_and_errors(
        service: Service, sample_db: Path) -> None:
    def texts(key: str) -> list[str]:
        page = route(service, "history_messages", session_id=SESSIONS[key]["id"],
                     db=str(sample_db))
        return [m["text"] for m in page["messages"]]

    todos = texts("web-todos-subagent")
    assert todos[0] == SESSIONS["web-todos-subagent"]["user_turns"][0]["text"]
    assert "[tool] task Collect TODO comments (sub-agent)" in todos[1]
    attach = texts("notes-attach")
    assert attach[0].startswith("Summarize the attached changelog")
    assert "[file: CHANGELOG.md]" in attach[0] and "Called the Read tool" not in attach[0]
    assert "[error: APIError]" in texts("notes-error")[1]
    # `opencode run "..."` turns lose the quotes OpenCode added
    assert texts("web-cli")[0] == "what does this project do?"


def test_a_subagent_session_can_be_read_by_its_id(service: Service, sample_db: Path) -> None:
    page = route(service, "history_messages", session_id=SUBAGENT, db=str(sample_db))
    assert page["session"]["parent_id"] == TODOS
    assert any(m["text"].startswith("[tool] grep") for m in page["messages"])


def test_unknown_session_is_not_found_and_bad_arguments_are_refused(
        service: Service, sample_db: Path) -> None:
    db = str(sample_db)
    with pytest.raises(NotFoundError, match="ses_missing"):
        route(service, "history_messages", session_id="ses_missing", db=db)
    with pytest.raises(NotFoundError):
        route(service, "history_compactions", session_id="ses_missing", db=db)
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("history_messages", {"session_id": AUTO, "limit": 0}, "`limit` must be at least 1"),
        ("history_messages", {"session_id": AUTO, "offset": -1}, "`offset` must be at least"),
        ("history_messages", {"session_id": AUTO, "limit": "5"}, "whole number"),
        ("history_messages", {"session_id": " "}, "`session_id` is required"),
        ("history_sessions", {"directory": ACME, "limit": 0}, "`limit` must be at least 1"),
        ("history_sessions", {"directory": ""}, "`directory` is required"),
        ("history_sessions", {}, "`directory` is required"),
        ("history_search", {"directory": ACME}, "`query` is required"),
        ("history_search", {"directory": ACME, "query": "  "}, "`query` is required"),
        ("history_search", {"directory": ACME, "query": "a b c d e f g h i"}, "at most 8"),
        ("history_search", {"directory": ACME, "query": "x", "limit": -2}, "at least 1"),
    ]
    for name, payload, message in bad:
        with pytest.raises(RequestError, match=message):
            route(service, name, **({"db": db} if payload else {}), **payload)


def test_no_database_at_all_is_a_source_error(service: Service, tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        route(service, "history_sessions", directory=ACME)
    with pytest.raises(SourceError):
        route(service, "history_messages", session_id=AUTO, db=str(tmp_path / "none.db"))


# -- search ---------------------------------------------------------------------------

def test_search_finds_user_and_assistant_text_newest_first(
        service: Service, sample_db: Path) -> None:
    hits = route(service, "history_search", query="PRIMARY keys", directory=PIPELINE,
                 db=str(sample_db))
    assert [h["role"] for h in hits] == ["user", "assistant", "assistant"]
    assert [h["kind"] for h in hits] == ["text", "summary", "text"]
    assert [h["time"] for h in hits] == sorted((h["time"] for h in hits), reverse=True)
    assert all("primary keys" in h["snippet"].lower() for h in hits)
    assert {h["session_id"] for h in hits} == {AUTO}
    assert hits[0]["session_title"] == "Review partner schema"
    assert route(service, "history_search", query="primary keys", directory=PIPELINE,
                 limit=1, db=str(sample_db)) == hits[:1]
    # the other project's conversations are not searched
    assert route(service, "history_search", query="primary keys", directory=ACME,
                 db=str(sample_db)) == []


def test_search_skips_subagents_and_json_keys(service: Service, sample_db: Path) -> None:
    db = str(sample_db)
    # only the sub-agent's prompt says this
    assert route(service, "history_search", query="list each one with its file",
                 directory=ACME, db=db) == []
    # "type" is a key of every text part's JSON: only texts that say it may match
    for h in route(service, "history_search", query="type", directory=ACME, db=db):
        assert "type" in h["snippet"].lower()
    pnpm = route(service, "history_search", query="pnpm", directory=ACME, db=db)
    assert {h["session_id"] for h in pnpm} >= {SESSIONS["web-prefs"]["id"],
                                                 SESSIONS["web-prefs-fork"]["id"]}


# -- compactions ----------------------------------------------------------------------

def test_compactions_manual_and_automatic(service: Service, sample_db: Path) -> None:
    db = str(sample_db)
    for c in MANIFEST["compactions"]:
        got = route(service, "history_compactions", session_id=c["session_id"], db=db)
        assert got["session"]["id"] == c["session_id"]
        [point] = got["compactions"]
        assert point["request_message_id"] == c["request_message_id"]
        assert point["summary_message_id"] == c["summary_message_id"]
        assert point["auto"] is c["auto"] and point["overflow"] == c["overflow"]
        assert point["summary"].startswith("## Objective") and point["summary_time"]
    manual = route(service, "history_compactions", session_id=MANUAL, db=db)
    assert "Python 3.9" in manual["compactions"][0]["summary"]
    none = route(service, "history_compactions", session_id=TODOS, db=db)
    assert none["compactions"] == []


# -- redaction ------------------------------------------------------------------------

@pytest.fixture
def secret_session(sample_db: Path) -> str:
    """An acme-web session holding secrets in its title, a turn and a compaction summary,
    whose newest compaction has no summary yet."""
    w = OpenCodeWriter(sample_db)
    try:
        sid = w.new_session(project_id=ACME_ID, directory=ACME,
                            title=f"Deploy with {AWS_KEY}")
        w.append_turn(sid, f"the deploy token is {GH_TOKEN} keep it handy",
                      f"Noted: export AWS_ACCESS_KEY_ID={AWS_KEY} before the deploy.")
        for summary in (f"## Objective\n- deploy; token {GH_TOKEN}", None):
            ms = w.now_ms()
            req = w._insert_message(sid, {"role": "user", "time": {"created": ms},
                                          "agent": "build"}, ms)
            w._insert_part(sid, req, {"type": "compaction", "auto": False})
            if summary is not None:
                ms = w.now_ms()
                mid = w._insert_message(sid, {"role": "assistant", "parentID": req,
                                              "agent": "compaction", "summary": True,
                                              "time": {"created": ms, "completed": ms}}, ms)
                w._insert_part(sid, mid, {"type": "text", "text": summary})
    finally:
        w.close()
    return sid


def test_history_never_returns_a_planted_secret(service: Service, sample_db: Path,
                                                secret_session: str) -> None:
    db = str(sample_db)
    results = [
        route(service, "history_sessions", directory=ACME, db=db),
        route(service, "history_messages", session_id=secret_session, db=db),
        route(service, "history_search", query="deploy token", directory=ACME, db=db),
        route(service, "history_compactions", session_id=secret_session, db=db),
    ]
    dumped = json.dumps(results)
    assert AWS_KEY not in dumped and GH_TOKEN not in dumped
    assert "[REDACTED:aws_access_key]" in dumped and "[REDACTED:github_token]" in dumped
    sessions, page, hits, points = results
    assert sessions[0]["id"] == secret_session
    assert sessions[0]["title"].startswith("Deploy with [REDACTED:")
    assert page["messages"][0]["text"] == \
        "the deploy token is [REDACTED:github_token] keep it handy"
    assert hits and hits[0]["session_id"] == secret_session
    assert "[REDACTED:github_token]" in hits[0]["snippet"]
    first, pending = points["compactions"]
    assert first["summary"] == "## Objective\n- deploy; token [REDACTED:github_token]"
    assert pending["summary"] is None and pending["summary_message_id"] is None
    # a word found only inside a secret is no match (search is no oracle for secrets)
    assert route(service, "history_search", query=GH_TOKEN[4:14], directory=ACME,
                 db=db) == []


# -- control socket and CLI -----------------------------------------------------------

@pytest.fixture
def control(service: Service, isolated_env: dict[str, str]
            ) -> Iterator[tuple[Path, list[str]]]:
    """The Service's routes on a control socket, announced in daemon.json as a running
    daemon does; yields the socket path and the routes called so far."""
    folder = Path(tempfile.mkdtemp(prefix="mdh-", dir="/tmp"))
    sock = folder / "control.sock"
    calls: list[str] = []

    def handler(name: str) -> Any:
        def handle(body: dict[str, Any]) -> Any:
            calls.append(name)
            return call(service, name, body)
        return handle

    server = ControlServer(sock, {r: handler(r) for r in ROUTES})
    server.start()
    info = service.app.state_dir / "daemon.json"
    info.write_text(json.dumps({"socket": str(sock)}))
    try:
        yield sock, calls
    finally:
        info.unlink()
        server.close(wait_seconds=2)
        shutil.rmtree(folder, ignore_errors=True)


def test_routes_on_the_control_socket(service: Service, control: tuple[Path, list[str]],
                                      sample_db: Path) -> None:
    db = str(sample_db)
    with ControlClient(control[0]) as client:
        assert client.call("history_sessions", {"directory": ACME, "db": db}) == \
            route(service, "history_sessions", directory=ACME, db=db)
        with pytest.raises(RemoteError) as missing:
            client.call("history_messages", {"session_id": "ses_missing", "db": db})
        assert missing.value.status == 404 and missing.value.type == "NotFoundError"
        with pytest.raises(RemoteError) as bad:
            client.call("history_search", {"directory": ACME, "db": db})
        assert bad.value.status == 400 and "`query` is required" in bad.value.message


def test_cli_goes_through_a_running_daemon(control: tuple[Path, list[str]],
                                           sample_db: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    got = cli_json("history", "compactions", AUTO, "--db", str(sample_db))
    assert got["compactions"][0]["auto"] is True
    capsys.readouterr()
    assert cli("history", "messages", "ses_missing", "--db", str(sample_db))[0] == 5
    assert "ses_missing" in capsys.readouterr().err
    assert control[1] == ["history_compactions", "history_messages"]


def test_cli_sessions_and_search(sample_db: Path, isolated_env: dict[str, str]) -> None:
    db = ("--db", str(sample_db))
    rows = cli_json("history", "sessions", "--dir", ACME, *db)
    assert SUBAGENT not in {r["id"] for r in rows} and len(rows) == 4
    code, out = cli("history", "sessions", "--dir", ACME, "--limit", "2", *db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["ID", "UPDATED"] and len(lines) == 4
    assert rows[0]["id"] in lines[2] and rows[0]["title"] in lines[2]
    assert cli("history", "sessions", "--dir", "/nowhere", *db)[1].startswith(
        "no OpenCode sessions for /nowhere")
    hits = cli_json("history", "search", "primary keys", "--dir", PIPELINE, *db)
    code, out = cli("history", "search", "primary keys", "--dir", PIPELINE, *db)
    assert code == 0 and out.count(hits[0]["message_id"]) == 1
    assert "which tables were missing primary keys?" in out
    # one-shot commands never open the store when no daemon runs
    assert not (Path(isolated_env["XDG_DATA_HOME"]) / "opencode-memoryd").exists()
    assert not (Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd" /
                "state.db").exists()


def test_cli_messages_pages_and_compactions(sample_db: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = ("--db", str(sample_db))
    page = cli_json("history", "messages", AUTO, "--limit", "5", *db)
    assert len(page["messages"]) == 5 and page["next_offset"] == 5
    code, out = cli("history", "messages", AUTO, "--offset", "5", "--limit", "5", *db)
    assert code == 0 and out.rstrip().endswith("messages 6-8 of 8")
    assert "which tables were missing primary keys?" in out
    code, out = cli("history", "messages", AUTO, "--limit", "5", *db)
    assert "[compaction requested: automatic]" in out and "next page: --offset 5" in out
    code, out = cli("history", "compactions", MANUAL, *db)
    assert code == 0 and "manual compaction" in out and "Python 3.9" in out
    capsys.readouterr()
    assert cli("history", "compactions", "ses_missing", *db)[0] == 5  # not found
    assert "no OpenCode session 'ses_missing'" in capsys.readouterr().err
    assert cli("history", "messages", AUTO, "--limit", "0", *db)[0] == 2
    assert cli("history", "search", "--dir", ACME, *db)[0] == 2
