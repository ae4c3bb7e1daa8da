"""The state file itself: its SQLAlchemy engine (Core), PRAGMAs, DDL and migration.

Every connection runs in WAL mode. Every write transaction starts with ``BEGIN IMMEDIATE``,
so a writer never fails half-way on a lock upgrade; reads run in a deferred transaction (one
consistent snapshot, no lock held against writers). A write transaction is *durable*
(``synchronous=FULL``: the commit survives power loss) or *light* (``synchronous=NORMAL``:
no fsync; a power loss may take back the newest light commits, but in WAL mode never an
older commit without the newer ones). Light commits hold only progress that can be derived
again from OpenCode's database (see :class:`~opencode_memoryd.state.db.StateDB`). The
schema version is kept in ``PRAGMA user_version``.

The folder is made 0700 and the file (with its ``-wal`` and ``-shm``) 0600 on open, also
when an earlier version left them readable by others. A full disk (``SQLITE_FULL``) is
raised as :class:`~opencode_memoryd.errors.DiskFullError` naming the folder; the
transaction it interrupted is rolled back, so nothing is half-written.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from opencode_memoryd.disk import STATE_MIN_FREE_BYTES, free_bytes, make_private
from opencode_memoryd.errors import DiskFullError, StateError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine, ExceptionContext

__all__ = ["POOL_SIZE", "SCHEMA_VERSION", "StateFile"]

#: The schema this version writes; a file with a higher ``user_version`` is refused.
#: 2 added ``storage`` to ``marks`` and ``items`` (which OpenCode table a position is in);
#: 3 added ``chunk_failures``, ``failed_calls`` and ``llm_modes``;
#: 4 added ``max_rowid`` to ``marks`` (the largest ``message`` rowid processed) and
#: ``llm_replies``.
SCHEMA_VERSION = 4
#: Connections the pool keeps open between transactions (the daemon's main loop, worker,
#: dream thread and a few control requests); more are opened, and closed after use, when
#: more threads use the file at once.
POOL_SIZE = 6

_DDL = [
    """CREATE TABLE IF NOT EXISTS marks (
        source_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        storage TEXT NOT NULL DEFAULT 'message',
        max_rowid INTEGER,
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
        updated_at TEXT NOT NULL,
        storage TEXT NOT NULL DEFAULT 'message'
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
    """CREATE TABLE IF NOT EXISTS llm_replies (
        key TEXT PRIMARY KEY,
        reply TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    # added without a schema change: an older version never reads it
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
]


class StateFile:
    """An open state file, created and migrated to :data:`SCHEMA_VERSION` on open.

    The base of :class:`~opencode_memoryd.state.db.StateDB`; the table classes add their
    operations with :meth:`_tx` (write) and :meth:`_read` (read), each one SQLAlchemy
    ``Connection`` checked out of the engine's pool for the whole transaction. Statements
    go to the driver as they are (``exec_driver_sql``: no compilation), several rows of
    one statement as one ``executemany``. The pool (``QueuePool``) keeps up to
    :data:`POOL_SIZE` connections for the threads using the file at once and opens more
    when more threads ask, so the object may be shared by threads. ``sqlalchemy`` is
    imported when the first state file is opened: a command answered by the daemon never
    loads it.

    Args:
        path: the SQLite file, created with mode 0600; parent folders are created (mode
            0700).

    Raises:
        StateError: the file cannot be created, opened or migrated, or a newer version of
            opencode-memoryd wrote it.
    """

    #: Write transactions that may have changed marks or outbox items, ended through this
    #: object (any thread): what was read of them before is still true while it has not
    #: changed (the process owns the state file).
    write_count = 0

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # created empty (a valid SQLite file) with mode 0600; SQLite gives its -wal and
            # -shm files the same mode
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        except OSError as exc:
            raise StateError(f"cannot create state file {self.path}: {exc}") from exc
        make_private(self.path.parent, (self.path.name + "*",))  # as an older version left it
        from sqlalchemy.exc import DBAPIError

        self._engine: Engine = _open_engine(self.path)
        try:
            with self._tx() as c:
                version = c.exec_driver_sql("PRAGMA user_version").scalar() or 0
                if version > SCHEMA_VERSION:
                    raise StateError(
                        f"state file {self.path} was written by a newer opencode-memoryd "
                        f"(schema {version} > {SCHEMA_VERSION})"
                    )
                for statement in _DDL:
                    c.exec_driver_sql(statement)
                _add_missing_columns(c)
                c.exec_driver_sql(f"PRAGMA user_version={SCHEMA_VERSION}")
        except DBAPIError as exc:
            self.close()
            raise StateError(f"cannot open state file {self.path}: {exc.orig}") from exc
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the pooled connections (ones in use close when they are returned)."""
        self._engine.dispose()

    @contextmanager
    def _tx(self, *, durable: bool = True, outbox: bool = True) -> Iterator[Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on error)
        on one pooled connection.

        The transaction control (``BEGIN``, ``COMMIT``, ``ROLLBACK`` and the
        ``synchronous`` level) goes to the driver connection directly: the engine runs in
        autocommit mode, so SQLAlchemy keeps no transaction of its own, and a control
        statement needs no result object.

        Args:
            durable: ``True``: ``synchronous=FULL``, the commit survives power loss;
                ``False``: ``synchronous=NORMAL``, no fsync (see the module docstring).
            outbox: whether it may write marks or outbox items (counted in
                :attr:`write_count`; the queue's own writes are not).

        Raises:
            DiskFullError: SQLite reported ``SQLITE_FULL`` (nothing was written).
        """
        with self._engine.connect() as conn:
            driver = _driver(conn)
            try:
                if not durable:
                    driver.execute("PRAGMA synchronous=NORMAL")
                try:
                    driver.execute("BEGIN IMMEDIATE")
                    try:
                        yield conn
                    except BaseException:
                        if driver.in_transaction:
                            driver.execute("ROLLBACK")
                        raise
                    try:
                        driver.execute("COMMIT")
                    except BaseException:
                        if driver.in_transaction:
                            driver.execute("ROLLBACK")
                        raise
                    finally:
                        if outbox:
                            self.write_count += 1
                finally:
                    if not durable:  # the pooled connection goes back durable
                        driver.execute("PRAGMA synchronous=FULL")
            except sqlite3.Error as exc:  # a control statement (a statement's is wrapped)
                self._raise_full(exc)
                raise

    def _raise_full(self, exc: sqlite3.Error) -> None:
        """Raise :class:`DiskFullError` for ``SQLITE_FULL`` (else return)."""
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            raise DiskFullError(str(self.path.parent), STATE_MIN_FREE_BYTES,
                                free_bytes(self.path.parent)) from exc

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """One read transaction (deferred ``BEGIN``: a consistent snapshot) on one pooled
        connection."""
        with self._engine.connect() as conn:
            driver = _driver(conn)
            driver.execute("BEGIN")
            try:
                yield conn
            finally:
                driver.execute("COMMIT")


def _driver(conn: Connection) -> sqlite3.Connection:
    """The ``sqlite3`` connection under ``conn`` (for the transaction control)."""
    driver = conn.connection.driver_connection
    if not isinstance(driver, sqlite3.Connection):  # pragma: no cover - pool invariant
        raise StateError("the state file's connection is closed")
    return driver


def _open_engine(path: Path) -> Engine:
    """The state file's engine: a ``QueuePool`` of ``sqlite3`` connections in autocommit
    mode at the driver level (the transactions are the explicit ``BEGIN``/``COMMIT`` of
    :meth:`StateFile._tx` and :meth:`StateFile._read`), each set to WAL,
    ``synchronous=FULL`` and a 30 s busy timeout when it is opened; ``SQLITE_FULL`` is
    raised as :class:`DiskFullError`."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import QueuePool

    engine = create_engine(
        f"sqlite:///{path}", poolclass=QueuePool, pool_size=POOL_SIZE, max_overflow=-1,
        isolation_level="AUTOCOMMIT",
        connect_args={"timeout": 30, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.isolation_level = None  # we BEGIN explicitly
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=FULL")
        dbapi_conn.execute("PRAGMA busy_timeout=30000")

    @event.listens_for(engine, "handle_error")
    def _full(context: ExceptionContext) -> None:
        orig = context.original_exception
        if getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            raise DiskFullError(str(path.parent), STATE_MIN_FREE_BYTES,
                                free_bytes(path.parent)) from orig

    return engine


#: Columns added after schema 1, by table: ``(name, DDL)``. Existing rows get the default.
_ADDED_COLUMNS = {
    "marks": (("storage", "TEXT NOT NULL DEFAULT 'message'"), ("max_rowid", "INTEGER")),
    "items": (("storage", "TEXT NOT NULL DEFAULT 'message'"),),
}


def _add_missing_columns(c: Connection) -> None:
    """Migrate a file of an older schema in place (``ALTER TABLE … ADD COLUMN``)."""
    for table, columns in _ADDED_COLUMNS.items():
        have = {str(r[1]) for r in c.exec_driver_sql(f"PRAGMA table_info({table})").all()}
        for name, ddl in columns:
            if name not in have:
                c.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}")
