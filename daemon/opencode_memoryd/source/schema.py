"""Which OpenCode schema a database has: required tables and columns, migrations, layout.

Observed on databases written by OpenCode 1.2.1 to 1.18.33: the ``session``, ``message``
and ``part`` tables keep one shape, and ``session`` gains columns over time (``path``,
``time_archived``, ``version``), so those are read only when present. Migrations are counted
in Drizzle's ``__drizzle_migrations`` table up to 1.3.x and in ``migration`` later (a
database upgraded in place has both; ``migration`` wins). OpenCode 2 writes new sessions to
``session_v2`` and ``session_message`` and leaves the 1.x tables frozen; a database without
the 1.x tables but with ``session_v2`` is named as such in the error.

Detection runs a handful of catalogue queries through a :class:`Query` the reader supplies,
so this module holds the rules and no database driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opencode_memoryd.errors import SourceSchemaError

#: Columns without which a 1.x database cannot be read at all (table -> columns).
REQUIRED_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "session": ("id", "project_id", "parent_id", "directory", "title", "time_created",
                "time_updated"),
    "message": ("id", "session_id", "time_created", "time_updated", "data"),
    "part": ("id", "message_id", "data"),
    "project": ("id", "worktree"),
}
#: Session columns added over time (``path`` by 1.14.34, for example), read when present.
OPTIONAL_SESSION_COLUMNS: tuple[str, ...] = ("path", "time_archived", "version")
#: The tables OpenCode writes sessions and turns to, 1.x and v2 (each has ``time_created``).
CONVERSATION_TABLES: tuple[str, ...] = ("session", "message", "part", "session_v2",
                                        "session_message")
#: The conversation tables the reader reads; rows written to any other one of
#: :data:`CONVERSATION_TABLES` are turns this version does not capture.
READ_TABLES: frozenset[str] = frozenset({"session", "message", "part"})


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
        has_v2_sessions: whether an OpenCode 2 ``session_v2`` table exists (not read).
    """

    migrations: int
    last_migration: str | None
    session_columns: frozenset[str]
    has_v2_sessions: bool

    def describe(self) -> str:
        """A one-line human description, e.g. ``38 migrations, last 20260622…``."""
        last = f", last {self.last_migration}" if self.last_migration else ""
        return f"{self.migrations} migrations{last}"


def detect_schema(query: Query, path: Path) -> SchemaInfo:
    """Check that a database has the 1.x tables and columns, and describe it.

    Args:
        query: runs catalogue statements on the database (``sqlite_master``, ``PRAGMA
            table_info``, the migration tables).
        path: the database file, named in error messages.

    Returns:
        The database's :class:`SchemaInfo`.

    Raises:
        SourceSchemaError: a required table or column is missing; the message lists every
            one of them and says when the database looks like an OpenCode 2 one.
        Whatever ``query`` raises for a failed read.
    """
    tables = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type='table'")}
    missing: list[str] = []
    columns: dict[str, set[str]] = {}
    for table, required in REQUIRED_COLUMNS.items():
        if table not in tables:
            missing.append(f"table {table}")
            continue
        cols = {r[1] for r in query(f"PRAGMA table_info({table})")}
        columns[table] = cols
        missing.extend(f"column {table}.{c}" for c in required if c not in cols)
    if missing:
        hint = ""
        if "session_v2" in tables:
            hint = " (this looks like an OpenCode 2 database, which is not supported yet)"
        raise SourceSchemaError(
            f"unrecognised OpenCode database schema in {path}{hint}: missing "
            + ", ".join(missing)
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
                                  if c in columns["session"]),
        has_v2_sessions="session_v2" in tables,
    )
