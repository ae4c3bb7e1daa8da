"""Read-only access to OpenCode's SQLite database (``opencode.db``).

This is the only module that knows OpenCode's schema. Facts it relies on come from
``docs/opencode-db.md`` (observed on databases written by OpenCode 1.2.1 to 1.18.33):

* the database is opened with a ``file:…?mode=ro`` URI: never ``immutable``, never a write,
  never a checkpoint, never a PRAGMA that changes the file;
* every read is a short bounded query whose cursor is fully consumed; a batch that must be
  consistent across ``message`` and ``part`` runs in one explicit, short read transaction
  that is ended at once, so no read transaction is ever held between reads;
* messages are ordered by ``(time_created, id)`` through the ``(session_id, time_created, id)``
  index and parts are read through the ``(message_id, id)`` index; there is no global scan.

Errors: :class:`~opencode_memoryd.errors.SourceError` when the file is missing or unreadable,
:class:`~opencode_memoryd.errors.SourceSchemaError` when a required table or column is absent.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

from opencode_memoryd.errors import SourceError, SourceSchemaError

log = structlog.get_logger(__name__)

#: Columns without which we cannot read a database at all (table -> columns).
REQUIRED_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "session": ("id", "project_id", "parent_id", "directory", "title", "time_created",
                "time_updated"),
    "message": ("id", "session_id", "time_created", "time_updated", "data"),
    "part": ("id", "message_id", "data"),
    "project": ("id", "worktree"),
}
#: Session columns added over time, read when present (see docs/opencode-db.md §2).
OPTIONAL_SESSION_COLUMNS: tuple[str, ...] = ("path", "time_archived", "version")

#: Largest number of messages read by one query.
MESSAGE_BATCH = 400


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """What :meth:`OpenCodeDB.open` found in the database.

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


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One row of OpenCode's ``session`` table, with its project.

    Times are integer milliseconds since the Unix epoch, as OpenCode stores them.
    ``worktree`` is the project's root (``/`` for the ``global`` project of non-git folders).
    """

    id: str
    project_id: str
    parent_id: str | None
    directory: str
    title: str
    time_created: int
    time_updated: int
    time_archived: int | None
    worktree: str

    @property
    def archived(self) -> bool:
        """OpenCode leaves ``0`` after an unarchive, so only a positive time counts."""
        return bool(self.time_archived and self.time_archived > 0)

    @property
    def is_subagent(self) -> bool:
        """Sub-agent sessions (task tool) have a parent; their "user" is the parent model."""
        return bool(self.parent_id)

    @property
    def project_key(self) -> str:
        """The memory scope of the session's project.

        A git project is OpenCode's own project id (the hash of the repo's root commit, shared
        by worktrees and clones, unchanged when the repo moves). A folder that is not a git
        repository (OpenCode's ``global`` project) is its own scope: ``dir:<directory>``.
        """
        if self.project_id == "global":
            return f"dir:{self.directory}"
        return self.project_id

    @property
    def project_root(self) -> str:
        """The project's root folder: the git worktree, or the folder itself for non-git."""
        return self.directory if self.project_id == "global" else self.worktree


@dataclass(frozen=True, slots=True)
class PartRow:
    """One row of ``part``: ``data`` is the decoded JSON (``{}`` for a corrupt row)."""

    id: str
    data: Mapping[str, Any]


@dataclass(slots=True)
class MessageRow:
    """One row of ``message`` with its parts in ``(message_id, id)`` order.

    ``data`` is the decoded JSON; ``corrupt`` is set when it could not be decoded, in which
    case the message is treated as having no content.
    """

    id: str
    session_id: str
    time_created: int
    time_updated: int
    data: Mapping[str, Any]
    parts: list[PartRow] = field(default_factory=list)
    corrupt: bool = False

    @property
    def role(self) -> str:
        """``user`` or ``assistant`` (``""`` when unknown)."""
        return str(self.data.get("role") or "")

    @property
    def mark(self) -> tuple[int, str]:
        """The message's position for a high-water mark: ``(time_created, id)``."""
        return (self.time_created, self.id)


def _decode(raw: object) -> tuple[dict[str, Any], bool]:
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else None
    except (ValueError, TypeError):
        return {}, True
    if not isinstance(value, dict):
        return {}, True
    return value, False


def discover_databases(data_dir: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """List the OpenCode databases to read, the way OpenCode names them.

    Every ``opencode*.db`` in ``data_dir`` (``opencode.db`` and the per-channel
    ``opencode-<channel>.db``), plus ``$OPENCODE_DB`` when set: an absolute path or a name
    relative to the data dir (``:memory:`` is ignored). Paths are returned absolute,
    de-duplicated, in sorted order; a missing data dir gives an empty list.
    """
    env = os.environ if env is None else env
    found: dict[str, Path] = {}
    if data_dir.is_dir():
        for p in sorted(data_dir.glob("opencode*.db")):
            if p.is_file():
                found[os.path.abspath(p)] = p
    override = env.get("OPENCODE_DB", "").strip()
    if override and override != ":memory:":
        p = Path(override).expanduser()
        if not p.is_absolute():
            p = data_dir / p
        found.setdefault(os.path.abspath(p), p)
    return [Path(k) for k in sorted(found)]


def source_identity(path: Path) -> str:
    """The identity of a source database, used to key high-water marks.

    The canonical absolute path (symlinks resolved). OpenCode session ids are random, so a
    mark is keyed by (identity, session id); a copy of a database at another path is another
    source.
    """
    return str(Path(os.path.realpath(path)))


class OpenCodeDB:
    """A read-only view of one OpenCode database.

    Args:
        path: the ``opencode.db`` file.
        busy_timeout_ms: how long one read waits for a lock (recovery, a closing writer).

    Raises:
        SourceError: the file does not exist or SQLite cannot open it.
        SourceSchemaError: a required table or column is missing (the message names them).
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 3000) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"OpenCode database not found: {self.path}")
        self.identity = source_identity(self.path)
        uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        timeout = max(busy_timeout_ms, 0) / 1000

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False,
                                   isolation_level=None)
            return conn

        # One long-lived connection (needed for PRAGMA data_version), autocommit at the
        # DB-API level: every SELECT is its own short read transaction unless we BEGIN.
        self._engine: Engine = create_engine(
            "sqlite://", creator=connect, poolclass=StaticPool
        )
        self._conn: Connection | None = None
        # one connection, shared by the daemon's threads: one statement at a time
        self._guard = threading.RLock()
        try:
            self._conn = self._engine.connect()
            self.schema = self._detect_schema()
        except DBAPIError as exc:
            self.close()
            raise SourceError(f"cannot read OpenCode database {self.path}: {exc.orig}") from exc
        except SourceSchemaError:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._engine.dispose()

    def __enter__(self) -> OpenCodeDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            raise SourceError(f"OpenCode database {self.path} is closed")
        return self._conn

    def _rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._guard:
            try:
                return list(self.conn.execute(text(sql), dict(params or {})).all())
            except DBAPIError as exc:
                raise SourceError(f"reading {self.path} failed: {exc.orig}") from exc

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        """One short, explicit read transaction (consistent snapshot), always ended."""
        with self._guard:
            raw = self.conn.connection.driver_connection
            assert raw is not None
            raw.execute("BEGIN")
            try:
                yield
            finally:
                raw.execute("COMMIT")

    # -- schema ----------------------------------------------------------------------

    def _detect_schema(self) -> SchemaInfo:
        tables = {r[0] for r in self._rows("SELECT name FROM sqlite_master WHERE type='table'")}
        missing: list[str] = []
        columns: dict[str, set[str]] = {}
        for table, required in REQUIRED_COLUMNS.items():
            if table not in tables:
                missing.append(f"table {table}")
                continue
            cols = {r[1] for r in self._rows(f"PRAGMA table_info({table})")}
            columns[table] = cols
            missing.extend(f"column {table}.{c}" for c in required if c not in cols)
        if missing:
            hint = ""
            if "session_v2" in tables:
                hint = " (this looks like an OpenCode 2 database, which is not supported yet)"
            raise SourceSchemaError(
                f"unrecognised OpenCode database schema in {self.path}{hint}: missing "
                + ", ".join(missing)
            )
        migrations, last = 0, None
        if "migration" in tables:
            rows = self._rows("SELECT id FROM migration ORDER BY id")
            migrations, last = len(rows), (rows[-1][0] if rows else None)
        elif "__drizzle_migrations" in tables:
            migrations = int(self._rows("SELECT count(*) FROM __drizzle_migrations")[0][0])
        return SchemaInfo(
            migrations=migrations,
            last_migration=last,
            session_columns=frozenset(c for c in OPTIONAL_SESSION_COLUMNS
                                      if c in columns["session"]),
            has_v2_sessions="session_v2" in tables,
        )

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes whenever another connection commits."""
        return int(self._rows("PRAGMA data_version")[0][0])

    # -- sessions --------------------------------------------------------------------

    def sessions(
        self,
        *,
        directory: str | None = None,
        include_archived: bool = True,
        include_subagents: bool = False,
        updated_after_ms: int | None = None,
    ) -> list[SessionRow]:
        """List sessions, oldest first.

        Args:
            directory: when given, only the sessions whose project worktree is this folder,
                or whose working directory is this folder or below it (a normalised absolute
                path; it need not exist on this machine).
            include_archived: keep archived sessions.
            include_subagents: keep sub-agent sessions (``parent_id`` set).
            updated_after_ms: only sessions with ``time_updated`` greater than this.
        """
        archived = ("s.time_archived" if "time_archived" in self.schema.session_columns
                    else "NULL")
        where = ["1=1"]
        params: dict[str, Any] = {}
        if directory is not None:
            d = directory.rstrip("/") or "/"
            params["dir"] = d
            params["prefix"] = (d if d.endswith("/") else d + "/")
            # the `global` project's worktree is "/": it never selects sessions by worktree
            where.append(
                "((p.worktree = :dir AND p.worktree != '/') OR s.directory = :dir "
                "OR substr(s.directory, 1, length(:prefix)) = :prefix)"
            )
        if not include_subagents:
            where.append("s.parent_id IS NULL")
        if updated_after_ms is not None:
            where.append("s.time_updated > :after")
            params["after"] = updated_after_ms
        rows = self._rows(
            f"""SELECT s.id, s.project_id, s.parent_id, s.directory, s.title, s.time_created,
                       s.time_updated, {archived}, coalesce(p.worktree, s.directory)
                FROM session s LEFT JOIN project p ON p.id = s.project_id
                WHERE {' AND '.join(where)}
                ORDER BY s.time_created, s.id""",
            params,
        )
        out = [SessionRow(*r) for r in rows]
        if not include_archived:
            out = [s for s in out if not s.archived]
        return out

    def session(self, session_id: str) -> SessionRow | None:
        """One session by id (sub-agents included), or ``None`` when it was deleted."""
        archived = ("s.time_archived" if "time_archived" in self.schema.session_columns
                    else "NULL")
        rows = self._rows(
            f"""SELECT s.id, s.project_id, s.parent_id, s.directory, s.title, s.time_created,
                       s.time_updated, {archived}, coalesce(p.worktree, s.directory)
                FROM session s LEFT JOIN project p ON p.id = s.project_id
                WHERE s.id = :id""",
            {"id": session_id},
        )
        return SessionRow(*rows[0]) if rows else None

    def last_messages(self, session_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The position ``(time_created, id)`` of each session's newest message.

        One lookup per session through the ``(session_id, time_created, id)`` index, in
        batches of 500 ids; sessions without messages are left out. Used to tell, without
        reading any message bodies, whether a session holds anything after its mark.

        Args:
            session_ids: the sessions to look up.

        Returns:
            ``{session_id: (time_created_ms, message_id)}``.
        """
        out: dict[str, tuple[int, str]] = {}
        ids = list(session_ids)
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            params = {f"i{k}": sid for k, sid in enumerate(batch)}
            values = ", ".join(f"(:i{k})" for k in range(len(batch)))
            rows = self._rows(
                f"""WITH ids(sid) AS (VALUES {values})
                    SELECT ids.sid, m.time_created, m.id
                    FROM ids JOIN message m ON m.id = (
                        SELECT id FROM message WHERE session_id = ids.sid
                        ORDER BY time_created DESC, id DESC LIMIT 1)""",
                params,
            )
            out.update({r[0]: (int(r[1]), str(r[2])) for r in rows})
        return out

    def in_flight(self, session_id: str, *, now_ms: int, abandoned_ms: int) -> bool:
        """Whether the session (or a sub-agent of it) has an assistant message in flight.

        Looks at the newest 20 messages of the session and of its child sessions through
        the ``(session_id, time_created, id)`` index; a message in flight for longer than
        ``abandoned_ms`` does not count (a crashed OpenCode leaves one forever).
        """
        ids = [session_id] + [r[0] for r in self._rows(
            "SELECT id FROM session WHERE parent_id = :sid", {"sid": session_id})]
        for sid in ids:
            for (raw,) in self._rows(
                "SELECT data FROM message WHERE session_id = :sid "
                "ORDER BY time_created DESC, id DESC LIMIT 20", {"sid": sid}
            ):
                data, corrupt = _decode(raw)
                if corrupt or data.get("role") != "assistant" or data.get("error"):
                    continue
                t = data.get("time") if isinstance(data.get("time"), dict) else {}
                assert isinstance(t, dict)
                if t.get("completed") is None:
                    created = t.get("created")
                    if isinstance(created, int | float) and now_ms - created < abandoned_ms:
                        return True
        return False

    # -- messages --------------------------------------------------------------------

    def messages_after(
        self,
        session_id: str,
        mark: tuple[int, str] | None,
        *,
        limit: int = MESSAGE_BATCH,
    ) -> list[MessageRow]:
        """Read up to ``limit`` messages of a session after a high-water mark, with parts.

        Args:
            session_id: the session.
            mark: ``(time_created, id)`` of the last message already processed, or ``None``
                for the start of the session.
            limit: the most messages returned; call again from the last one for more.

        Returns:
            Messages in ``(time_created, id)`` order, each with its parts. Messages and parts
            come from one consistent snapshot; the read transaction is closed on return.
        """
        params: dict[str, Any] = {"sid": session_id, "limit": limit}
        cond = ""
        if mark is not None:
            params["t"], params["mid"] = mark
            cond = "AND (time_created > :t OR (time_created = :t AND id > :mid))"
        try:
            with self._read_transaction():
                rows = self._rows(
                    f"""SELECT id, session_id, time_created, time_updated, data FROM message
                        WHERE session_id = :sid {cond}
                        ORDER BY time_created, id LIMIT :limit""",
                    params,
                )
                messages: list[MessageRow] = []
                for r in rows:
                    data, corrupt = _decode(r[4])
                    if corrupt:
                        log.warning("corrupt_message_row", message_id=r[0], session_id=r[1])
                    messages.append(MessageRow(r[0], r[1], int(r[2]), int(r[3]), data,
                                               corrupt=corrupt))
                self._attach_parts(messages)
        except sqlite3.Error as exc:  # raised by BEGIN/COMMIT on the raw connection
            raise SourceError(f"reading {self.path} failed: {exc}") from exc
        return messages

    def _attach_parts(self, messages: Sequence[MessageRow]) -> None:
        by_id = {m.id: m for m in messages}
        for chunk in _chunks(list(by_id), 200):
            names = {f"m{i}": mid for i, mid in enumerate(chunk)}
            placeholders = ", ".join(f":{k}" for k in names)
            for pid, mid, raw in self._rows(
                f"SELECT id, message_id, data FROM part WHERE message_id IN ({placeholders}) "
                "ORDER BY message_id, id",
                names,
            ):
                data, corrupt = _decode(raw)
                if corrupt:
                    log.warning("corrupt_part_row", part_id=pid, message_id=mid)
                by_id[mid].parts.append(PartRow(pid, data))


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
