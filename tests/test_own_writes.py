"""Read your own writes: a session's first block carries what its project said last, and
``capture-now`` says what it did.

A real daemon on a copy of the genuine OpenCode sample database; turns are written into it
the way OpenCode writes them while the daemon runs. The quiet period is long (600 s), so
nothing here is captured by the debounce: only the first block request (or
``capture-now``) can capture it in time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import wait_until
from opencode_writer import OpenCodeWriter
from test_mcp import PROJECT_ID, World, make_world, ok, talk

pytestmark = pytest.mark.slow

STAGING = "Remember that the staging database is called heron-staging."
STORED = "The staging database is called heron-staging."


def world_with(root: Path, extra: str) -> World:
    """The MCP tests' world (sample database, seeded store, rules mode) with ``extra``
    TOML tables, its daemon started."""
    w = make_world(root, daemon=False)
    w.config.write_text(w.config.read_text() + extra)
    w.start()
    return w


@pytest.fixture
def slow_quiet(tmp_path: Path) -> Iterator[World]:
    """A world whose sessions wait 600 s of quiet; a first block waits up to 60 s for
    its project's (so the test waits on the worker, not on the clock)."""
    w = world_with(tmp_path, "[daemon]\nquiet_period_seconds = 600.0\n"
                             "[context]\ncapture_first_seconds = 60.0\n")
    try:
        yield w
    finally:
        w.stop()


def new_session_saying(w: World, text: str, *, finish: bool = True) -> str:
    """A new session of the world's project whose one turn says ``text``."""
    writer = OpenCodeWriter(w.db)
    try:
        sid = writer.new_session(project_id=PROJECT_ID, directory=str(w.project),
                                 worktree=str(w.project), title="Staging notes")
        writer.append_turn(sid, text, "Noted.", finish=finish)
    finally:
        writer.close()
    return sid


def queued(w: World, session_id: str) -> bool:
    daemon: dict[str, Any] = w.call("status")["daemon"]
    return session_id in [p["session_id"] for p in daemon.get("pending") or []]


def contents(w: World) -> list[str]:
    return [m["content"] for m in w.everything() if m.get("status") != "retired"]


def test_a_new_sessions_first_block_carries_what_was_just_said(slow_quiet: World) -> None:
    w = slow_quiet
    said = new_session_saying(w, STAGING)
    assert wait_until(lambda: queued(w, said), timeout=60, interval=0.05)
    assert STORED not in contents(w)  # still in its quiet period: not captured yet

    block = w.call("context", {"directory": str(w.project), "session": "ses_next_one"})
    assert STORED in block["text"]
    assert STORED in contents(w)


def test_a_turn_still_running_is_not_read_for_the_block(slow_quiet: World) -> None:
    w = slow_quiet
    running = new_session_saying(w, STAGING, finish=False)
    assert wait_until(lambda: queued(w, running), timeout=60, interval=0.05)

    block = w.call("context", {"directory": str(w.project), "session": "ses_next_one"})
    assert STORED not in block["text"]  # the finished-turn rule still decides
    assert STORED not in contents(w)


def test_without_the_wait_the_quiet_period_decides(tmp_path: Path) -> None:
    w = world_with(tmp_path, "[daemon]\nquiet_period_seconds = 600.0\n"
                             "[context]\ncapture_first_seconds = 0\n")
    try:
        said = new_session_saying(w, STAGING)
        assert wait_until(lambda: queued(w, said), timeout=60, interval=0.05)
        block = w.call("context", {"directory": str(w.project), "session": "ses_next_one"})
        assert STORED not in block["text"] and queued(w, said)
    finally:
        w.stop()


def test_capture_now_says_what_it_did(slow_quiet: World) -> None:
    w = slow_quiet
    t = talk(w, {"mode": "capture-now"}, {"mode": "capture-now"})
    first, again = (ok(r)["capture"] for r in t.results)
    assert first["report"]["added"] == 1 and first["message"] == "captured 1 memory"
    assert re.fullmatch(r"nothing new since \d\d:\d\d: everything said is already captured",
                        again["message"]), again["message"]

    new_session_saying(w, STAGING, finish=False)
    running = ok(talk(w, {"mode": "capture-now"}).results[0])["capture"]
    assert running["report"]["added"] == 0
    assert running["message"] == ("the turn is still running: what it says is captured "
                                  "after it ends")
