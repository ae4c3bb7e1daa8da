"""The OpenCode storages this version reads, registered in one place, and the look-ups that
span them.

A session's turns live in exactly one storage (2.x copies 1.x rows under the same ids, so a
session with rows in a newer storage is read from there alone): :func:`storage_of` asks each
storage of :data:`STORAGES` in turn whether it holds the session, the last one answering for
every session none of the others holds. A new storage is one module implementing
:class:`~.base.Storage`, added to :data:`STORAGES` here.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opencode_memoryd.conversation.rows import SessionRow
from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import Mark
from opencode_memoryd.source.schema import SchemaInfo
from opencode_memoryd.source.storages import sessions
from opencode_memoryd.source.storages.base import Reader, SearchScope, Storage, TextPart
from opencode_memoryd.source.storages.sessions import SESSION_SHAPES
from opencode_memoryd.source.storages.v1 import MESSAGE
from opencode_memoryd.source.storages.v2 import SESSION_MESSAGE

#: Every storage, newest first: a session is read from the first that holds rows of it,
#: and from the last when none does.
STORAGES: tuple[Storage, ...] = (SESSION_MESSAGE, MESSAGE)
#: The OpenCode generation (``1.x``, ``v2``) each conversation table belongs to
#: (``session`` is shared), for ``doctor``.
SHAPES: Mapping[str, str] = {**{t: s.label for s in STORAGES for t in s.tables},
                             **SESSION_SHAPES}


def named(name: str) -> Storage:
    """The storage a mark or an outbox item records by ``name``.

    Raises:
        SourceError: no storage has that name (a state file from a newer version).
    """
    for storage in STORAGES:
        if storage.name == name:
            return storage
    raise SourceError(f"unknown OpenCode storage {name!r} (known: "
                      + ", ".join(s.name for s in STORAGES) + ")")


def storage_of(db: Reader, session_id: str) -> Storage:
    """The storage the session's turns are read from (one indexed look-up per storage
    before the last)."""
    for storage in STORAGES[:-1]:
        if storage.present(db.schema) and storage.holds(db, session_id):
            return storage
    return STORAGES[-1]


def last_messages(db: Reader, session_ids: Sequence[str]) -> dict[str, Mark]:
    """``{session_id: Mark(storage, position of its newest row)}``, each session in the
    storage it is read from; sessions without any row are left out."""
    out: dict[str, Mark] = {}
    rest = list(session_ids)
    for storage in STORAGES:
        if not storage.present(db.schema) or not rest:
            continue
        found = storage.last_positions(db, rest)
        out.update({sid: Mark(storage.name, pos) for sid, pos in found.items()})
        rest = [sid for sid in rest if sid not in found]
    return out


def max_rowids(db: Reader, session_ids: Sequence[str]) -> dict[str, int]:
    """The largest rowid of each session's rows in the storages that keep rowids."""
    out: dict[str, int] = {}
    for storage in STORAGES:
        if storage.keeps_rowid:
            out.update(storage.max_rowids(db, session_ids))
    return out


def in_flight(db: Reader, session_id: str, session: SessionRow | None, *, now_ms: int,
              abandoned_ms: int, unconfirmed_ms: int | None) -> bool:
    """Whether the session (or a sub-agent of it) has an assistant message in flight
    (see :meth:`~opencode_memoryd.source.reader.OpenCodeDB.in_flight`; ``session``: its
    row, ``None`` when it was deleted)."""
    claimed_for = abandoned_ms if unconfirmed_ms is None else min(abandoned_ms, unconfirmed_ms)
    if (session is not None and session.time_suspended
            and 0 <= now_ms - session.time_suspended < claimed_for):
        return True
    for sid in [session_id, *sessions.child_ids(db.rows, db.schema, session_id)]:
        st = storage_of(db, sid)
        if st.present(db.schema) and st.in_flight(db, sid, now_ms=now_ms,
                                                   abandoned_ms=abandoned_ms):
            return True
    return False


def role_counts(db: Reader, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{session_id: (user messages, assistant messages)}``, each session counted in the
    storage it is read from; sessions without messages are left out."""
    out: dict[str, tuple[int, int]] = {}
    rest = list(session_ids)
    for storage in STORAGES:
        if not rest:
            break
        out.update(storage.role_counts(db, rest))
        rest = [sid for sid in rest if sid not in out]
    return out


def text_parts_like(db: Reader, condition: str, params: Mapping[str, Any],
                    patterns: Sequence[str], *, batch: int, max_rows: int
                    ) -> Iterator[TextPart]:
    """Candidate texts of the top-level sessions matching ``condition`` (SQL on ``s``)
    whose JSON is ``LIKE`` every pattern, newest first, merged by message time over the
    storages (``max_rows`` at most per storage). A storage looks only at the sessions
    none of the storages before it holds."""
    streams: list[Iterator[TextPart]] = []
    taken: list[str] = []
    for storage in STORAGES:
        cond = " AND ".join([condition, *(f"NOT {t}" for t in taken)])
        streams.append(storage.text_parts_like(db, SearchScope(cond, params, patterns),
                                               batch=batch, max_rows=max_rows))
        held = storage.holds_sql(db.schema, "s.id")
        if held is not None:
            taken.append(held)
    # oldest storage first among texts of the same time
    yield from heapq.merge(*reversed(streams), key=lambda p: p.time_created, reverse=True)


def newest_row_sql(schema: SchemaInfo, session_id_sql: str) -> str:
    """An SQL expression for the newest time (ms) a session's rows show beyond its
    ``time_updated`` (``0`` when no storage keeps one)."""
    found = [e for s in STORAGES if (e := s.newest_row_sql(schema, session_id_sql))]
    return found[0] if len(found) == 1 else f"max({', '.join(found)})" if found else "0"
