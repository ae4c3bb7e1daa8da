"""The MCP server (``opencode-memoryd mcp``) spoken to with the official ``mcp`` SDK's stdio
client, as OpenCode does: a real subprocess in a project folder, in front of a real running
daemon on a seeded store and a copy of the real OpenCode sample database with one more
session. Bad arguments and a missing or frozen daemon answer ``success: false`` with a clear
error and change nothing (``tests/test_mcp_tool.py`` checks the dispatch alone)."""

from __future__ import annotations

import atexit
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import MANIFEST, SAMPLE_DB, wait_until, write_config
from opencode_memoryd.compose import DAEMON_INFO_FILE, STATE_FILE_NAME
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, store_dir
from opencode_memoryd.install.opencode import MCP_SERVER_NAME
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.serve.control.client import ControlClient
from opencode_memoryd.serve.mcp.tool import INPUT_SCHEMA, START_HINT
from opencode_memoryd.store.edge import EdgeStore
from opencode_writer import OpenCodeWriter
from test_mcp_tool import BAD_CALLS

PROJECT_ID = "5eed" * 10
OTHER_ID = "0ther" * 8
AUTO = next(s["id"] for s in MANIFEST["sessions"] if s["key"] == "ingest-autocompact")
MODES = INPUT_SCHEMA["properties"]["mode"]["enum"]
WHEN = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
DIRECTIVE = "Remember that the release branch is called release/next."


def mem(content: str, *, type_: str = "project", scope: str = "project",
        project: str | None = PROJECT_ID, root: str = "/nowhere", minutes: int = 0) -> Memory:
    pkey = None if scope == "user" else project
    t = WHEN.replace(minute=minutes)
    return Memory(id=point_id(scope, pkey, type_, content),  # type: ignore[arg-type]
                  content=content, type=type_, scope=scope,  # type: ignore[arg-type]
                  project_id=pkey, project_root=root if pkey else None, session_id="ses_seed",
                  message_ids=["msg_seed"], source="rules", created_at=t, updated_at=t,
                  session_ids=["ses_seed"], content_hash=content_hash(content))


@dataclass
class World:
    """A daemon (or none), its store, an OpenCode database and a project folder."""

    root: Path
    project: Path
    env: dict[str, str]
    config: Path
    db: Path
    session: str
    seeds: dict[str, Memory] = field(default_factory=dict)
    daemon: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        cfg = load_config(self.config, self.env)
        return Path(json.loads((state_dir(cfg, self.env) / DAEMON_INFO_FILE).read_text())
                    ["socket"])

    def store_dir(self) -> Path:
        return store_dir(load_config(self.config, self.env), self.env)

    def start(self) -> None:
        self.daemon = subprocess.Popen(
            [sys.executable, "-m", "opencode_memoryd", "run"], env=self.env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def serving() -> bool:
            try:
                sock = self.socket
            except (OSError, ValueError, KeyError):
                return False
            with ControlClient(sock) as client:
                return client.ping() is not None

        assert wait_until(serving, timeout=120, interval=0.05), "the daemon did not serve"
        assert wait_until(self.settled, timeout=300, interval=0.1), \
            "the daemon did not finish reading the database"

    def settled(self) -> bool:
        """Whether the daemon has read the sample database's sessions and has nothing due
        but the test's own session (which waits to be idle), so that what it stores on its
        own (e.g. session notes) is stored before a test looks."""
        path = state_dir(load_config(self.config, self.env), self.env) / STATE_FILE_NAME
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
                queued = c.execute("SELECT count(*) FROM queue WHERE session_id != ?",
                                   (self.session,)).fetchone()[0]
                marked = c.execute("SELECT count(*) FROM marks WHERE session_id != ?",
                                   (self.session,)).fetchone()[0]
        except sqlite3.Error:
            return False
        return queued == 0 and marked > 0

    def stop(self) -> None:
        if self.daemon is not None:
            self.daemon.send_signal(signal.SIGCONT)
            self.daemon.terminate()
            self.daemon.wait(timeout=60)
            self.daemon = None

    def call(self, route: str, payload: dict[str, Any] | None = None) -> Any:
        """A control route of the running daemon."""
        with ControlClient(self.socket) as client:
            return client.call(route, payload or {})

    def everything(self) -> list[dict[str, Any]]:
        """Every memory, tombstones included, as the daemon lists them."""
        return list(self.call("list", {"include_retired": True}))


def make_world(root: Path, *, daemon: bool = True) -> World:
    """Seed a store, write a session into a copy of the sample database, start a daemon."""
    short = Path(tempfile.mkdtemp(prefix="mcp-run-", dir="/tmp"))  # socket path limit
    atexit.register(shutil.rmtree, short, True)  # after the worker's daemons are gone
    home = root / "home"
    project = root / "project"
    project.mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_STATE_HOME": str(home / ".local/state"), "XDG_RUNTIME_DIR": str(short),
           "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    db = root / "opencode.db"
    shutil.copyfile(SAMPLE_DB, db)
    writer = OpenCodeWriter(db)
    try:
        sid = writer.new_session(project_id=PROJECT_ID, directory=str(project),
                                 worktree=str(project), title="Release chores")
        writer.append_turn(sid, DIRECTIVE, "Noted.")
        writer.append_turn(sid, "how do I build the documentation", "Run make docs.")
    finally:
        writer.close()
    config = write_config(root / "config.toml", f'[opencode]\nsettle_seconds = 0\n'
                          f'db_paths = ["{db}"]\n[extraction]\nmode = "rules"\n')
    env["OPENCODE_MEMORYD_CONFIG"] = str(config)  # as install-opencode pins it
    world = World(root, project, env, config, db, sid)
    seeds = [
        mem("Always use pnpm, never npm.", type_="feedback", root=str(project), minutes=1),
        mem("The API server listens on port 8787.", root=str(project), minutes=2),
        mem("Docs are built with mkdocs-material.", type_="reference", root=str(project),
            minutes=3),
        mem("I prefer short answers.", type_="user", scope="user", minutes=4),
        mem("The billing service is written in Go.", project=OTHER_ID, minutes=5),
    ]
    world.seeds = {m.content: m for m in seeds}
    store = EdgeStore(world.store_dir())
    try:
        store.upsert(seeds)
    finally:
        store.close()
    if daemon:
        world.start()
    return world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A running daemon shared by the tests that change nothing."""
    w = make_world(tmp_path_factory.mktemp("mcp-world"))
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def fresh_world(tmp_path: Path) -> Iterator[World]:
    """A running daemon of the test's own (for the tests that change the store)."""
    w = make_world(tmp_path / "world")
    try:
        yield w
    finally:
        w.stop()


@dataclass
class Talk:
    """One MCP conversation: the handshake, the tool list and each call's JSON result."""

    init: Any
    tools: list[Any]
    results: list[dict[str, Any]]
    is_error: list[bool]
    seconds: list[float]


def talk(world: World, *calls: dict[str, Any], tool: str = "memory",
         during: Callable[[], None] | None = None) -> Talk:
    """Spawn ``opencode-memoryd mcp`` in the project folder, initialize, list the tools and
    call ``tool`` with each argument object in turn; then run ``during`` (in a thread) while
    the server still runs."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "opencode_memoryd", "mcp"],
                                   env=world.env, cwd=str(world.project))

    async def main() -> Talk:
        async with stdio_client(params) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=120) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            out = Talk(init, list(tools), [], [], [])
            for args in calls:
                start = time.monotonic()
                result = await session.call_tool(tool, args)
                out.seconds.append(time.monotonic() - start)
                assert len(result.content) == 1 and result.content[0].type == "text"
                out.results.append(json.loads(result.content[0].text))
                out.is_error.append(bool(result.is_error))
            if during is not None:
                await anyio.to_thread.run_sync(during)
            return out

    return anyio.run(main)


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result.get("success") is True, result
    return result


# -- handshake ----------------------------------------------------------------------------

@pytest.mark.slow
def test_the_server_offers_one_tool_and_instructions_and_nothing_else(world: World) -> None:
    t = talk(world)
    caps = t.init.capabilities
    assert caps.tools is not None
    assert caps.resources is None and caps.prompts is None  # no extra OpenCode tools
    assert t.init.server_info.name == "opencode-memoryd"
    assert "mode=search" in t.init.instructions and "mode=add" in t.init.instructions
    assert "never instructions" in t.init.instructions
    # named as OpenCode lists it to the model: `<key under mcp>_<tool>`
    assert f"`{MCP_SERVER_NAME}_memory`" in t.init.instructions
    assert [tool.name for tool in t.tools] == ["memory"]
    schema = t.tools[0].input_schema
    assert schema["required"] == ["mode"] and schema["properties"]["mode"]["enum"] == MODES
    assert len(json.dumps(schema)) + len(t.tools[0].description or "") < 2000  # few tokens


# -- reading ------------------------------------------------------------------------------

@pytest.mark.slow
def test_search_and_list_give_this_projects_and_the_users_memories(world: World) -> None:
    s = world.seeds
    t = talk(world,
             {"mode": "search", "query": "which package manager, pnpm or npm"},
             {"mode": "search", "query": "short answers", "scope": "user"},
             {"mode": "search", "query": "Go billing service"},
             {"mode": "search", "query": "port docs pnpm", "limit": 1},
             {"mode": "list"},
             {"mode": "list", "type": "reference"},
             {"mode": "list", "scope": "user"},
             {"mode": "help"},
             {"mode": "profile"})
    search, user, elsewhere, one, listed, refs, users, helped, profile = map(ok, t.results)
    best = search["results"][0]
    assert best["id"] == s["Always use pnpm, never npm."].id and best["similarity"] == 100
    assert set(best) >= {"id", "content", "type", "scope", "createdAt", "similarity"}
    assert best["createdAt"] == "2026-01-10T09:01:00.000Z"
    assert all(0 <= h["similarity"] <= 100 for h in search["results"])
    assert [h["scope"] for h in user["results"]] == ["user"]
    assert "The billing service is written in Go." not in json.dumps(elsewhere)
    assert one["count"] == 1 and len(one["results"]) == 1
    assert [m["content"] for m in listed["memories"]] == [
        "Docs are built with mkdocs-material.", "The API server listens on port 8787.",
        "Always use pnpm, never npm."]  # this project's, newest first
    assert [m["content"] for m in refs["memories"]] == ["Docs are built with mkdocs-material."]
    assert [m["content"] for m in users["memories"]] == ["I prefer short answers."]
    assert set(helped["modes"]) == set(MODES) - {"help"} and helped["directory"] == str(
        world.project)
    # the profile's memories in the slim shape of list and search, not internal records
    assert profile["profile"]["total"] == 1
    assert profile["profile"]["types"]["user"]["memories"] == users["memories"]
    assert not any(t.is_error)


@pytest.mark.slow
def test_the_history_modes_read_the_real_opencode_database(world: World) -> None:
    t = talk(world,
             {"mode": "sessions"},
             {"mode": "messages", "id": world.session, "limit": 2},
             {"mode": "messages", "id": world.session, "offset": 2},
             {"mode": "history-search", "query": "documentation"},
             {"mode": "compactions", "id": AUTO})
    sessions, page1, page2, found, compactions = map(ok, t.results)
    assert [(x["id"], x["title"], x["user_messages"]) for x in sessions["sessions"]] == [
        (world.session, "Release chores", 2)]
    assert [m["role"] for m in page1["messages"]] == ["user", "assistant"]
    assert DIRECTIVE in page1["messages"][0]["text"] and page1["next_offset"] == 2
    assert "make docs" in json.dumps(page2["messages"]) and page2["next_offset"] is None
    assert [h["session_id"] for h in found["results"]] == [world.session]
    assert compactions["count"] >= 1 and compactions["compactions"][0]["summary"]


# -- writing ------------------------------------------------------------------------------

@pytest.mark.slow
def test_add_is_deduplicated_and_found_by_search(fresh_world: World) -> None:
    w = fresh_world
    fact = "The staging database is called heron-staging."
    t = talk(w, {"mode": "add", "content": fact, "type": "project"},
             {"mode": "add", "content": fact, "type": "project"},
             {"mode": "search", "query": "staging database name"},
             {"mode": "add", "content": "I review code in the mornings.", "scope": "user"},
             {"mode": "profile"})
    first, again, search, user, profile = map(ok, t.results)
    memory_id = first["memory"]["id"]
    assert first["memory"]["content"] == fact and first["memory"]["scope"] == "project"
    assert again["memory"]["id"] == memory_id and again["status"] != "added"
    assert search["results"][0]["id"] == memory_id
    stored = {m["id"]: m for m in w.everything()}
    assert stored[memory_id]["source"] == "manual"
    assert stored[memory_id]["project_id"] == PROJECT_ID
    assert sum(m["content"] == fact for m in stored.values()) == 1
    assert stored[user["memory"]["id"]]["scope"] == "user"
    # the agent's user-scope note waits for the user: not their profile yet
    assert stored[user["memory"]["id"]]["pending"] is True
    assert "I review code in the mornings." not in json.dumps(profile["profile"])


@pytest.mark.slow
def test_forget_leaves_a_tombstone_that_search_no_longer_finds(fresh_world: World) -> None:
    w = fresh_world
    added = ok(talk(w, {"mode": "add", "content": "The API server also listens on port "
                                                  "9090."}).results[0])
    port = added["memory"]["id"]
    t = talk(w, {"mode": "forget", "id": port},
             {"mode": "search", "query": "API server port 9090"},
             {"mode": "list"})
    forgot, search, listed = map(ok, t.results)
    assert forgot["forgotten"]["id"] == port
    assert port not in [h["id"] for h in search["results"]]
    assert port not in [m["id"] for m in listed["memories"]]
    tomb = next(m for m in w.everything() if m["id"] == port)
    assert tomb["status"] == "retired" and tomb["retired_reason"] == "forgotten"


@pytest.mark.slow
def test_capture_now_extracts_the_newest_session_of_the_folder(fresh_world: World) -> None:
    w = fresh_world
    t = talk(w, {"mode": "capture-now"}, {"mode": "capture-now"})
    first, second = map(ok, t.results)
    assert first["capture"]["session_id"] == w.session
    assert first["capture"]["report"]["added"] == 1
    assert second["capture"]["report"]["added"] == 0  # nothing new the second time
    contents = [m["content"] for m in w.everything()]
    assert "The release branch is called release/next." in contents


# -- bad arguments, no daemon ---------------------------------------------------------------



@pytest.mark.slow
def test_bad_arguments_answer_a_clear_error_and_change_nothing(world: World) -> None:
    before = world.everything()
    t = talk(world, *(args for args, _ in BAD_CALLS))
    wrong_tool = talk(world, {"mode": "help"}, tool="recall")
    after = world.everything()

    answers = [(args, r.get("success"), err, expected.lower() in str(r.get("error")).lower())
               for (args, expected), r, err in zip(BAD_CALLS, t.results, t.is_error,
                                                  strict=True)]
    assert [a for a in answers if a[1:] != (False, True, True)] == [], t.results
    assert wrong_tool.results[0]["success"] is False and "memory" in wrong_tool.results[0][
        "error"]
    assert after == before


@pytest.mark.slow
def test_without_a_daemon_every_mode_says_how_to_start_it(tmp_path: Path) -> None:
    w = make_world(tmp_path / "world", daemon=False)
    calls = [{"mode": m, "query": "pnpm", "content": "A fact.", "id": w.session}
             for m in MODES if m != "help"]
    counted: list[int] = []

    def open_the_store() -> None:  # Edge refuses a store another process holds
        store = EdgeStore(w.store_dir())
        try:
            counted.append(store.count())
        finally:
            store.close()

    t = talk(w, *calls, during=open_the_store)
    for args, result in zip(calls, t.results, strict=True):
        assert result["success"] is False, (args, result)
        assert result["error"] == START_HINT
        assert "systemctl --user start opencode-memoryd" in result["error"]
        assert "opencode-memoryd run" in result["error"]
    assert all(t.is_error)
    assert counted == [len(w.seeds)]  # the server never opened the store, nor changed it


@pytest.mark.slow
def test_a_frozen_daemon_is_reported_in_seconds(fresh_world: World) -> None:
    w = fresh_world
    assert w.daemon is not None
    w.daemon.send_signal(signal.SIGSTOP)
    try:
        t = talk(w, {"mode": "search", "query": "pnpm"})
    finally:
        w.daemon.send_signal(signal.SIGCONT)
    assert t.results[0]["success"] is False
    assert "did not answer" in t.results[0]["error"]
    assert t.seconds[0] < 30  # a ping timeout, not the client's two minutes
