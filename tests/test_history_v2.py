"""The history browser and capture-now over OpenCode's v2 storage (``session_message``).

On copies of the real v2 fixture (``opencode-v2-sample.db``, written by OpenCode 1.18.33:
three sessions through its v2 API, one through the 1.x API): every history mode (through
the Service, the MCP tool's modes and the CLI) returns the manifest's texts for a v2
session; rows added with the shapes OpenCode writes (a later turn, notes, a compaction, a
planted secret) are listed, found, redacted. The SYNTHETIC 2.x copies are derived as in
``test_v2_storage.py`` (``session_v2``, the 1.x session imported). capture-now picks the
session with the newest activity, which v2 turns do not write to ``session.time_updated``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, FIXTURES, MANIFEST, cli, cli_json
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.models import iso_utc, utc_from_ms
from opencode_memoryd.serve.mcp.tool import dispatch
from opencode_memoryd.usecases.service import Service, call, open_local
from opencode_writer_v2 import make_synthetic_2x

V2 = json.loads((FIXTURES / "opencode-v2-sample.db.manifest.json").read_text())
SESSIONS = {s["key"]: s for s in V2["sessions"]}
V2_KEYS = ("v2-directive", "v2-multiturn", "v2-tool")
DIRECTIVE = SESSIONS["v2-directive"]["id"]
LEGACY = SESSIONS["v1-legacy"]["id"]
DIR = SESSIONS["v2-directive"]["directory"]
AWS_KEY = "AKIAIOSFODNN7EXAMPLF"
GH_TOKEN = "ghp_" + "x7Rk2Lq9Zt4Wm8Np3Vb6Yc1Hd5Jf0Gs2Ke7A"


@pytest.fixture
def v2_db(tmp_path: Path) -> Path:
    """A private copy of the v2 fixture."""
    dst = tmp_path / "opencode" / "opencode.db"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "opencode-v2-sample.db", dst)
    return dst


def _service(env: dict[str, str], db: Path, config: Path | None = None
             ) -> Iterator[Service]:
    full = {**env, "OPENCODE_DB": str(db)}
    app = App(config=load_config(config, full), env=full)
    with open_local(app) as svc:
        yield svc


@pytest.fixture
def service(isolated_env: dict[str, str], v2_db: Path) -> Iterator[Service]:
    """A one-shot Service reading the v2 copy ($OPENCODE_DB)."""
    yield from _service(isolated_env, v2_db)


def route(svc: Service, name: str, **payload: Any) -> Any:
    """Call a route the way the control socket does (a JSON payload)."""
    return call(svc, name, json.loads(json.dumps(payload)))


def session_time(db: Path, sid: str) -> int:
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT time_updated FROM session WHERE id = ?",
                             (sid,)).fetchone()[0])


def add_rows(db: Path, sid: str, rows: list[tuple[str, dict[str, Any]]], *, start: int
             ) -> list[str]:
    """Append ``session_message`` rows (kind, data) to a session as OpenCode 1.18.33
    does: seq after the session's newest with gaps, one ms apart from ``start``, the
    session row left alone. Returns the new ids."""
    ids = []
    with sqlite3.connect(db) as c:
        seq = c.execute("SELECT coalesce(max(seq), 0) FROM session_message "
                        "WHERE session_id = ?", (sid,)).fetchone()[0]
        for i, (kind, data) in enumerate(rows):
            seq += 3
            ms = start + i
            data = {"time": {"created": ms}, **data}
            mid = f"msg_{ms:012x}T{i:02d}{sid[-10:]}"
            c.execute("INSERT INTO session_message VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (mid, sid, kind, seq, ms, ms, json.dumps(data)))
            ids.append(mid)
    return ids


def assistant(text: str, ms: int, *, tool: dict[str, Any] | None = None) -> dict[str, Any]:
    """An assistant step's ``data``, finished, in the shape of the fixture's rows."""
    content: list[dict[str, Any]] = [{"type": "reasoning", "id": "reasoning-0",
                                      "text": "private chain of thought"}]
    content.append(tool or {"type": "text", "id": "text-0", "text": text})
    return {"time": {"created": ms, "completed": ms + 1}, "agent": "build",
            "model": {"id": "stub-coder", "providerID": "stub"}, "content": content,
            "finish": "tool-calls" if tool else "stop", "cost": 0}


def raw_rows(db: Path, sid: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, type, data) of a session's session_message rows in seq order, read directly."""
    with sqlite3.connect(db) as c:
        return [(r[0], r[1], json.loads(r[2])) for r in c.execute(
            "SELECT id, type, data FROM session_message WHERE session_id = ? ORDER BY seq",
            (sid,))]


def all_messages(svc: Service, sid: str, db: Path, limit: int = 3) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = route(svc, "history_messages", session_id=sid, offset=offset, limit=limit,
                     db=str(db))
        seen += page["messages"]
        assert page["total"] >= len(seen)
        offset = page["next_offset"]
    return seen


# -- sessions -------------------------------------------------------------------------

def test_sessions_count_v2_rows_and_sort_by_newest_activity(service: Service,
                                                            v2_db: Path) -> None:
    got = route(service, "history_sessions", directory=DIR, db=str(v2_db))
    assert {s["id"] for s in got} == {s["id"] for s in SESSIONS.values()}
    by_id = {s["id"]: s for s in got}
    for key in V2_KEYS:
        m, s = SESSIONS[key], by_id[SESSIONS[key]["id"]]
        assert s["user_messages"] == len(m["turns"])
        assert s["assistant_messages"] == sum(len(t["assistant_message_ids"])
                                              for t in m["turns"])
        assert s["subagents"] == 0 and s["title"] == m["title"]
        newest = max(t["time_created"] for t in m["turns"])
        assert s["updated"] >= iso_utc(utc_from_ms(newest))  # not the stale time_updated
    assert (by_id[LEGACY]["user_messages"], by_id[LEGACY]["assistant_messages"]) == (1, 1)
    assert got[0]["id"] == LEGACY  # its time_updated is the newest activity so far
    # a later v2 turn does not touch session.time_updated, yet sorts its session first
    late = session_time(v2_db, LEGACY) + 60_000
    before = session_time(v2_db, DIRECTIVE)
    add_rows(v2_db, DIRECTIVE, [("user", {"text": "one more thing"}),
                                ("assistant", assistant("Sure.", late + 1))], start=late)
    assert session_time(v2_db, DIRECTIVE) == before < session_time(v2_db, LEGACY)
    got = route(service, "history_sessions", directory=DIR, db=str(v2_db))
    assert got[0]["id"] == DIRECTIVE and got[0]["updated"] == iso_utc(utc_from_ms(late + 1))
    assert (got[0]["user_messages"], got[0]["assistant_messages"]) == (2, 2)
    assert [s["updated"] for s in got] == sorted((s["updated"] for s in got), reverse=True)
    assert [s["id"] for s in route(service, "history_sessions", directory=DIR, limit=2,
                                   db=str(v2_db))] == [s["id"] for s in got[:2]]


# -- messages -------------------------------------------------------------------------

@pytest.mark.parametrize("key", V2_KEYS)
def test_messages_of_a_v2_session_are_its_rows_as_text(service: Service, v2_db: Path,
                                                       key: str) -> None:
    sid = SESSIONS[key]["id"]
    seen = all_messages(service, sid, v2_db)
    rows = raw_rows(v2_db, sid)
    assert [m["id"] for m in seen] == [r["id"] for r in SESSIONS[key]["session_message_rows"]]
    assert [m["role"] for m in seen] == [kind for _, kind, _ in rows]
    by_id = {m["id"]: m for m in seen}
    for turn in SESSIONS[key]["turns"]:
        assert by_id[turn["user_message_id"]]["text"] == turn["text"]
        for call_ in turn["tool_calls"]:
            text = by_id[call_["assistant_message_id"]]["text"]
            assert text.count("[tool] bash ") == 1
    for mid, kind, data in rows:
        if kind != "assistant":
            continue
        text = by_id[mid]["text"]
        assert "reasoning" not in text and by_id[mid]["kind"] == "text"
        for item in data["content"]:
            if item["type"] == "text":
                assert item["text"] in text
            elif item["type"] == "tool":
                assert f"[tool] bash {item['state']['input']['command']}" in text
            else:
                assert item["text"] not in text  # reasoning is left out
    tool = all_messages(service, SESSIONS["v2-tool"]["id"], v2_db)
    assert tool[4]["text"] == "[tool] bash ls src -> index.ts Command exited with code 0."


def test_notes_compactions_and_secrets_in_v2_rows(service: Service, v2_db: Path) -> None:
    db = str(v2_db)
    sid = SESSIONS["v2-multiturn"]["id"]
    assert route(service, "history_compactions", session_id=sid, db=db)["compactions"] == []
    start = session_time(v2_db, LEGACY) + 10_000
    ids = add_rows(v2_db, sid, [
        ("user", {"text": f"the deploy token is {GH_TOKEN} keep it handy",
                  "files": [{"uri": "file:///x/notes.md", "mime": "text/markdown",
                             "name": "notes.md"}]}),
        ("assistant", {**assistant("", start + 1), "finish": "error",
                       "content": [], "error": {"type": "unknown",
                                                "message": "HTTP transport failed"}}),
        ("model-switched", {"model": {"id": "other"}}),
        ("compaction", {"reason": "auto", "summary": f"## Goal\n- ship; key {AWS_KEY}",
                        "recent": "msg_x"}),
        ("synthetic", {"sessionID": sid, "text": "Continue if you have next steps"}),
        ("shell", {"callID": "c1", "command": "git status", "output": "clean\n"}),
        ("idle", {"outcome": "completed"}),
        ("compaction", {"reason": "manual"}),
    ], start=start)
    page = route(service, "history_messages", session_id=sid, offset=6, db=db)
    assert page["total"] == 6 + 6  # the switch and the idle row are not listed
    got = {m["id"]: m for m in page["messages"]}
    assert set(got) == {ids[i] for i in (0, 1, 3, 4, 5, 7)}
    assert got[ids[0]]["text"] == ("the deploy token is [REDACTED:github_token] keep it "
                                   "handy\n[file: notes.md]")
    assert got[ids[1]]["text"] == "[error: unknown]"
    assert (got[ids[3]]["role"], got[ids[3]]["kind"]) == ("assistant", "summary")
    assert got[ids[3]]["text"] == "## Goal\n- ship; key [REDACTED:aws_access_key]"
    assert (got[ids[4]]["role"], got[ids[4]]["kind"]) == ("user", "synthetic")
    assert (got[ids[5]]["kind"], got[ids[5]]["text"]) == ("shell",
                                                          "[shell] bash git status -> clean")
    assert (got[ids[7]]["kind"], got[ids[7]]["text"]) == ("compaction",
                                                          "[compaction requested: manual]")
    points = route(service, "history_compactions", session_id=sid, db=db)
    first, pending = points["compactions"]
    assert first["request_message_id"] == first["summary_message_id"] == ids[3]
    assert first["auto"] is True and first["summary"] == got[ids[3]]["text"]
    assert pending["auto"] is False and pending["summary"] is None
    assert points["session"]["updated"] == iso_utc(utc_from_ms(start + 7))
    dumped = json.dumps([page, points, route(service, "history_search", query="deploy token",
                                             directory=DIR, db=db)])
    assert GH_TOKEN not in dumped and AWS_KEY not in dumped
    # a word found only inside a secret is no match
    assert route(service, "history_search", query=GH_TOKEN[4:14], directory=DIR, db=db) == []
    hit = route(service, "history_search", query="ship key", directory=DIR, db=db)
    assert [(h["message_id"], h["kind"]) for h in hit] == [(ids[3], "summary")]


# -- search ---------------------------------------------------------------------------

def test_search_finds_every_turn_of_both_storages_newest_first(service: Service,
                                                               v2_db: Path) -> None:
    db = str(v2_db)
    for s in V2["sessions"]:
        for turn in s["turns"]:
            words = turn["text"].split()[:5]
            hits = route(service, "history_search", query=" ".join(words), directory=DIR,
                         db=db)
            hit = next(h for h in hits if h["message_id"] == turn["user_message_id"])
            assert hit["session_id"] == s["id"] and hit["role"] == "user"
            assert hit["snippet"] == turn["text"] and hit["session_title"] == s["title"]
    argo = route(service, "history_search", query="argocd", directory=DIR, db=db)
    assert [(h["role"], h["session_id"]) for h in argo] == [("assistant", DIRECTIVE),
                                                            ("user", DIRECTIVE)]
    assert argo[0]["snippet"] == "Noted: deployments go through ArgoCD."
    # reasoning and tool output are not searched
    assert route(service, "history_search", query="shell command", directory=DIR,
                 db=db) == []
    mixed = route(service, "history_search", query="the", directory=DIR, db=db)
    assert {h["session_id"] for h in mixed} >= {LEGACY, SESSIONS["v2-tool"]["id"]}
    assert [h["time"] for h in mixed] == sorted((h["time"] for h in mixed), reverse=True)
    assert len(route(service, "history_search", query="the", directory=DIR, limit=2,
                     db=db)) == 2


# -- the synthetic 2.x layout ---------------------------------------------------------

def test_synthetic_2x_layout_and_a_pure_2x_database(service: Service, v2_db: Path) -> None:
    make_synthetic_2x(v2_db)  # SYNTHETIC: session_v2, the 1.x session imported
    db = str(v2_db)

    def check() -> None:
        got = route(service, "history_sessions", directory=DIR, db=db)
        assert sorted(s["id"] for s in got) == sorted(s["id"] for s in SESSIONS.values())
        legacy = next(s for s in got if s["id"] == LEGACY)
        assert (legacy["user_messages"], legacy["assistant_messages"]) == (1, 1)
        page = route(service, "history_messages", session_id=LEGACY, db=db)
        assert page["total"] == 2
        assert page["messages"][0]["text"] == SESSIONS["v1-legacy"]["turns"][0]["text"]
        hits = route(service, "history_search", query="kestrel", directory=DIR, db=db)
        assert len(hits) == len({h["message_id"] for h in hits}) == 2
        tool = route(service, "history_messages", session_id=SESSIONS["v2-tool"]["id"],
                     db=db)
        assert tool["total"] == 6  # the idle rows are not listed
        assert route(service, "history_compactions", session_id=LEGACY,
                     db=db)["compactions"] == []

    check()
    with sqlite3.connect(v2_db) as c:  # SYNTHETIC: no 1.x tables at all
        for table in ("part", "message", "session_context_epoch", "session"):
            c.execute(f"DROP TABLE {table}")
    check()


# -- the MCP tool's modes and the CLI -------------------------------------------------

def test_mcp_modes_and_cli_over_a_v2_session(service: Service, v2_db: Path) -> None:
    def mcp(**args: Any) -> dict[str, Any]:
        out = dispatch(args, lambda r, p: call(service, r, json.loads(json.dumps(p))), DIR)
        assert out["success"] is True, out
        return out

    turns = SESSIONS["v2-multiturn"]["turns"]
    sid = SESSIONS["v2-multiturn"]["id"]
    assert sid in {s["id"] for s in mcp(mode="sessions")["sessions"]}
    page = mcp(mode="messages", id=sid, offset=2, limit=2)
    assert page["messages"][0]["text"] == turns[1]["text"]
    assert page["next_offset"] == 4 and page["total"] == 6
    found = mcp(mode="history-search", query="changelog newest")["results"]
    assert found[-1]["message_id"] == turns[1]["user_message_id"]
    assert mcp(mode="compactions", id=sid)["count"] == 0
    db = ("--db", str(v2_db))
    rows = cli_json("history", "sessions", "--dir", DIR, *db)
    assert {r["id"] for r in rows} == {s["id"] for s in SESSIONS.values()}
    code, out = cli("history", "messages", sid, *db)
    assert code == 0 and all(t["text"] in out for t in turns)
    code, out = cli("history", "search", "first step", "--dir", DIR, *db)
    assert code == 0 and turns[2]["user_message_id"] in out


# -- capture-now ----------------------------------------------------------------------

def test_capture_now_picks_the_session_with_the_newest_activity(
        isolated_env: dict[str, str], v2_db: Path, config_file: Path) -> None:
    late = session_time(v2_db, LEGACY) + 60_000
    for svc in _service(isolated_env, v2_db, config_file):
        # by time_updated and by activity alike, the 1.x session is the newest
        assert route(svc, "capture_now", directory=DIR)["session_id"] == LEGACY
        add_rows(v2_db, DIRECTIVE, [
            ("user", {"text": "remember: the staging database is called heron"}),
            ("assistant", assistant("Noted.", late + 1))], start=late)
        assert session_time(v2_db, DIRECTIVE) < session_time(v2_db, LEGACY)
        got = route(svc, "capture_now", directory=DIR)
        assert got["session_id"] == DIRECTIVE and got["report"]["error"] is None
        assert got["report"]["added"] == 2  # both directives of the session
        again = route(svc, "capture_now", directory=DIR)
        assert again["session_id"] == DIRECTIVE and again["report"]["added"] == 0


def test_capture_now_on_the_1x_sample_picks_the_newest_time_updated(
        isolated_env: dict[str, str], sample_db: Path, config_file: Path) -> None:
    with sqlite3.connect(sample_db) as c:
        newest = c.execute(
            "SELECT id FROM session WHERE parent_id IS NULL AND (directory = ? OR directory "
            "LIKE ?) ORDER BY time_updated DESC LIMIT 1", (ACME, ACME + "/%")).fetchone()[0]
    assert newest in {s["id"] for s in MANIFEST["sessions"]}
    for svc in _service(isolated_env, sample_db, config_file):
        got = route(svc, "capture_now", directory=ACME)
        assert got["session_id"] == newest and got["report"]["error"] is None
