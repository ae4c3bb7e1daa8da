"""A session's high-water mark before a read: carried across storages, and its rowid.

:func:`reconcile_mark` makes the stored mark a position in the storage the session is read
from (or drops it); :func:`max_rowid` gives, in ``message``, the largest rowid the mark has
read (see the mark and clocks in :mod:`opencode_memoryd.capture.processor`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog

from opencode_memoryd.conversation.rows import SessionRow
from opencode_memoryd.models import Mark, iso_utc
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.storages.registry import named
from opencode_memoryd.state.batch import StateBatch
from opencode_memoryd.state.db import StateDB

log = structlog.get_logger(__name__)

__all__ = ["max_rowid", "reconcile_mark"]


def reconcile_mark(source: OpenCodeDB, state: StateDB | StateBatch, session: SessionRow,
                   storage: str, clock: Callable[[], datetime]) -> None:
    """Make the stored mark a position in ``storage``, or drop it.

    A mark in a storage whose positions never change stays as it is (a reverted message
    may vanish; reading goes on after its position). A mark in a storage that may move
    its rows (``session_message``), or in another storage than the one the session is read
    from now, is looked up by message id: found elsewhere, it moves
    there; not found (the rows were wiped, or the session changed storage without
    carrying the row over), the session is read again from its start.
    """
    src = source.identity
    stored = state.marks.get_mark(src, session.id)
    if stored is None or (stored.storage == storage and named(storage).stable_positions):
        return
    found = source.locate(session.id, stored.position[1], storage)
    if stored.storage == storage and found == stored.position:
        return
    now = iso_utc(clock())
    if found is not None:
        log.info("mark_moved", session_id=session.id, storage=storage,
                 previous_storage=stored.storage)
        state.marks.replace_mark(src, session.id, Mark(storage, found), now)
        return
    log.warning("session_rows_reset", session_id=session.id, storage=storage,
                previous_storage=stored.storage,
                detail="the last row read is gone: reading the session again from its "
                       "start (nothing already stored is stored twice)")
    state.marks.replace_mark(src, session.id, None, now)


def max_rowid(source: OpenCodeDB, state: StateDB | StateBatch, session: SessionRow,
              storage: str, mark: tuple[int, str] | None,
              clock: Callable[[], datetime]) -> int | None:
    """The rowid the session's mark has read up to (``None`` in a storage that keeps no
    rowids, or with no mark). A mark recorded before rowids were kept gets (and keeps)
    the one it stands for: the largest rowid at or before its position
    (:meth:`~opencode_memoryd.source.reader.OpenCodeDB.rowid_through`)."""
    if mark is None or not named(storage).keeps_rowid:
        return None
    src = source.identity
    found = state.marks.get_max_rowid(src, session.id)
    if found is None:
        found = source.rowid_through(session.id, mark, storage)
        state.marks.set_mark(src, session.id, Mark(storage, mark), iso_utc(clock()), found)
    return found
