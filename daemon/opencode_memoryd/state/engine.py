"""The state file itself: its SQLAlchemy engine (Core), PRAGMAs and transactions.

Every connection runs in WAL mode. Every write transaction starts with ``BEGIN IMMEDIATE``,
so a writer never fails half-way on a lock upgrade; reads run in a deferred transaction (one
consistent snapshot, no lock held against writers). A write transaction is *durable*
(``synchronous=FULL``: the commit survives power loss) or *light* (``synchronous=NORMAL``:
no fsync; a power loss may take back the newest light commits, but in WAL mode never an
older commit without the newer ones). Light commits hold only progress that can be derived
again from OpenCode's database (see :class:`~opencode_memoryd.state.db.StateDB`). The
schema is built by numbered steps, each run once and recorded in the file
(:mod:`~opencode_memoryd.state.migrations`).

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
from opencode_memoryd.state.migrations import FORMAT_VERSION, migrate, pending

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine, ExceptionContext

__all__ = ["POOL_SIZE", "SCHEMA_VERSION", "StateFile"]

#: The format this version writes in ``PRAGMA user_version``; a file with a higher one is
#: refused. The steps that lead to it are :data:`~opencode_memoryd.state.migrations.STEPS`.
SCHEMA_VERSION = FORMAT_VERSION
#: Connections the pool keeps open between transactions (the daemon's main loop, worker,
#: dream thread and a few control requests); more are opened, and closed after use, when
#: more threads use the file at once.
POOL_SIZE = 6


class StateFile:
    """An open state file, created and migrated on open: the schema steps it has not had
    run once (:mod:`~opencode_memoryd.state.migrations`); a current file is only read.

    Shared by the repositories :class:`~opencode_memoryd.state.db.StateDB` composes: each
    runs its operations with :meth:`tx` (write) and :meth:`read` (read), each one SQLAlchemy
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
            with self.read() as c:
                todo = pending(c, self.path)
            if todo:
                with self.tx() as c:
                    migrate(c, self.path)  # again: another process may have run them
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
    def tx(self, *, durable: bool = True, outbox: bool = True) -> Iterator[Connection]:
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
    def read(self) -> Iterator[Connection]:
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
    :meth:`StateFile.tx` and :meth:`StateFile.read`), each set to WAL,
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
