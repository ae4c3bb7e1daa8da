"""Write v2 turns (``session_message``) the way OpenCode writes them, and derive a 2.x layout.

:class:`V2Writer` follows what OpenCode 1.18.33 was observed to write through its
``/api/session`` routes: the per-session event counter
(``event_sequence.seq``) advances for every event, so ``session_message.seq`` rises with
gaps; the user row is inserted and updated again a moment later; each model step is an
``assistant`` row inserted without ``time.completed`` and filled in place (``content``,
``finish``, ``time.completed``); ``session.time_updated`` is never bumped. With
``table="session_v2"`` it writes the reported 2.x layout instead: the session in
``session_v2``, an ``idle`` row after each turn and ``session_v2.time_idle``.

:func:`make_synthetic_2x` turns a copy of the v2 fixture into a **synthetic** 2.x database:
``session_v2`` created from the DDL captured from 2.0.x databases by third parties, the v2
sessions moved into it, ``session_message`` re-pointed at it, and the 1.x session imported
the way the 2.x importer is reported to do it (the session copied under the same id, its
messages copied into ``session_message`` with the same ids, the 1.x rows left in place).
"""

from __future__ import annotations

import json
import random
import sqlite3
import string
import time
from pathlib import Path
from typing import Any

from opencode_writer import next_ms

_B62 = string.digits + string.ascii_letters

#: ``session_v2`` as captured from OpenCode 2.0.x databases by third-party readers.
SESSION_V2_DDL = """CREATE TABLE `session_v2` (
  `id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text, `parent_id` text,
  `fork_session_id` text, `fork_boundary` text, `slug` text NOT NULL, `directory` text NOT NULL,
  `path` text, `title` text, `version` text NOT NULL, `share_url` text,
  `summary_additions` integer, `summary_deletions` integer, `summary_files` integer,
  `summary_diffs` text, `metadata` text, `cost` real DEFAULT 0 NOT NULL,
  `tokens_input` integer DEFAULT 0 NOT NULL, `tokens_output` integer DEFAULT 0 NOT NULL,
  `tokens_reasoning` integer DEFAULT 0 NOT NULL, `tokens_cache_read` integer DEFAULT 0 NOT NULL,
  `tokens_cache_write` integer DEFAULT 0 NOT NULL, `revert` text, `permission` text,
  `agent` text, `model` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `time_idle` integer, `time_viewed` integer, `idle_outcome` text, `time_compacting` integer,
  `time_archived` integer, `time_suspended` integer, `resume_attempts` integer DEFAULT 0 NOT NULL,
  CONSTRAINT `fk_session_v2_project_id_project_id_fk` FOREIGN KEY (`project_id`)
    REFERENCES `project`(`id`) ON DELETE CASCADE)"""
SESSION_V2_INDEXES = [
    "CREATE INDEX `session_v2_project_idx` ON `session_v2` (`project_id`)",
    "CREATE INDEX `session_v2_workspace_idx` ON `session_v2` (`workspace_id`)",
    "CREATE INDEX `session_v2_parent_idx` ON `session_v2` (`parent_id`)",
    "CREATE INDEX `session_v2_time_suspended_idx` ON `session_v2` (`time_suspended`) "
    "WHERE \"session_v2\".\"time_suspended\" is not null",
]


def session_message_ddl(parent: str) -> list[str]:
    """``session_message`` and its indexes, with its foreign key to ``parent``."""
    return [
        f"""CREATE TABLE `session_message` (
          `id` text PRIMARY KEY, `session_id` text NOT NULL, `type` text NOT NULL,
          `seq` integer NOT NULL, `time_created` integer NOT NULL,
          `time_updated` integer NOT NULL, `data` text NOT NULL,
          CONSTRAINT `fk_session_message_session_id_{parent}_id_fk` FOREIGN KEY
            (`session_id`) REFERENCES `{parent}`(`id`) ON DELETE CASCADE)""",
        "CREATE UNIQUE INDEX `session_message_session_seq_idx` ON `session_message` "
        "(`session_id`,`seq`)",
        "CREATE INDEX `session_message_session_time_created_id_idx` ON `session_message` "
        "(`session_id`,`time_created`,`id`)",
        "CREATE INDEX `session_message_session_type_seq_idx` ON `session_message` "
        "(`session_id`,`type`,`seq`)",
        "CREATE INDEX `session_message_time_created_idx` ON `session_message` "
        "(`time_created`)",
    ]


class V2Writer:
    """A writer connection appending v2 sessions and turns (to a copy, never a real DB).

    Args:
        path: the database.
        table: ``session`` (OpenCode 1.18.33) or ``session_v2`` (the 2.x layout).
        pause: seconds between the writes of one turn (rows are updated after insert).
    """

    def __init__(self, path: Path, *, table: str = "session", pause: float = 0.05,
                 seed: int = 0) -> None:
        self.conn = sqlite3.connect(str(path), timeout=5, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000",
                       "foreign_keys=ON"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.table = table
        self.pause = pause
        self._rng = random.Random(seed)
        self._counter = 0
        self._last_ms = 0
        self._skew_ms = 0

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def now_ms(self) -> int:
        """Strictly increasing milliseconds, never ahead of the writer's clock (the real
        one unless :meth:`set_clock` moved it)."""
        if self._skew_ms:
            self._last_ms = max(int(time.time() * 1000) + self._skew_ms, self._last_ms + 1)
            return self._last_ms
        self._last_ms = next_ms(self._last_ms)
        return self._last_ms

    def set_clock(self, skew_ms: int) -> None:
        """Set the writer's clock ``skew_ms`` ahead of (or, negative, behind) the real one:
        turns said days ago."""
        self._skew_ms = skew_ms
        self._last_ms = 0

    def new_id(self, prefix: str, ms: int) -> str:
        """An id in OpenCode's shape: ``prefix_`` + 12 hex + 14 base62."""
        self._counter += 1
        value = (ms * 4096 + self._counter) & ((1 << 48) - 1)
        return f"{prefix}_{value:012x}" + "".join(self._rng.choice(_B62) for _ in range(14))

    def _commit(self, sql: str, params: tuple[Any, ...]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(sql, params)
        self.conn.execute("COMMIT")

    def new_session(self, *, project_id: str, directory: str, title: str = "New session"
                    ) -> str:
        """Insert a session of the writer's table (its project must exist); return its id."""
        ms = self.now_ms()
        sid = self.new_id("ses", ms)
        self._commit(
            f"INSERT INTO {self.table} (id, project_id, slug, directory, path, title, version, "
            "time_created, time_updated) VALUES (?, ?, ?, ?, '', ?, '1.18.33', ?, ?)",
            (sid, project_id, sid[-8:], directory, title, ms, ms))
        self._commit("INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, 1)", (sid,))
        return sid

    def _seq(self, sid: str, events: int) -> int:
        """Advance the session's event counter by ``events``; return the new value."""
        self._commit("UPDATE event_sequence SET seq = seq + ? WHERE aggregate_id = ?",
                     (events, sid))
        row = self.conn.execute("SELECT seq FROM event_sequence WHERE aggregate_id = ?",
                                (sid,)).fetchone()
        return int(row[0])

    def row(self, sid: str, kind: str, data: dict[str, Any], *, gap: int = 1) -> str:
        """Insert one ``session_message`` row after ``gap`` events; return its id."""
        ms = self.now_ms()
        mid = self.new_id("msg", ms)
        seq = self._seq(sid, gap)
        self._commit("INSERT INTO session_message (id, session_id, type, seq, time_created, "
                     "time_updated, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (mid, sid, kind, seq, ms, ms, json.dumps(data)))
        return mid

    def update(self, mid: str, data: dict[str, Any]) -> None:
        """Rewrite a row's ``data`` in place (``time_updated`` moves)."""
        self._commit("UPDATE session_message SET data = ?, time_updated = ? WHERE id = ?",
                     (json.dumps(data), self.now_ms(), mid))

    def _assistant(self, sid: str, content: list[dict[str, Any]], finish: str | None
                   ) -> tuple[str, dict[str, Any]]:
        ms = self.now_ms()
        data: dict[str, Any] = {"time": {"created": ms}, "agent": "build",
                                "model": {"id": "stub-coder", "providerID": "stub"},
                                "content": []}
        mid = self.row(sid, "assistant", data, gap=self._rng.randint(1, 3))
        time.sleep(self.pause)
        self._seq(sid, self._rng.randint(2, 6))  # reasoning/text/tool events in between
        data["content"] = content
        self.update(mid, data)
        if finish is not None:
            time.sleep(self.pause)
            data["finish"] = finish
            data["time"]["completed"] = self.now_ms()
            data["tokens"] = {"input": 10, "output": 5, "reasoning": 0,
                              "cache": {"read": 0, "write": 0}}
            self.update(mid, data)
        return mid, data

    def user(self, sid: str, text: str) -> str:
        """Write a user row (updated again a moment later, as observed); return its id."""
        user = {"time": {"created": self.now_ms()}, "text": text}
        umid = self.row(sid, "user", user, gap=2)  # prompt.admitted, then prompted
        time.sleep(self.pause)
        self.update(umid, user)
        return umid

    def tool_step(self, sid: str, umid: str, bash: str) -> str:
        """Write a completed ``tool-calls`` step whose bash result sits in its ``content``;
        return its id."""
        tool = {"type": "tool", "id": "call_" + umid[-10:], "name": "bash",
                "provider": {"executed": False},
                "state": {"status": "completed",
                          "input": {"command": bash, "description": "Run it"},
                          "content": [{"type": "text", "text": "ok\n"},
                                      {"type": "text", "text": "Command exited with code 0."}],
                          "structured": {"exit": 0, "truncated": False}}}
        return self._assistant(sid, [tool], "tool-calls")[0]

    def answer(self, sid: str, text: str, *, finish: bool = True) -> tuple[str, dict[str, Any]]:
        """Write a text step, ended with ``finish: stop`` unless ``finish`` is false (then
        in flight); return its id and ``data``."""
        return self._assistant(sid, [{"type": "text", "id": "text-0", "text": text}],
                               "stop" if finish else None)

    def append_turn(self, sid: str, user_text: str, reply_text: str = "Done.", *,
                    bash: str | None = None, finish: bool = True, busy: bool = False
                    ) -> dict[str, Any]:
        """Write one turn: the user row (updated again), with ``bash`` a ``tool-calls``
        step whose tool result sits in its ``content``, then the answering step.

        With ``finish=False`` the last step stays in flight; finish it with
        :meth:`complete`. With ``busy=True`` (2.x) the step ends but the session's busy
        period goes on (a queued prompt or background work): no :meth:`end_turn`.
        Returns ``{"user", "assistants": [ids], "last": data, "end"}``: ``end`` is the
        turn's last row (the ``idle`` row in the 2.x layout).
        """
        umid = self.user(sid, user_text)
        assistants = [self.tool_step(sid, umid, bash)] if bash else []
        mid, data = self.answer(sid, reply_text, finish=finish)
        assistants.append(mid)
        end = (self.end_turn(sid) or mid) if finish and not busy else mid
        return {"user": umid, "assistants": assistants, "last": data, "end": end}

    def complete(self, sid: str, mid: str, data: dict[str, Any], *, busy: bool = False
                 ) -> str:
        """Finish an in-flight step (``finish`` and ``time.completed``) and, unless
        ``busy``, end the turn; return the turn's last row id."""
        data["finish"] = "stop"
        data["time"]["completed"] = self.now_ms()
        self.update(mid, data)
        return mid if busy else (self.end_turn(sid) or mid)

    def claim(self, sid: str) -> None:
        """2.x: the busy period's claim, ``time_suspended`` = now unless already held
        (``SessionStore.claim``, on the commit of ``session.execution.started``)."""
        self._commit("UPDATE session_v2 SET time_suspended = ? "
                     "WHERE id = ? AND time_suspended IS NULL", (self.now_ms(), sid))

    def end_turn(self, sid: str) -> str | None:
        """2.x only: the end of the busy period (``session.execution.succeeded``): the
        ``idle`` row, ``session_v2.time_idle``/``idle_outcome``, then the claim released
        (``time_suspended`` cleared); return the idle row's id."""
        if self.table != "session_v2":
            return None
        ms = self.now_ms()
        mid = self.row(sid, "idle", {"time": {"created": ms}, "outcome": "succeeded"})
        self._commit("UPDATE session_v2 SET time_idle = ?, idle_outcome = 'succeeded' "
                     "WHERE id = ?", (ms, sid))
        self._commit("UPDATE session_v2 SET time_suspended = NULL, resume_attempts = 0 "
                     "WHERE id = ?", (sid,))
        return mid


def make_synthetic_2x(path: Path) -> dict[str, Any]:
    """Reshape a copy of the v2 fixture into a SYNTHETIC OpenCode 2.x layout (see the
    module docstring); return ``{"moved": [ids], "imported": id}``."""
    c = sqlite3.connect(str(path), isolation_level=None)
    c.execute("PRAGMA foreign_keys=OFF")
    c.execute("BEGIN")
    c.execute(SESSION_V2_DDL)
    for ddl in SESSION_V2_INDEXES:
        c.execute(ddl)
    cols = [r[1] for r in c.execute("PRAGMA table_info(session)")]
    v2_cols = {r[1] for r in c.execute("PRAGMA table_info(session_v2)")}
    shared = ", ".join(x for x in cols if x in v2_cols)
    moved = [r[0] for r in c.execute("SELECT DISTINCT session_id FROM session_message")]
    legacy = [r[0] for r in c.execute("SELECT id FROM session") if r[0] not in moved]
    c.execute(f"INSERT INTO session_v2 ({shared}) SELECT {shared} FROM session")
    for sid in moved:
        c.execute("DELETE FROM session WHERE id = ?", (sid,))
        c.execute("DELETE FROM session_context_epoch WHERE session_id = ?", (sid,))
    # session_message re-pointed at session_v2 (SQLite: rebuild the table)
    table, *indexes = session_message_ddl("session_v2")
    c.execute(table.replace("CREATE TABLE `session_message`", "CREATE TABLE `sm_new`"))
    c.execute("INSERT INTO sm_new SELECT * FROM session_message")
    c.execute("DROP TABLE session_message")
    c.execute("ALTER TABLE sm_new RENAME TO session_message")
    for ddl in indexes:
        c.execute(ddl)
    # idle rows after every turn (seq = the last row's + 1: seq has gaps to spare)
    for sid in moved:
        rows = c.execute("SELECT type, seq, time_updated FROM session_message "
                         "WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
        ends = [r for i, r in enumerate(rows) if i + 1 == len(rows) or rows[i + 1][0] == "user"]
        for _kind, seq, ms in ends:
            c.execute("INSERT INTO session_message VALUES (?, ?, 'idle', ?, ?, ?, ?)",
                      (f"msg_idle{sid[-8:]}{seq}", sid, seq + 1, ms + 5, ms + 5,
                       json.dumps({"time": {"created": ms + 5}, "outcome": "completed"})))
    # the importer: the 1.x session's messages copied under the same ids; 1.x rows stay
    for sid in legacy:
        seq = 1
        for mid, created, updated, raw in c.execute(
                "SELECT id, time_created, time_updated, data FROM message WHERE session_id = ?"
                " ORDER BY time_created, id", (sid,)).fetchall():
            data = json.loads(raw)
            parts = [json.loads(p[0]) for p in c.execute(
                "SELECT data FROM part WHERE message_id = ? ORDER BY id", (mid,))]
            role = data.pop("role")
            if role == "user":
                data = {"time": data["time"], "text": "\n".join(
                    p["text"] for p in parts if p.get("type") == "text")}
            else:
                data = {"time": data["time"], "agent": data.get("agent"),
                        "finish": data.get("finish"),
                        "content": [{"type": "text", "id": "text-0", "text": p["text"]}
                                    for p in parts if p.get("type") == "text"]}
            seq += 2
            c.execute("INSERT INTO session_message VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (mid, sid, role, seq, created, updated, json.dumps(data)))
        c.execute("UPDATE session_v2 SET time_idle = time_updated WHERE id = ?", (sid,))
    for ddl in (
        "CREATE TABLE `session_inbox` (`id` text PRIMARY KEY, `session_id` text NOT NULL, "
        "`type` text NOT NULL, `payload` text NOT NULL, `delivery` text NOT NULL, "
        "`enqueued_seq` integer NOT NULL, `time_created` integer NOT NULL)",
        "CREATE TABLE `session_pending` (`id` text PRIMARY KEY, `session_id` text NOT NULL, "
        "`type` text NOT NULL, `data` text NOT NULL, `delivery` text, "
        "`admitted_seq` integer NOT NULL, `time_created` integer NOT NULL)",
        "CREATE TABLE `kv` (`key` text PRIMARY KEY, `value` text NOT NULL)",
        "INSERT INTO kv VALUES ('migration.v1-v2', '{\"status\":\"completed\"}')",
        "DROP TABLE session_input",
        "ALTER TABLE event ADD COLUMN `created` integer DEFAULT 0 NOT NULL",
        "ALTER TABLE project ADD COLUMN `time_active` integer DEFAULT 0 NOT NULL",
    ):
        c.execute(ddl)
    c.execute("COMMIT")
    c.close()
    return {"moved": moved, "imported": legacy[0]}


def rewrite_rows(db: Path, sid: str, *, new_ids: bool = False) -> dict[str, str]:
    """Delete a session's session_message rows and write them again with new seq values
    (as an OpenCode migration that wipes and re-projects the table); return old -> new id."""
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT id, type, seq, time_created, time_updated, data FROM "
                         "session_message WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
        c.execute("DELETE FROM session_message WHERE session_id = ?", (sid,))
        renamed = {}
        for i, (mid, kind, _seq, created, updated, data) in enumerate(rows):
            renamed[mid] = mid.replace("msg_", "msg_n") if new_ids else mid
            c.execute("INSERT INTO session_message VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (renamed[mid], sid, kind, i + 1, created, updated, data))
    return renamed
