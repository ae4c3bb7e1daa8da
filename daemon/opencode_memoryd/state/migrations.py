"""The state file's schema as numbered steps, each run once and recorded.

Every step has a number and a name; the steps a file has had are rows of its
``schema_migrations`` table (``version``, ``name``, ``applied_at``), in the manner of
simonw/llm's ``_llm_migrations`` table (https://github.com/simonw/llm, ``llm/migrations.py``)
and of numbered migration scripts. Opening a file reads that table in one read
transaction; when every step is recorded nothing more happens. Otherwise the steps not
recorded run in order in one write transaction, each recorded as it ends, so a file is
never left between two steps.

A file written before the steps were recorded has no ``schema_migrations``: every step
runs once on it (each is idempotent: ``IF NOT EXISTS``, a column added only when missing)
and is recorded.

``PRAGMA user_version`` keeps the format an older opencode-memoryd checks (it refuses a
file of a higher one): each step says the format it leaves (:attr:`Step.format`); a step
that only adds tables an older version never reads leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from opencode_memoryd.errors import StateError
from opencode_memoryd.models import iso_utc

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["FORMAT_VERSION", "STEPS", "Step", "applied", "migrate", "pending"]


@dataclass(frozen=True)
class Step:
    """One numbered schema step.

    Attributes:
        version: its number (1, 2, …; the order the steps run in).
        name: what it does, recorded with it.
        format: the ``user_version`` a file has after it.
        run: the step itself, given the write transaction's connection.
    """

    version: int
    name: str
    format: int
    run: Callable[[Connection], None]


def _ddl(*statements: str) -> Callable[[Connection], None]:
    def run(c: Connection) -> None:
        for statement in statements:
            c.exec_driver_sql(statement)
    return run


def _columns(added: Mapping[str, tuple[tuple[str, str], ...]]) -> Callable[[Connection], None]:
    """A step adding columns (``{table: ((name, DDL), …)}``) that are missing; existing
    rows get the default."""
    def run(c: Connection) -> None:
        for table, columns in added.items():
            have = {str(r[1]) for r in c.exec_driver_sql(f"PRAGMA table_info({table})").all()}
            for name, ddl in columns:
                if name not in have:
                    c.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}")
    return run


def _both(*runs: Callable[[Connection], None]) -> Callable[[Connection], None]:
    def run(c: Connection) -> None:
        for one in runs:
            one(c)
    return run


_BASE = _ddl(
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
    "CREATE INDEX IF NOT EXISTS queue_due ON queue (due_ms)",
)

_FAILURES_AND_MODES = _ddl(
    """CREATE TABLE IF NOT EXISTS chunk_failures (
        id TEXT PRIMARY KEY,
        source_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        storage TEXT NOT NULL,
        after_time INTEGER,
        after_id TEXT,
        first_time INTEGER NOT NULL,
        first_id TEXT NOT NULL,
        last_time INTEGER NOT NULL,
        last_id TEXT NOT NULL,
        project_key TEXT NOT NULL,
        project_root TEXT,
        fingerprint TEXT NOT NULL,
        reason TEXT NOT NULL,
        failures INTEGER NOT NULL,
        status TEXT NOT NULL,
        first_failed_at TEXT NOT NULL,
        last_failed_at TEXT NOT NULL,
        given_up_at TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS chunk_failures_status ON chunk_failures (status, source_id)",
    """CREATE TABLE IF NOT EXISTS failed_calls (
        at TEXT NOT NULL,
        kind TEXT NOT NULL,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS failed_calls_at ON failed_calls (at)",
    """CREATE TABLE IF NOT EXISTS llm_modes (
        base_url TEXT NOT NULL,
        model TEXT NOT NULL,
        json_mode TEXT NOT NULL,
        start TEXT NOT NULL,
        detail TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (base_url, model)
    )""",
)

_REPLIES = _ddl(
    """CREATE TABLE IF NOT EXISTS llm_replies (
        key TEXT PRIMARY KEY,
        reply TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
)

_AGENT_SECRETS_RECALL = _ddl(
    """CREATE TABLE IF NOT EXISTS agent_forgets (
        at TEXT NOT NULL,
        memory_id TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS secret_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        key BLOB NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS session_secrets (
        source_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        digest BLOB NOT NULL,
        length INTEGER NOT NULL,
        kind TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (source_id, session_id, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS recall_parts (
        session_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        ids TEXT NOT NULL,
        given INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (session_id, message_id)
    )""",
    "CREATE INDEX IF NOT EXISTS recall_parts_offers ON recall_parts (given, created_ms)",
)

#: Every step, in order.
STEPS: tuple[Step, ...] = (
    Step(1, "marks, outbox, queue, runs and dream runs", 1, _BASE),
    Step(2, "the OpenCode table of marks and items (storage)", 2, _columns({
        "marks": (("storage", "TEXT NOT NULL DEFAULT 'message'"),),
        "items": (("storage", "TEXT NOT NULL DEFAULT 'message'"),)})),
    Step(3, "chunk failures, failed calls and LLM modes", 3, _FAILURES_AND_MODES),
    Step(4, "the largest message rowid of a mark, and recorded LLM answers", 4,
         _both(_columns({"marks": (("max_rowid", "INTEGER"),)}), _REPLIES)),
    # tables an older version never reads: the format stays 4
    Step(5, "agent forgets, session secrets and recall parts", 4, _AGENT_SECRETS_RECALL),
)
#: The ``user_version`` this version writes; a file with a higher one is refused.
FORMAT_VERSION = max(step.format for step in STEPS)

_RECORD_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


def applied(c: Connection) -> dict[int, tuple[str, str]]:
    """The steps recorded in the file: ``{version: (name, applied_at)}`` (empty when it
    has no ``schema_migrations`` table)."""
    known = c.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE type='table' "
                              "AND name='schema_migrations'").first()
    if known is None:
        return {}
    return {int(r[0]): (str(r[1]), str(r[2])) for r in c.exec_driver_sql(
        "SELECT version, name, applied_at FROM schema_migrations").all()}


def pending(c: Connection, path: Path) -> list[Step]:
    """The steps the file at ``path`` has not had, in order.

    Raises:
        StateError: a newer opencode-memoryd wrote it (``user_version`` above
            :data:`FORMAT_VERSION`).
    """
    version = c.exec_driver_sql("PRAGMA user_version").scalar() or 0
    if version > FORMAT_VERSION:
        raise StateError(f"state file {path} was written by a newer opencode-memoryd "
                         f"(schema {version} > {FORMAT_VERSION})")
    done = applied(c)
    return [step for step in STEPS if step.version not in done]


def migrate(c: Connection, path: Path, *,
            clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> list[int]:
    """Run the steps the file has not had, in the write transaction of ``c``, recording
    each (``applied_at``: ``clock()`` as ISO-8601 UTC), and raise ``user_version`` to the
    format they leave.

    Returns:
        The versions run (empty when the file was current).

    Raises:
        StateError: as :func:`pending`.
    """
    todo = pending(c, path)
    if not todo:
        return []
    c.exec_driver_sql(_RECORD_TABLE)
    version = c.exec_driver_sql("PRAGMA user_version").scalar() or 0
    for step in todo:
        step.run(c)
        c.exec_driver_sql("INSERT INTO schema_migrations (version, name, applied_at) "
                          "VALUES (?, ?, ?)", (step.version, step.name, iso_utc(clock())))
        version = max(version, step.format)
    c.exec_driver_sql(f"PRAGMA user_version={int(version)}")
    return [step.version for step in todo]
