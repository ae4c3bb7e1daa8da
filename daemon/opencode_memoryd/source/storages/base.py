"""The protocol every OpenCode storage of turns implements, and the values it returns.

A storage is where a session's turns live in an OpenCode database: the 1.x ``message`` and
``part`` tables (:mod:`.v1`) or the v2 ``session_message`` table (:mod:`.v2`). Each session
is read from one storage (:func:`~.registry.storage_of`); everything that differs between
them answers here: reading the messages after a high-water mark, the position of the newest
row, finding one row again, whether a turn is in flight, the history browser's pages and
text search, and what capture keeps per storage (outbox ids, rowids, whether a position can
be compared across reads).

Strategies hold no state: every method takes the :class:`Reader` (the open database) it
reads through, so one instance of each serves every database. A position is a pair
``(int, message id)`` whose meaning belongs to the storage; positions of two storages are
never compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opencode_memoryd.conversation.rows import MessageRow
from opencode_memoryd.conversation.transcript import Readable
from opencode_memoryd.source.schema import SchemaInfo

#: A row's place in its storage, for a high-water mark: ``(int, message id)``.
Position = tuple[int, str]


class Reader(Protocol):
    """What a storage reads through: the open, read-only database
    (:class:`~opencode_memoryd.source.reader.OpenCodeDB`)."""

    path: Path
    schema: SchemaInfo

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run one bounded read-only statement; all its rows (raises ``SourceError``)."""
        ...

    def read_transaction(self) -> AbstractContextManager[None]:
        """One short, explicit read transaction (a consistent snapshot), always ended."""
        ...


@dataclass(frozen=True, slots=True)
class TextPart:
    """A text found by a history search: its text and where it was said.

    ``time_created`` is the message's (ms since the epoch); ``role`` ``user`` or
    ``assistant``; ``summary`` is set for a compaction summary's text; ``part_id`` is the
    part's id (1.x) or the row's (v2, one per row).
    """

    session_id: str
    session_title: str
    message_id: str
    part_id: str
    role: str
    time_created: int
    text: str
    summary: bool


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One compaction of a session: the user message that asked for it (id, time in ms),
    its ``compaction`` part (``auto``, ``overflow``), and the summary message OpenCode
    wrote (``None`` until it is written, or when it was deleted). In ``session_message``
    one ``compaction`` row is both: the request and, once its ``summary`` is written, the
    summary (render it with :meth:`Storage.render`)."""

    request_id: str
    request_time: int
    part: dict[str, Any]
    summary: MessageRow | None


@dataclass(frozen=True, slots=True)
class SearchScope:
    """The sessions a history search looks in: ``condition`` is SQL on ``s`` (the session
    row) with its named ``params``; ``patterns`` are ``LIKE … ESCAPE '\\'`` patterns the
    row's JSON must all match."""

    condition: str
    params: Mapping[str, Any]
    patterns: Sequence[str]


class Storage(Protocol):
    """One storage of turns. Attributes:

    name: what a high-water mark records (:attr:`~opencode_memoryd.models.Mark.storage`).
    label: the OpenCode generation it belongs to (``1.x``, ``v2``), for ``doctor``.
    tables: the tables it reads.
    stable_positions: a row's position never changes once written, so positions read at
        different times compare; ``False``: OpenCode may rewrite positions, so a row is
        found again by its id (:meth:`locate`).
    keeps_rowid: its rows have a SQLite rowid that grows with every insert, kept beside
        a mark (``max_rowid``) to see rows written with an older time.
    looks_again: a finished turn may end with updates in place that change detection
        does not see, so a session waiting on an unfinished turn is looked at again.
    """

    name: str
    label: str
    tables: tuple[str, ...]
    stable_positions: bool
    keeps_rowid: bool
    looks_again: bool

    def present(self, schema: SchemaInfo) -> bool:
        """Whether the database has this storage's tables."""
        ...

    def holds(self, db: Reader, session_id: str) -> bool:
        """Whether the session has a row here (one indexed look-up; only when
        :meth:`present`)."""
        ...

    def holds_sql(self, schema: SchemaInfo, session_id_sql: str) -> str | None:
        """An SQL condition: the session whose id is the SQL expression
        ``session_id_sql`` has a row here (``None`` when the tables are absent)."""
        ...

    def newest_row_sql(self, schema: SchemaInfo, session_id_sql: str) -> str | None:
        """An SQL expression for the newest time (ms) a session's rows here show that its
        ``time_updated`` may not (``None``: its ``time_updated`` covers them)."""
        ...

    # -- capture -------------------------------------------------------------------

    def messages_after(self, db: Reader, session_id: str, mark: Position | None, *,
                       limit: int, max_rowid: int | None) -> list[MessageRow]:
        """Up to ``limit`` messages of the session after ``mark`` (``None``: from the
        start) in read order, each with its parts, from one consistent snapshot;
        ``max_rowid``: rows with a larger rowid count as after the mark too (storages
        that keep rowids). Raises ``SourceError``."""
        ...

    def last_positions(self, db: Reader, session_ids: Sequence[str]) -> dict[str, Position]:
        """The position of each session's newest row; sessions without rows are left out."""
        ...

    def locate(self, db: Reader, session_id: str, message_id: str) -> Position | None:
        """The position of one row of the session, or ``None`` when it is not there."""
        ...

    def in_flight(self, db: Reader, session_id: str, *, now_ms: int,
                  abandoned_ms: int) -> bool:
        """Whether one of the session's newest assistant messages is still being written
        (started less than ``abandoned_ms`` ago)."""
        ...

    def may_have_tool_parts(self, db: Reader, session_id: str) -> bool:
        """Whether the session may hold a tool call or a patch (``True`` when unsure)."""
        ...

    def max_rowids(self, db: Reader, session_ids: Sequence[str]) -> dict[str, int]:
        """The largest rowid of each session's rows (empty where rowids are not kept)."""
        ...

    def rowid_through(self, db: Reader, session_id: str, position: Position) -> int:
        """The largest rowid of the session's rows at or before ``position`` (0: none)."""
        ...

    def read_up_to(self, newest: Position, mark: Position) -> bool:
        """Whether a mark at ``mark`` has read the session through its newest row
        ``newest``."""
        ...

    def position_time(self, position: Position) -> int | None:
        """The creation time (ms) a position carries, or ``None`` when it has none."""
        ...

    def chunk_key(self, source_id: str, session_id: str, first: Position,
                  last: Position) -> str:
        """The text an outbox id is hashed from, for the chunk from ``first`` to ``last``
        (it must stay the same across reads of the same rows)."""
        ...

    # -- the history browser -------------------------------------------------------

    def message_count(self, db: Reader, session_id: str) -> int:
        """How many rows :meth:`message_page` pages over."""
        ...

    def message_page(self, db: Reader, session_id: str, *, offset: int,
                     limit: int) -> list[MessageRow]:
        """Rows ``offset`` … ``offset + limit - 1`` a person sees, in read order."""
        ...

    def role_counts(self, db: Reader, session_ids: Sequence[str]
                    ) -> dict[str, tuple[int, int]]:
        """``{session_id: (user messages, assistant messages)}`` of the sessions read
        from here (others are left out)."""
        ...

    def text_parts_like(self, db: Reader, scope: SearchScope, *, batch: int,
                        max_rows: int) -> Iterator[TextPart]:
        """Candidate texts of the scope's top-level sessions read from here, newest
        first, ``batch`` rows a statement and ``max_rows`` in all."""
        ...

    def compactions(self, db: Reader, session_id: str, *, limit: int) -> list[Checkpoint]:
        """The session's compaction checkpoints, oldest first, at most ``limit``."""
        ...

    def render(self, message: MessageRow, *, tool_output_chars: int) -> Readable:
        """One of its messages as readable text."""
        ...

    def role_of(self, message: MessageRow) -> str:
        """The role a message is shown with (``user``, ``assistant``; ``""``: unknown)."""
        ...
