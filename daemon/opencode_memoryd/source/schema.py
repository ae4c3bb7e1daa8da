"""Which OpenCode schema a database has: tables and columns, migrations, storage layout.

Observed on databases written by OpenCode 1.2.1 to 1.18.33: the ``session``, ``message``
and ``part`` tables keep one shape, and ``session`` gains columns over time (``path``,
``time_archived``, ``version``), so those are read only when present. Migrations are counted
in Drizzle's ``__drizzle_migrations`` table up to 1.3.x and in ``migration`` later (a
database upgraded in place has both; ``migration`` wins).

Two storage layouts hold turns, often side by side in one file:

* 1.x: ``message`` + ``part``, sessions in ``session``;
* v2: ``session_message`` (written by OpenCode 1.18.33 for sessions driven through its
  ``/api/session`` routes, and by 2.x for every new session), sessions in ``session`` (1.18.33)
  or ``session_v2`` (2.x, which leaves the 1.x tables frozen in the same file).

A database is readable when it has ``project`` and at least one complete layout; every table
of either layout that exists must have the columns read from it. Detection runs a handful of
catalogue queries through a :class:`Query` the reader supplies, so this module holds the
rules and no database driver; the reader runs it again when the schema cookie changes (an
upgrade adds tables under a running daemon).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opencode_memoryd.errors import SourceSchemaError

#: Columns read from each 1.x table (table -> columns).
REQUIRED_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "session": ("id", "project_id", "parent_id", "directory", "title", "time_created",
                "time_updated"),
    "message": ("id", "session_id", "time_created", "time_updated", "data"),
    "part": ("id", "message_id", "data"),
    "project": ("id", "worktree"),
}
#: Columns read from each v2 table, when the table exists.
V2_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "session_message": ("id", "session_id", "type", "seq", "time_created", "time_updated",
                        "data"),
    "session_v2": ("id", "project_id", "parent_id", "directory", "title", "time_created",
                   "time_updated"),
}
#: Session columns added over time (``path`` by 1.14.34, for example), read when present.
OPTIONAL_SESSION_COLUMNS: tuple[str, ...] = ("path", "time_archived", "version")
#: The tables OpenCode writes sessions and turns to, 1.x and v2 (each has ``time_created``).
CONVERSATION_TABLES: tuple[str, ...] = ("session", "message", "part", "session_v2",
                                        "session_message")
#: The conversation tables the reader reads; rows written to any other one of
#: :data:`CONVERSATION_TABLES` are turns this version does not capture.
READ_TABLES: frozenset[str] = frozenset({"session", "message", "part", "session_v2",
                                         "session_message"})
#: ``session_v2`` columns read when present (2.x).
OPTIONAL_V2_SESSION_COLUMNS: tuple[str, ...] = ("time_archived", "time_idle", "time_suspended")
#: Every table OpenCode is known to create: 1.2.1 to 1.18.33 (observed) and 2.x (reported).
#: A table outside this list that holds per-session rows is a storage shape we do not read.
KNOWN_TABLES: frozenset[str] = frozenset({
    "session", "message", "part", "todo", "project", "project_directory", "permission",
    "session_share", "workspace", "event", "event_sequence", "session_message",
    "session_input", "session_context_epoch", "account", "account_state", "control_account",
    "credential", "data_migration", "migration", "__drizzle_migrations", "sqlite_sequence",
    "session_v2", "session_inbox", "session_pending", "kv",
})


class Query(Protocol):
    """Run one read-only SQL statement and return all its rows (a reader's ``_rows``)."""

    def __call__(
        self, sql: str, params: Mapping[str, Any] | None = None, /
    ) -> Sequence[Sequence[Any]]: ...


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """What :func:`detect_schema` found in a database.

    Attributes:
        migrations: the number of applied migrations (``migration`` or Drizzle's table).
        last_migration: the newest migration id, when the ``migration`` table exists.
        session_columns: the optional ``session`` columns present.
        has_v2_sessions: whether an OpenCode 2 ``session_v2`` table exists.
        tables: every table of the database.
        v2_session_columns: the optional ``session_v2`` columns present.
    """

    migrations: int
    last_migration: str | None
    session_columns: frozenset[str]
    has_v2_sessions: bool
    tables: frozenset[str] = frozenset()
    v2_session_columns: frozenset[str] = frozenset()

    @property
    def has_v1_sessions(self) -> bool:
        """Whether the 1.x ``session`` table exists."""
        return "session" in self.tables

    @property
    def has_v1_messages(self) -> bool:
        """Whether the 1.x ``message`` and ``part`` tables exist."""
        return {"message", "part"} <= self.tables

    @property
    def has_session_message(self) -> bool:
        """Whether the v2 ``session_message`` table exists."""
        return "session_message" in self.tables

    @property
    def storage(self) -> str:
        """The layouts read, e.g. ``message/part + session_message``."""
        kinds = []
        if self.has_v1_messages:
            kinds.append("message/part")
        if self.has_session_message:
            kinds.append("session_message (sessions in session_v2)" if self.has_v2_sessions
                         else "session_message")
        return " + ".join(kinds) or "none"

    @property
    def unknown_tables(self) -> list[str]:
        """Tables that no known OpenCode release creates, sorted."""
        return sorted(t for t in self.tables
                      if t not in KNOWN_TABLES and not t.startswith("sqlite_"))

    def describe(self) -> str:
        """A one-line human description, e.g. ``38 migrations, last 20260622…; reads …``."""
        last = f", last {self.last_migration}" if self.last_migration else ""
        return f"{self.migrations} migrations{last}; reads {self.storage}"


def detect_schema(query: Query, path: Path) -> SchemaInfo:
    """Check that a database has a readable layout, and describe it.

    Args:
        query: runs catalogue statements on the database (``sqlite_master``, ``PRAGMA
            table_info``, the migration tables).
        path: the database file, named in error messages.

    Returns:
        The database's :class:`SchemaInfo`.

    Raises:
        SourceSchemaError: no complete layout (1.x ``session``/``message``/``part``, or v2
            ``session_message`` with ``session`` or ``session_v2``), no ``project`` table,
            or a table we read lacks a column; the message lists every one of them.
        Whatever ``query`` raises for a failed read.
    """
    tables = frozenset(r[0] for r in query(
        "SELECT name FROM sqlite_master WHERE type='table'"))
    missing: list[str] = []
    columns: dict[str, set[str]] = {}
    for table, required in {**REQUIRED_COLUMNS, **V2_COLUMNS}.items():
        if table not in tables:
            continue
        cols = {r[1] for r in query(f"PRAGMA table_info({table})")}
        columns[table] = cols
        missing.extend(f"column {table}.{c}" for c in required if c not in cols)
    v1 = {"session", "message", "part"} <= tables
    v2 = "session_message" in tables and bool({"session", "session_v2"} & tables)
    if not (v1 or v2):
        missing.extend(f"table {t}" for t in ("session", "message", "part")
                       if t not in tables)
    if "project" not in tables:
        missing.append("table project")
    if missing:
        raise SourceSchemaError(
            f"unrecognised OpenCode database schema in {path}: missing " + ", ".join(missing)
            + " (readable layouts: session + message + part, or session_message with "
            "session or session_v2)"
        )
    migrations, last = 0, None
    if "migration" in tables:
        rows = query("SELECT id FROM migration ORDER BY id")
        migrations, last = len(rows), (rows[-1][0] if rows else None)
    elif "__drizzle_migrations" in tables:
        migrations = int(query("SELECT count(*) FROM __drizzle_migrations")[0][0])
    return SchemaInfo(
        migrations=migrations,
        last_migration=last,
        session_columns=frozenset(c for c in OPTIONAL_SESSION_COLUMNS
                                  if c in columns.get("session", set())),
        has_v2_sessions="session_v2" in tables,
        tables=tables,
        v2_session_columns=frozenset(c for c in OPTIONAL_V2_SESSION_COLUMNS
                                     if c in columns.get("session_v2", set())),
    )


#: Rows in a table of unknown shape count as recent writes when this young (ms).
RECENT_WRITES_MS = 3 * 86_400_000
#: Columns of a time stamp in an unknown table, tried in this order.
_TIME_COLUMNS = ("time_updated", "time_created", "updated", "created", "time")


@dataclass(frozen=True, slots=True)
class UnknownTable:
    """A table no known OpenCode release creates, that holds per-session rows.

    Attributes:
        name: the table.
        rows: its row count.
        newest_ms: the newest time stamp in it (ms; seconds are converted), or ``None``
            when it has no time column.
    """

    name: str
    rows: int
    newest_ms: int | None

    def recent(self, now_ms: int) -> bool:
        """Whether its newest time stamp is less than :data:`RECENT_WRITES_MS` old."""
        return self.newest_ms is not None and self.newest_ms >= now_ms - RECENT_WRITES_MS


def unknown_tables(query: Query, schema: SchemaInfo) -> list[UnknownTable]:
    """The unknown tables (:attr:`SchemaInfo.unknown_tables`) that look like conversation
    storage: a ``session_id`` column, or a name with ``message``, ``part`` or ``turn``.
    Reads each one's row count and newest time stamp (a scan of tables OpenCode has not
    told us about; run at start-up and at each sweep, not on every change)."""
    out: list[UnknownTable] = []
    for table in schema.unknown_tables:
        cols = {str(r[1]) for r in query(f'PRAGMA table_info("{table}")')}
        if "session_id" not in cols and not any(w in table for w in
                                                 ("message", "part", "turn")):
            continue
        rows = int(query(f'SELECT count(*) FROM "{table}"')[0][0])
        newest: int | None = None
        col = next((c for c in _TIME_COLUMNS if c in cols), None)
        if col is not None:
            value = query(f'SELECT max("{col}") FROM "{table}"')[0][0]
            if isinstance(value, int | float):
                newest = int(value * 1000) if value < 100_000_000_000 else int(value)
        out.append(UnknownTable(table, rows, newest))
    return out


def table_activity(query: Query, tables: Sequence[str], since_ms: int
                   ) -> dict[str, tuple[int, int | None]]:
    """How many rows of each table were created after ``since_ms``, and the newest one.

    For ``doctor``, never the daemon's loop: one full scan of each table (most have no
    ``time_created`` index). Tables that are absent, or have no ``time_created``
    column, are left out.

    Args:
        tables: table names, such as
            :data:`~opencode_memoryd.source.schema.CONVERSATION_TABLES`; only names
            of existing tables reach the SQL text.
        since_ms: a time in ms since the epoch.

    Returns:
        ``{table: (rows created after since_ms, newest time_created in ms or None)}``.

    Raises:
        SourceError: a read failed.
    """
    present = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type='table'")}
    out: dict[str, tuple[int, int | None]] = {}
    for table in tables:
        if table not in present or "time_created" not in {
                r[1] for r in query(f"PRAGMA table_info({table})")}:
            continue
        n, newest = query(
            f'SELECT coalesce(sum(time_created > :t), 0), max(time_created) FROM "{table}"',
            {"t": since_ms})[0]
        out[table] = (int(n), int(newest) if newest is not None else None)
    return out
