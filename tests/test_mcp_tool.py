"""The MCP ``memory`` tool's dispatch alone (:func:`opencode_memoryd.serve.mcp.tool.dispatch`):
which daemon route each mode calls with what, the search similarity, that bad arguments are
refused before the daemon is asked, and how the daemon's failures read. ``tests/test_mcp.py``
runs the real server against a real daemon."""

from __future__ import annotations

from typing import Any

import pytest

from opencode_memoryd.errors import ControlError, DaemonUnreachableError, RemoteError
from opencode_memoryd.serve.mcp.tool import INPUT_SCHEMA, START_HINT, dispatch

MODES = INPUT_SCHEMA["properties"]["mode"]["enum"]

#: Bad tool calls and what their error says. All but the last four are refused before the
#: daemon is asked (the daemon refuses those: an id it does not know).
BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    ({"mode": "nonsense"}, "unknown mode 'nonsense'"),
    ({}, "`mode` is required"),
    ({"mode": "search"}, "needs `query`"),
    ({"mode": "search", "query": "   "}, "needs `query`"),
    ({"mode": "search", "query": "pnpm", "limit": 0}, "`limit` must be"),
    ({"mode": "search", "query": "pnpm", "limit": "5"}, "`limit` must be"),
    ({"mode": "list", "limit": 101}, "`limit` must be"),
    ({"mode": "add"}, "needs `content`"),
    ({"mode": "add", "content": "A fact.", "type": "gossip"}, "type"),
    ({"mode": "add", "content": "A fact.", "scope": "team"}, "scope"),
    ({"mode": "forget"}, "needs `id`"),
    ({"mode": "messages"}, "needs `id`"),
    ({"mode": "messages", "id": "ses_nope", "offset": -1}, "`offset` must be"),
    ({"mode": "history-search"}, "needs `query`"),
    ({"mode": "forget", "id": "not-a-memory-id"}, "not-a-memory-id"),
    ({"mode": "forget", "id": "0b2f6c1e-5d4a-4c3b-9a8f-7e6d5c4b3a21"}, "no memory"),
    ({"mode": "messages", "id": "ses_nope"}, "no OpenCode session 'ses_nope'"),
    ({"mode": "compactions", "id": "ses_nope"}, "no OpenCode session 'ses_nope'"),
]
LOCAL_BAD_CALLS = BAD_CALLS[:-4]


class Daemon:
    """Records the routes a tool call asks for and answers them from a table."""

    def __init__(self, answers: dict[str, Any] | None = None,
                 error: Exception | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers = answers or {}
        self.error = error

    def __call__(self, route: str, payload: dict[str, Any]) -> Any:
        self.calls.append((route, payload))
        if self.error is not None:
            raise self.error
        return self.answers.get(route, [])


def test_each_mode_calls_its_route_with_the_servers_directory() -> None:
    d = Daemon({"add": {"memory": {"id": "m1"}, "status": "added"},
                "forget": {"memory": {"id": "m1"}}, "profile": {},
                "capture_now": {}, "history_messages": {}, "history_compactions": {}})
    args = {"query": "q", "content": "c", "id": "x"}
    for mode in MODES:
        assert dispatch({"mode": mode, **args}, d, "/work/p")["success"] is True, mode
    routes = {route: payload for route, payload in d.calls}
    assert routes["search"] == {"query": "q", "directory": "/work/p", "limit": 10}
    assert routes["add"] == {"content": "c", "type": "project", "scope": "project",
                             "directory": "/work/p", "caller": "agent"}
    assert routes["forget"] == {"memory_id": "x", "caller": "agent", "directory": "/work/p"}
    assert routes["history_messages"] == {"session_id": "x", "offset": 0, "limit": 50}
    assert routes["capture_now"] == {"directory": "/work/p"}
    assert len(d.calls) == len(MODES) - 1  # help asks the daemon nothing


def test_similarity_is_relative_to_the_best_hit() -> None:
    hits = [{"id": "a", "score": 2.0}, {"id": "b", "score": 1.0}, {"id": "c", "score": 0.0}]
    out = dispatch({"mode": "search", "query": "q"}, Daemon({"search": hits}), "/p")
    assert [(h["id"], h["similarity"]) for h in out["results"]] == [
        ("a", 100), ("b", 50), ("c", 0)]


@pytest.mark.parametrize(("args", "says"), LOCAL_BAD_CALLS)
def test_bad_arguments_never_reach_the_daemon(args: dict[str, Any], says: str) -> None:
    d = Daemon()
    out = dispatch(args, d, "/p")
    assert out["success"] is False and says.lower() in out["error"].lower()
    assert d.calls == []


@pytest.mark.parametrize(("error", "says"), [
    (DaemonUnreachableError("gone"), START_HINT),
    (RemoteError("no memory 'x'", type="NotFoundError", kind=None, status=404),
     "no memory 'x'"),
    (ControlError("the daemon broke the connection"), "opencode-memoryd status"),
])
def test_daemon_failures_become_clear_errors(error: Exception, says: str) -> None:
    out = dispatch({"mode": "search", "query": "q"}, Daemon(error=error), "/p")
    assert out["success"] is False and says in out["error"]


def test_memories_say_when_they_were_said() -> None:
    said = {"id": "m1", "content": "We use uv.", "scope": "project",
            "created_at": "2026-11-27T10:00:00.000Z", "updated_at": "2026-11-27T10:00:00.000Z",
            "said_at": "2026-11-21T09:30:00.000Z"}
    stored = {**said, "id": "m2", "said_at": None}
    d = Daemon({"search": [{**said, "score": 1.0}], "list": [said, stored],
                "profile": {"total": 1, "types": {"user": {"count": 1, "memories": [said]}}}})
    hits = dispatch({"mode": "search", "query": "uv"}, d, "/p")["results"]
    assert hits[0]["saidAt"] == "2026-11-21T09:30:00.000Z"
    listed = dispatch({"mode": "list"}, d, "/p")["memories"]
    assert {m["id"]: m["saidAt"] for m in listed} == {
        "m1": "2026-11-21T09:30:00.000Z", "m2": "2026-11-27T10:00:00.000Z"}
    prof = dispatch({"mode": "profile"}, d, "/p")["profile"]
    assert prof["types"]["user"]["memories"][0]["saidAt"] == "2026-11-21T09:30:00.000Z"
