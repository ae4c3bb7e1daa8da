"""Append sessions and turns to an OpenCode database the way OpenCode 1.18 writes them.

Used by tests and benchmarks to simulate a live OpenCode: the same PRAGMAs
(``journal_mode=WAL``, ``synchronous=NORMAL``, ``busy_timeout=5000``), ids in OpenCode's
shape (prefix, 12 hex of ``ms*4096+counter``, 14 base62), and the write pattern of
docs/opencode-db.md §7: the user message and its text part, an assistant message without
``time.completed``, parts inserted empty and filled later, ``finish`` and ``time.completed``
in separate commits, then the trailing user-message update.
"""

from __future__ import annotations

import json
import random
import sqlite3
import string
import time
from pathlib import Path
from typing import Any

_B62 = string.digits + string.ascii_letters


def next_ms(last_ms: int) -> int:
    """The first millisecond since the epoch after ``last_ms`` that is not ahead of the
    clock (waits for it when the writer is faster than one stamp per millisecond)."""
    ms = int(time.time() * 1000)
    while ms <= last_ms:
        time.sleep((last_ms + 1 - ms) / 1000)
        ms = int(time.time() * 1000)
    return ms


class OpenCodeWriter:
    """A writer connection to an OpenCode database (a copy, never a user's real one)."""

    def __init__(self, path: Path, *, seed: int = 0) -> None:
        self.conn = sqlite3.connect(str(path), timeout=5, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._counter = 0
        self._rng = random.Random(seed)
        self._last_ms = 0
        self._skew_ms = 0

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def now_ms(self) -> int:
        """Strictly increasing milliseconds since the epoch by the writer's clock (the real
        one unless :meth:`set_clock` moved it), never ahead of that clock.

        A writer faster than one stamp per millisecond waits for the next millisecond, as
        OpenCode's own stamps never run ahead of time: a stamp in the future would make a
        finished turn look unsettled to the reader.
        """
        if self._skew_ms:
            self._last_ms = max(int(time.time() * 1000) + self._skew_ms, self._last_ms + 1)
            return self._last_ms
        self._last_ms = next_ms(self._last_ms)
        return self._last_ms

    def set_clock(self, skew_ms: int) -> None:
        """Set the writer's clock ``skew_ms`` ahead of (or, negative, behind) the real one,
        as a machine's clock that is wrong, or corrected: times may go back."""
        self._skew_ms = skew_ms
        self._last_ms = 0

    def new_id(self, prefix: str, ms: int) -> str:
        """An id in OpenCode's shape: ``prefix_`` + 12 hex + 14 base62."""
        self._counter += 1
        value = (ms * 4096 + self._counter) & ((1 << 48) - 1)
        tail = "".join(self._rng.choice(_B62) for _ in range(14))
        return f"{prefix}_{value:012x}{tail}"

    def _commit(self, sql: str, params: tuple[Any, ...]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(sql, params)
        self.conn.execute("COMMIT")

    def new_session(self, *, project_id: str, directory: str, worktree: str | None = None,
                    title: str = "New session", parent_id: str | None = None) -> str:
        """Insert a session (and its project row when missing); return its id."""
        ms = self.now_ms()
        sid = self.new_id("ses", ms)
        if worktree is not None:
            self.conn.execute(
                "INSERT OR IGNORE INTO project (id, worktree, vcs, time_created, time_updated, "
                "sandboxes) VALUES (?, ?, 'git', ?, ?, '[]')",
                (project_id, worktree, ms, ms))
        self._commit(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, path, title, "
            "version, time_created, time_updated) VALUES (?, ?, ?, ?, ?, '', ?, '1.18.33', ?, ?)",
            (sid, project_id, parent_id, sid[-8:], directory, title, ms, ms))
        return sid

    def _insert_message(self, sid: str, data: dict[str, Any], ms: int) -> str:
        mid = self.new_id("msg", ms)
        self._commit("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                     "VALUES (?, ?, ?, ?, ?)", (mid, sid, ms, ms, json.dumps(data)))
        return mid

    def _insert_part(self, sid: str, mid: str, data: dict[str, Any]) -> str:
        ms = self.now_ms()
        pid = self.new_id("prt", ms)
        self._commit("INSERT INTO part (id, message_id, session_id, time_created, time_updated, "
                     "data) VALUES (?, ?, ?, ?, ?, ?)", (pid, mid, sid, ms, ms, json.dumps(data)))
        return pid

    def _update_part(self, pid: str, data: dict[str, Any]) -> None:
        self._commit("UPDATE part SET data=?, time_updated=? WHERE id=?",
                     (json.dumps(data), self.now_ms(), pid))

    def _update_message(self, mid: str, data: dict[str, Any]) -> None:
        self._commit("UPDATE message SET data=?, time_updated=? WHERE id=?",
                     (json.dumps(data), self.now_ms(), mid))

    def append_turn(self, sid: str, user_text: str, reply_text: str = "Done.", *,
                    finish: bool = True, bash: str | None = None,
                    bash_output: str = "ok\n") -> dict[str, str]:
        """Write one turn in OpenCode's order; return the ids written.

        With ``bash``, the assistant first runs that command, whose output is
        ``bash_output``.

        Returns ``{"user": …, "assistant": …, "reply_part": …}``: the two message ids and
        the id of the assistant's text part. With ``bash`` the assistant message holds a
        completed bash tool call of that command, whose output is ``bash_output``. With
        ``finish=False`` the assistant message stays in flight (no ``time.completed``), as
        while the model streams; pass ``reply_part`` to :meth:`stream` to keep streaming
        into it.
        """
        user, umid, assistant, amid = self._open_turn(sid, user_text)
        self._commit("UPDATE session SET time_updated=? WHERE id=?", (self.now_ms(), sid))
        self._insert_part(sid, amid, {"type": "step-start", "snapshot": "0" * 40})
        if bash:
            tp = self._insert_part(sid, amid, {"type": "tool", "tool": "bash", "callID": "c1",
                                               "state": {"status": "pending",
                                                         "input": {"command": bash}}})
            self._update_part(tp, {"type": "tool", "tool": "bash", "callID": "c1",
                                   "state": {"status": "completed", "input": {"command": bash},
                                             "output": bash_output,
                                             "metadata": {"output": bash_output, "exit": 0}}})
        text_part = self._insert_part(sid, amid, {"type": "text", "text": ""})
        self._update_part(text_part, {"type": "text", "text": reply_text})
        result = {"user": umid, "assistant": amid, "reply_part": text_part}
        if not finish:
            return result
        assistant["finish"] = "stop"
        self._update_message(amid, assistant)
        self._insert_part(sid, amid, {"type": "step-finish", "reason": "stop"})
        assistant["time"]["completed"] = self.now_ms()
        self._update_message(amid, assistant)
        self._commit("UPDATE session SET time_updated=? WHERE id=?", (self.now_ms(), sid))
        user["summary"] = {"diffs": []}
        self._update_message(umid, user)
        return result

    def _open_turn(self, sid: str, user_text: str
                   ) -> tuple[dict[str, Any], str, dict[str, Any], str]:
        """Insert a user message with its text part and the assistant message answering
        it, as OpenCode does when a turn starts; return ``(user data, user id, assistant
        data, assistant id)``."""
        ms = self.now_ms()
        user = {"role": "user", "time": {"created": ms}, "agent": "build",
                "model": {"providerID": "stub", "modelID": "stub-model"}}
        umid = self._insert_message(sid, user, ms)
        self._insert_part(sid, umid, {"type": "text", "text": user_text})
        ams = self.now_ms()
        assistant: dict[str, Any] = {
            "role": "assistant", "parentID": umid, "agent": "build", "mode": "build",
            "modelID": "stub-model", "providerID": "stub", "path": {"cwd": "/", "root": "/"},
            "cost": 0, "tokens": {"total": 0, "input": 0, "output": 0, "reasoning": 0,
                                  "cache": {"read": 0, "write": 0}},
            "time": {"created": ams},
        }
        amid = self._insert_message(sid, assistant, ams)
        return user, umid, assistant, amid

    def stream(self, part_id: str, text: str) -> None:
        """Replace the text of an in-flight reply's text part (one commit), as OpenCode
        does for each chunk the model streams."""
        self._update_part(part_id, {"type": "text", "text": text})

    def complete(self, amid: str) -> None:
        """Finish an in-flight assistant message (``finish`` then ``time.completed``)."""
        row = self.conn.execute("SELECT data FROM message WHERE id=?", (amid,)).fetchone()
        data = json.loads(row[0])
        data["finish"] = "stop"
        self._update_message(amid, data)
        data["time"]["completed"] = self.now_ms()
        self._update_message(amid, data)


    def append_tool_turn(self, sid: str, user_text: str, tools: list[dict[str, Any]],
                         reply_text: str = "Done.") -> dict[str, str]:
        """Write one finished turn whose assistant step ran ``tools``; return the ids.

        Each item of ``tools`` is a part as OpenCode stores it: ``{"tool": "bash",
        "state": {...}}`` becomes a ``tool`` part (inserted ``pending``, then updated to
        its final state); ``{"type": "patch", "files": [...]}`` is inserted as is. Returns
        ``{"user": …, "assistant": …}``.
        """
        user, umid, assistant, amid = self._open_turn(sid, user_text)
        self._insert_part(sid, amid, {"type": "step-start", "snapshot": "0" * 40})
        for i, tool in enumerate(tools):
            if tool.get("type") == "patch":
                self._insert_part(sid, amid, dict(tool))
                continue
            final = {"type": "tool", "callID": f"call{i}", **tool}
            state = final.get("state") or {}
            pid = self._insert_part(sid, amid, dict(final, state={
                "status": "pending", "input": state.get("input") or {}}))
            self._update_part(pid, final)
        text_part = self._insert_part(sid, amid, {"type": "text", "text": ""})
        self._update_part(text_part, {"type": "text", "text": reply_text})
        assistant["finish"] = "stop"
        self._update_message(amid, assistant)
        self._insert_part(sid, amid, {"type": "step-finish", "reason": "stop"})
        assistant["time"]["completed"] = self.now_ms()
        self._update_message(amid, assistant)
        self._commit("UPDATE session SET time_updated=? WHERE id=?", (self.now_ms(), sid))
        user["summary"] = {"diffs": []}
        self._update_message(umid, user)
        return {"user": umid, "assistant": amid}


def empty_copy(fixture: Path, dst: Path) -> None:
    """A database with the fixture's schema (the real OpenCode DDL) and no sessions."""
    dst.write_bytes(fixture.read_bytes())
    conn = sqlite3.connect(str(dst), isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    for table in ("part", "message", "todo", "session", "project"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


def replay_session(w: OpenCodeWriter, src: sqlite3.Connection, session_id: str, *,
                   pause: float = 0.02, from_message: int = 0,
                   to_message: int | None = None) -> list[str]:
    """Replay one fixture session's rows in OpenCode's write pattern; return message ids.

    The session and project rows are copied first (when missing); then, message by
    message: the row without ``finish``/``time.completed``, its parts inserted (text parts
    empty, then filled), then ``finish`` and ``time.completed`` in separate commits, then
    the session's ``time_updated`` bump.
    """
    c = w.conn
    srow = src.execute("SELECT * FROM session WHERE id=?", (session_id,)).fetchone()
    cols = [d[1] for d in src.execute("PRAGMA table_info(session)")]
    prow = src.execute("SELECT * FROM project WHERE id=?", (srow[cols.index("project_id")],)
                       ).fetchone()
    pcols = [d[1] for d in src.execute("PRAGMA table_info(project)")]
    c.execute(f"INSERT OR IGNORE INTO project ({', '.join(pcols)}) VALUES "
              f"({', '.join('?' * len(pcols))})", prow)
    c.execute(f"INSERT OR IGNORE INTO session ({', '.join(cols)}) VALUES "
              f"({', '.join('?' * len(cols))})", srow)
    messages = src.execute("SELECT id, session_id, time_created, time_updated, data FROM "
                           "message WHERE session_id=? ORDER BY time_created, id",
                           (session_id,)).fetchall()[from_message:to_message]
    written = []
    for mid, sid, created, updated, raw in messages:
        data = json.loads(raw)
        final = json.loads(raw)
        t = data.get("time") or {}
        t.pop("completed", None)
        data.pop("finish", None)
        w._commit("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                  "VALUES (?, ?, ?, ?, ?)", (mid, sid, created, created, json.dumps(data)))
        time.sleep(pause)
        for pid, pdata in src.execute("SELECT id, data FROM part WHERE message_id=? "
                                      "ORDER BY id", (mid,)).fetchall():
            p = json.loads(pdata)
            first = dict(p, text="") if p.get("type") in ("text", "reasoning") else p
            w._commit("INSERT INTO part (id, message_id, session_id, time_created, "
                      "time_updated, data) VALUES (?, ?, ?, ?, ?, ?)",
                      (pid, mid, sid, created, created, json.dumps(first)))
            if first is not p:
                w._commit("UPDATE part SET data=? WHERE id=?", (pdata, pid))
        if "finish" in final:
            d2 = dict(data, finish=final["finish"])
            w._commit("UPDATE message SET data=? WHERE id=?", (json.dumps(d2), mid))
            time.sleep(pause)
        w._commit("UPDATE message SET data=?, time_updated=? WHERE id=?",
                  (raw, updated, mid))
        w._commit("UPDATE session SET time_updated=? WHERE id=?", (w.now_ms(), sid))
        written.append(mid)
        time.sleep(pause)
    return written
