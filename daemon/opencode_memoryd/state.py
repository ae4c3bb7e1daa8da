"""Our own state, in our own SQLite file under the state dir (never OpenCode's database).

Tables (schema version in ``PRAGMA user_version``):

* ``marks``: the incremental high-water mark per (source database identity, session): the
  ``(time_created, id)`` of the last processed message.
* ``items``: the transactional outbox. One row per extracted chunk of turns, written with
  the extraction result *before* anything reaches the store. Status ``extracted`` means the
  result is recorded but not yet stored; ``stored`` means its memories are durably in the
  store and the session's mark has moved past it (both in one transaction).
* ``queue``: the daemon's work queue: sessions that changed and are waiting to be
  extracted, with their debounce times, so a restart loses no pending work.
* ``runs``: one row per ``maintain`` run with its summary.
* ``dream_runs``: one row per dream (consolidation) run of one scope, with the payloads of
  every memory it touches as they were (``before``) and as it writes them (``after``), so a
  run interrupted while applying is rolled forward and an applied run can be undone (see
  :mod:`opencode_memoryd.dream.dreamer`).

Commits use ``synchronous=FULL`` in WAL mode, so a returned commit survives power loss.
Pattern: transactional outbox + idempotent consumer (docs/reliability.md §2.2-2.3).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from opencode_memoryd.errors import StateError

SCHEMA_VERSION = 1

_DDL = [
    """CREATE TABLE IF NOT EXISTS marks (
        source_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (source_id, session_id)
    )""",
    """CREATE TABLE IF NOT EXISTS items (
        id TEXT PRIMARY KEY,
        source_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        first_time INTEGER NOT NULL,
        first_id TEXT NOT NULL,
        last_time INTEGER NOT NULL,
        last_id TEXT NOT NULL,
        project_key TEXT NOT NULL,
        project_root TEXT,
        status TEXT NOT NULL,
        extractor TEXT NOT NULL,
        model TEXT,
        result TEXT NOT NULL,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS items_session ON items (source_id, session_id, status)",
    """CREATE TABLE IF NOT EXISTS queue (
        source_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        first_change_ms INTEGER NOT NULL,
        last_change_ms INTEGER NOT NULL,
        due_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        PRIMARY KEY (source_id, session_id)
    )""",
    """CREATE TABLE IF NOT EXISTS runs (
        id TEXT PRIMARY KEY,
        command TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        summary TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS dream_runs (
        id TEXT PRIMARY KEY,
        scope_key TEXT NOT NULL,
        project_root TEXT,
        "trigger" TEXT NOT NULL,
        dry_run INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        undone_at TEXT,
        reason TEXT,
        "before" TEXT NOT NULL DEFAULT '[]',
        "after" TEXT NOT NULL DEFAULT '[]',
        counts TEXT NOT NULL DEFAULT '{}',
        model TEXT,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        result TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS dream_runs_scope ON dream_runs (scope_key, started_at)",
    """CREATE TABLE IF NOT EXISTS dream_settled (
        scope_key TEXT NOT NULL,
        signature TEXT NOT NULL,
        run_id TEXT NOT NULL,
        settled_at TEXT NOT NULL,
        PRIMARY KEY (scope_key, signature)
    )""",
    "CREATE INDEX IF NOT EXISTS dream_runs_status ON dream_runs (status)",
]

#: The statuses of a ``dream_runs`` row. ``planned``: recorded, nothing written (final for a
#: dry run; a real run left ``planned`` by a crash is marked ``failed`` on recovery);
#: ``applying``: before/after recorded, writes in progress; ``applied``: every ``after``
#: payload written; ``undoing``: an undo is writing the ``before`` payloads back;
#: ``undone``: undone; ``failed`` / ``skipped``: nothing was changed.
DREAM_STATUSES: tuple[str, ...] = ("planned", "applying", "applied", "undoing", "undone",
                                   "failed", "skipped")
_DREAM_JSON = ("before", "after", "counts", "result")


@dataclass(frozen=True, slots=True)
class Item:
    """One outbox row. ``result`` is the JSON-decoded extraction result."""

    id: str
    source_id: str
    session_id: str
    first: tuple[int, str]
    last: tuple[int, str]
    project_key: str
    project_root: str | None
    status: str
    extractor: str
    model: str | None
    result: dict[str, Any]
    tokens_in: int
    tokens_out: int


class StateDB:
    """The state file (``state.db``).

    Args:
        path: the SQLite file; parent folders are created (mode 0700).

    Raises:
        StateError: the file cannot be created, opened or migrated.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StateError(f"cannot create state dir {self.path.parent}: {exc}") from exc
        self._engine: Engine = create_engine(
            f"sqlite:///{self.path}",
            connect_args={"timeout": 30, "check_same_thread": False},
        )

        @event.listens_for(self._engine, "connect")
        def _pragmas(dbapi_conn: sqlite3.Connection, _rec: object) -> None:
            dbapi_conn.isolation_level = None  # we BEGIN explicitly
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA synchronous=FULL")
            dbapi_conn.execute("PRAGMA busy_timeout=30000")

        @event.listens_for(self._engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        try:
            with self._engine.begin() as c:
                version = c.exec_driver_sql("PRAGMA user_version").scalar() or 0
                if version > SCHEMA_VERSION:
                    raise StateError(
                        f"state file {self.path} was written by a newer opencode-memoryd "
                        f"(schema {version} > {SCHEMA_VERSION})"
                    )
                for ddl in _DDL:
                    c.exec_driver_sql(ddl)
                c.exec_driver_sql(f"PRAGMA user_version={SCHEMA_VERSION}")
        except DBAPIError as exc:
            raise StateError(f"cannot open state file {self.path}: {exc.orig}") from exc

    def close(self) -> None:
        """Release the connection pool."""
        self._engine.dispose()

    # -- marks -----------------------------------------------------------------------

    def get_mark(self, source_id: str, session_id: str) -> tuple[int, str] | None:
        """The session's high-water mark ``(time_created, message_id)``, or ``None``."""
        with self._engine.begin() as c:
            row = c.execute(
                text("SELECT time_created, message_id FROM marks "
                     "WHERE source_id=:s AND session_id=:sid"),
                {"s": source_id, "sid": session_id},
            ).first()
        return (int(row[0]), str(row[1])) if row else None

    def marks(self, source_id: str,
              session_ids: Sequence[str] | None = None) -> dict[str, tuple[int, str]]:
        """The marks of a source, by session id: ``{session_id: (time_created_ms, id)}``.

        Args:
            source_id: the database's identity.
            session_ids: only these sessions (looked up in batches of 500); all when
                ``None``.
        """
        sql = "SELECT session_id, time_created, message_id FROM marks WHERE source_id=:s"
        rows: list[Any] = []
        with self._engine.begin() as c:
            if session_ids is None:
                rows = list(c.execute(text(sql), {"s": source_id}).all())
            else:
                ids = list(session_ids)
                for start in range(0, len(ids), 500):
                    batch = ids[start:start + 500]
                    params: dict[str, Any] = {f"i{k}": v for k, v in enumerate(batch)}
                    params["s"] = source_id
                    names = ", ".join(f":i{k}" for k in range(len(batch)))
                    rows += c.execute(text(f"{sql} AND session_id IN ({names})"), params).all()
        return {r[0]: (int(r[1]), str(r[2])) for r in rows}

    def set_mark(self, source_id: str, session_id: str, mark: tuple[int, str], now: str) -> None:
        """Advance a mark (used when a chunk produced nothing to store)."""
        with self._engine.begin() as c:
            self._set_mark(c, source_id, session_id, mark, now)

    @staticmethod
    def _set_mark(c: Any, source_id: str, session_id: str, mark: tuple[int, str],
                  now: str) -> None:
        c.execute(
            text("""INSERT INTO marks (source_id, session_id, time_created, message_id,
                                       updated_at)
                    VALUES (:s, :sid, :t, :m, :now)
                    ON CONFLICT (source_id, session_id) DO UPDATE SET
                      time_created=excluded.time_created, message_id=excluded.message_id,
                      updated_at=excluded.updated_at
                    WHERE (excluded.time_created, excluded.message_id)
                          > (marks.time_created, marks.message_id)"""),
            {"s": source_id, "sid": session_id, "t": mark[0], "m": mark[1], "now": now},
        )

    # -- outbox ----------------------------------------------------------------------

    def record_item(self, item: Item, now: str) -> None:
        """Durably record an extraction result (status ``extracted``) before storing it.

        Recording the same item id again keeps the first result (idempotent).
        """
        with self._engine.begin() as c:
            c.execute(
                text("""INSERT OR IGNORE INTO items (id, source_id, session_id, first_time,
                          first_id, last_time, last_id, project_key, project_root, status,
                          extractor, model, result, tokens_in, tokens_out, created_at,
                          updated_at)
                        VALUES (:id, :s, :sid, :ft, :fi, :lt, :li, :pk, :pr, 'extracted',
                          :ex, :model, :result, :ti, :to, :now, :now)"""),
                {"id": item.id, "s": item.source_id, "sid": item.session_id,
                 "ft": item.first[0], "fi": item.first[1], "lt": item.last[0],
                 "li": item.last[1], "pk": item.project_key, "pr": item.project_root,
                 "ex": item.extractor, "model": item.model,
                 "result": json.dumps(item.result, sort_keys=True),
                 "ti": item.tokens_in, "to": item.tokens_out, "now": now},
            )

    def complete_item(self, item: Item, now: str) -> None:
        """Mark an item stored and advance its session's mark, in one transaction."""
        with self._engine.begin() as c:
            c.execute(text("UPDATE items SET status='stored', updated_at=:now WHERE id=:id"),
                      {"id": item.id, "now": now})
            self._set_mark(c, item.source_id, item.session_id, item.last, now)

    def pending_items(self, source_id: str, session_id: str | None = None) -> list[Item]:
        """Items recorded but not yet stored (crash recovery), oldest first."""
        sql = "SELECT * FROM items WHERE status='extracted' AND source_id=:s"
        params: dict[str, Any] = {"s": source_id}
        if session_id is not None:
            sql += " AND session_id=:sid"
            params["sid"] = session_id
        with self._engine.begin() as c:
            rows = c.execute(text(sql + " ORDER BY last_time, last_id"), params).mappings().all()
        return [_item(r) for r in rows]

    def get_item(self, item_id: str) -> Item | None:
        """One outbox row by id."""
        with self._engine.begin() as c:
            row = c.execute(text("SELECT * FROM items WHERE id=:id"),
                            {"id": item_id}).mappings().first()
        return _item(row) if row else None

    # -- work queue ------------------------------------------------------------------

    def queue_touch_many(self, source_id: str, session_ids: Sequence[str], now_ms: int,
                         quiet_seconds: float, max_wait_seconds: float) -> dict[str, int]:
        """Record a change of each session at ``now_ms``, in one transaction (one fsync);
        return each session's new due time (ms).

        The first change of a pending session starts its max-wait clock; later changes
        only push the quiet period (see :mod:`opencode_memoryd.debounce`).
        """
        from opencode_memoryd.debounce import Pending

        out: dict[str, int] = {}
        with self._engine.begin() as c:
            for session_id in session_ids:
                row = c.execute(text("SELECT first_change_ms, last_change_ms FROM queue "
                                     "WHERE source_id=:s AND session_id=:sid"),
                                {"s": source_id, "sid": session_id}).first()
                pending = (Pending(int(row[0]), int(row[1])).touched(now_ms) if row
                           else Pending(now_ms, now_ms))
                due = pending.due_ms(quiet_seconds=quiet_seconds,
                                     max_wait_seconds=max_wait_seconds)
                c.execute(text("""INSERT INTO queue (source_id, session_id, first_change_ms,
                                    last_change_ms, due_ms) VALUES (:s, :sid, :f, :l, :d)
                                  ON CONFLICT (source_id, session_id) DO UPDATE SET
                                    last_change_ms=excluded.last_change_ms,
                                    due_ms=excluded.due_ms"""),
                          {"s": source_id, "sid": session_id, "f": pending.first_change_ms,
                           "l": pending.last_change_ms, "d": due})
                out[session_id] = due
        return out

    def queue_reschedule(self, source_id: str, session_id: str, due_ms: int, note: str) -> None:
        """Move a queued session's due time (a wait, not a failure)."""
        with self._engine.begin() as c:
            c.execute(text("UPDATE queue SET due_ms=:d, last_error=:e "
                           "WHERE source_id=:s AND session_id=:sid"),
                      {"s": source_id, "sid": session_id, "d": due_ms, "e": note[:500] or None})

    def queue_failed(self, source_id: str, session_id: str, error: str) -> int:
        """Count a failed attempt of a queued session; return its attempt count."""
        with self._engine.begin() as c:
            c.execute(text("UPDATE queue SET attempts=attempts+1, last_error=:e "
                           "WHERE source_id=:s AND session_id=:sid"),
                      {"s": source_id, "sid": session_id, "e": error[:500]})
            n = c.execute(text("SELECT attempts FROM queue WHERE source_id=:s AND "
                               "session_id=:sid"), {"s": source_id, "sid": session_id}).scalar()
        return int(n or 1)

    def queue_done(self, source_id: str, session_id: str, started_ms: int) -> None:
        """Remove a session from the queue unless it changed again after ``started_ms``."""
        with self._engine.begin() as c:
            c.execute(text("DELETE FROM queue WHERE source_id=:s AND session_id=:sid "
                           "AND last_change_ms <= :t"),
                      {"s": source_id, "sid": session_id, "t": started_ms})

    def queue(self) -> list[dict[str, Any]]:
        """Every queued session, soonest first."""
        with self._engine.begin() as c:
            rows = c.execute(text("SELECT * FROM queue ORDER BY due_ms")).mappings().all()
        return [dict(r) for r in rows]

    def tokens_since(self, iso: str) -> int:
        """LLM tokens (in + out) recorded by items created at or after ``iso`` (UTC)."""
        with self._engine.begin() as c:
            n = c.execute(text("SELECT coalesce(sum(tokens_in + tokens_out), 0) FROM items "
                               "WHERE created_at >= :t"), {"t": iso}).scalar()
        return int(n or 0)

    # -- runs and status -------------------------------------------------------------

    def start_run(self, run_id: str, command: str, now: str) -> None:
        """Record the start of a run."""
        with self._engine.begin() as c:
            c.execute(text("INSERT INTO runs (id, command, started_at) VALUES (:i, :c, :n)"),
                      {"i": run_id, "c": command, "n": now})

    def end_run(self, run_id: str, summary: Mapping[str, Any], now: str) -> None:
        """Record the end of a run with its summary (counts only, never transcript text)."""
        with self._engine.begin() as c:
            c.execute(text("UPDATE runs SET ended_at=:n, summary=:s WHERE id=:i"),
                      {"i": run_id, "n": now, "s": json.dumps(summary, sort_keys=True)})

    def last_runs(self, limit: int = 5) -> list[dict[str, Any]]:
        """The newest runs, newest first, with decoded summaries."""
        with self._engine.begin() as c:
            rows = c.execute(text("SELECT * FROM runs ORDER BY started_at DESC LIMIT :l"),
                             {"l": limit}).mappings().all()
        return [{**r, "summary": json.loads(r["summary"]) if r["summary"] else None}
                for r in rows]

    # -- dream runs ------------------------------------------------------------------

    def dream_start(self, run_id: str, *, scope_key: str, project_root: str | None,
                    trigger: str, dry_run: bool, now: str) -> None:
        """Record a new dream run (status ``planned``, nothing written yet).

        Raises:
            StateError: a run with this id exists, or the state file cannot be written.
        """
        try:
            with self._engine.begin() as c:
                c.execute(
                    text("""INSERT INTO dream_runs (id, scope_key, project_root, "trigger",
                              dry_run, status, started_at)
                            VALUES (:i, :k, :r, :t, :d, 'planned', :n)"""),
                    {"i": run_id, "k": scope_key, "r": project_root, "t": trigger,
                     "d": int(dry_run), "n": now},
                )
        except DBAPIError as exc:
            raise StateError(f"cannot record dream run {run_id}: {exc.orig}") from exc

    def dream_applying(self, run_id: str, *, before: list[dict[str, Any]],
                       after: list[dict[str, Any]], counts: Mapping[str, Any],
                       model: str | None, tokens_in: int, tokens_out: int,
                       result: Mapping[str, Any] | None = None) -> None:
        """Durably record what a run is about to write, and mark it ``applying``.

        One transaction (``synchronous=FULL``): once this returns, a crash at any later
        point is rolled forward from ``after`` by recovery. Only a ``planned`` run moves.
        ``result`` is the run's journal entry as planned (kept for recovery).

        Raises:
            StateError: the run is unknown or not ``planned``.
        """
        with self._engine.begin() as c:
            n = c.execute(
                text("""UPDATE dream_runs SET status='applying', "before"=:b, "after"=:a,
                          counts=:c, model=:m, tokens_in=:ti, tokens_out=:to, result=:r
                        WHERE id=:i AND status='planned'"""),
                {"i": run_id, "b": json.dumps(before, sort_keys=True),
                 "r": json.dumps(dict(result), sort_keys=True) if result is not None else None,
                 "a": json.dumps(after, sort_keys=True),
                 "c": json.dumps(dict(counts), sort_keys=True), "m": model,
                 "ti": int(tokens_in), "to": int(tokens_out)},
            ).rowcount
        if n != 1:
            raise StateError(f"dream run {run_id} is not planned; cannot start applying it")

    def dream_finish(self, run_id: str, status: str, *, now: str | None,
                     reason: str | None = None, counts: Mapping[str, Any] | None = None,
                     model: str | None = None, tokens_in: int | None = None,
                     tokens_out: int | None = None, result: Mapping[str, Any] | None = None,
                     expect: tuple[str, ...] | None = None) -> bool:
        """Move a run to ``status``; set ``ended_at`` (when ``now`` is given) and the given
        fields (``None`` leaves a field as it is).

        Args:
            expect: move only from one of these statuses (compare-and-set).

        Returns:
            Whether the row was updated (``False``: unknown id, or not in ``expect``).

        Raises:
            ValueError: an unknown status.
        """
        if status not in DREAM_STATUSES:
            raise ValueError(f"unknown dream run status {status!r}")
        sets = ["status=:s"]
        params: dict[str, Any] = {"i": run_id, "s": status}
        for col, value in (("ended_at", now), ("reason", reason), ("model", model),
                           ("tokens_in", tokens_in), ("tokens_out", tokens_out)):
            if value is not None:
                sets.append(f"{col}=:{col}")
                params[col] = value
        if counts is not None:
            sets.append("counts=:counts")
            params["counts"] = json.dumps(dict(counts), sort_keys=True)
        if result is not None:
            sets.append("result=:result")
            params["result"] = json.dumps(dict(result), sort_keys=True)
        sql = f"UPDATE dream_runs SET {', '.join(sets)} WHERE id=:i"
        if expect is not None:
            names = [f":e{i}" for i in range(len(expect))]
            sql += f" AND status IN ({', '.join(names)})"
            params.update({f"e{i}": e for i, e in enumerate(expect)})
        with self._engine.begin() as c:
            return c.execute(text(sql), params).rowcount == 1

    def dream_mark_undo(self, run_id: str, status: str, now: str, *,
                        expect: tuple[str, ...]) -> bool:
        """Compare-and-set the status of an undo (``undoing`` / ``undone``) and stamp
        ``undone_at``; ``True`` when the row moved."""
        if status not in ("undoing", "undone"):
            raise ValueError(f"not an undo status: {status!r}")
        names = [f":e{i}" for i in range(len(expect))]
        params: dict[str, Any] = {"i": run_id, "s": status, "n": now}
        params.update({f"e{i}": e for i, e in enumerate(expect)})
        with self._engine.begin() as c:
            return c.execute(
                text(f"UPDATE dream_runs SET status=:s, undone_at=:n WHERE id=:i "
                     f"AND status IN ({', '.join(names)})"), params).rowcount == 1

    def dream_settled(self, scope_key: str) -> set[str]:
        """Signatures of the candidate groups of a scope that a dream already settled
        (planned "keep", or a plan rejected by a check)."""
        with self._engine.begin() as c:
            rows = c.execute(text("SELECT signature FROM dream_settled WHERE scope_key=:k"),
                             {"k": scope_key}).all()
        return {str(r[0]) for r in rows}

    def dream_settle(self, scope_key: str, signatures: Sequence[str], run_id: str,
                     now: str) -> None:
        """Record group signatures as settled by ``run_id`` (idempotent)."""
        if not signatures:
            return
        with self._engine.begin() as c:
            c.execute(text("INSERT OR IGNORE INTO dream_settled (scope_key, signature, "
                           "run_id, settled_at) VALUES (:k, :s, :r, :now)"),
                      [{"k": scope_key, "s": sig, "r": run_id, "now": now}
                       for sig in signatures])

    def dream_run(self, run_id: str) -> dict[str, Any] | None:
        """One dream run with its JSON columns decoded, or ``None``.

        Keys: ``id, scope_key, project_root, trigger, dry_run (bool), status, started_at,
        ended_at, undone_at, reason, before (list of payloads), after (list of payloads),
        counts (dict), model, tokens_in, tokens_out, result (dict or None), seq`` (``seq``:
        insertion order, increasing).
        """
        with self._engine.begin() as c:
            row = c.execute(text("SELECT rowid AS seq, * FROM dream_runs WHERE id=:i"),
                            {"i": run_id}).mappings().first()
        return _dream_row(row) if row else None

    def dream_runs(self, *, scope_key: str | None = None,
                   statuses: tuple[str, ...] | None = None, dry_run: bool | None = None,
                   limit: int | None = None, newest_first: bool = True
                   ) -> list[dict[str, Any]]:
        """Dream runs (as :meth:`dream_run`, plus ``seq``: the insertion order), filtered
        by scope, statuses and dry-run flag, in the order they were started."""
        sql = "SELECT rowid AS seq, * FROM dream_runs WHERE 1=1"
        params: dict[str, Any] = {}
        if scope_key is not None:
            sql += " AND scope_key=:k"
            params["k"] = scope_key
        if statuses is not None:
            names = [f":s{i}" for i in range(len(statuses))]
            sql += f" AND status IN ({', '.join(names) or 'NULL'})"
            params.update({f"s{i}": s for i, s in enumerate(statuses)})
        if dry_run is not None:
            sql += " AND dry_run=:d"
            params["d"] = int(dry_run)
        order = "DESC" if newest_first else "ASC"
        sql += f" ORDER BY rowid {order}"
        if limit is not None:
            sql += " LIMIT :l"
            params["l"] = int(limit)
        with self._engine.begin() as c:
            rows = c.execute(text(sql), params).mappings().all()
        return [_dream_row(r) for r in rows]

    def last_dream(self, scope_key: str) -> dict[str, Any] | None:
        """The newest dream of a scope that was not a dry run and did not fail
        (``applied``, ``skipped``, ``undone``, …), or ``None`` — for scheduling."""
        with self._engine.begin() as c:
            row = c.execute(
                text("""SELECT rowid AS seq, * FROM dream_runs WHERE scope_key=:k
                          AND dry_run=0 AND status NOT IN ('failed', 'planned')
                        ORDER BY rowid DESC LIMIT 1"""),
                {"k": scope_key}).mappings().first()
        return _dream_row(row) if row else None

    def counts(self) -> dict[str, int]:
        """Numbers for ``status``: sessions with marks, items by status, tokens spent."""
        with self._engine.begin() as c:
            sessions = c.exec_driver_sql("SELECT count(*) FROM marks").scalar() or 0
            by_status = dict(c.exec_driver_sql(
                "SELECT status, count(*) FROM items GROUP BY status").all())
            tokens = c.exec_driver_sql(
                "SELECT coalesce(sum(tokens_in),0), coalesce(sum(tokens_out),0) FROM items"
            ).first()
        return {
            "sessions_tracked": int(sessions),
            "items_stored": int(by_status.get("stored", 0)),
            "items_pending": int(by_status.get("extracted", 0)),
            "tokens_in": int(tokens[0]) if tokens else 0,
            "tokens_out": int(tokens[1]) if tokens else 0,
        }


def _dream_row(r: Mapping[str, Any]) -> dict[str, Any]:
    row = dict(r)
    row["dry_run"] = bool(row["dry_run"])
    for key in _DREAM_JSON:
        row[key] = json.loads(row[key]) if row[key] is not None else None
    return row


def _item(r: Mapping[str, Any]) -> Item:
    return Item(
        id=r["id"], source_id=r["source_id"], session_id=r["session_id"],
        first=(int(r["first_time"]), r["first_id"]), last=(int(r["last_time"]), r["last_id"]),
        project_key=r["project_key"], project_root=r["project_root"], status=r["status"],
        extractor=r["extractor"], model=r["model"], result=json.loads(r["result"]),
        tokens_in=int(r["tokens_in"]), tokens_out=int(r["tokens_out"]),
    )
