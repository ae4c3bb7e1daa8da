"""Batched state writes: the progress of many sessions in one transaction.

Extracting a session ends in a few small state writes (its mark, its outbox item, its queue
row). Committing each on its own costs a commit per chunk; a :class:`StateBatch` collects
them in memory, answers reads with them applied (a session's mark and items as they will
be), and writes them all in one light transaction (:meth:`StateDB.apply_batch`) when
:meth:`StateBatch.commit` is called.

What a batch holds is progress that can be made again from OpenCode's database: a crash
before the commit leaves the marks where they were, so those turns are read again, the rules
extractor answers the same, an item recorded durably beforehand (an LLM answer,
:meth:`~opencode_memoryd.state.items.OutboxTable.record_item`) is replayed instead of
asked again, and the store merges what it holds already. The caller flushes the store
before committing, so a mark is never durable before the memories it covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from opencode_memoryd.models import Mark

if TYPE_CHECKING:
    from opencode_memoryd.state.db import BatchOp, StateDB
    from opencode_memoryd.state.items import Item

__all__ = ["StateBatch"]

#: Marks a batch knows to be absent (deleted by :meth:`StateBatch.replace_mark`).
_NO_MARK = Mark("", (0, ""))


class StateBatch:
    """Deferred state writes with read-your-writes; the same methods as the
    :class:`~opencode_memoryd.state.db.StateDB` calls they stand for.

    Not thread-safe: one batch belongs to one thread.

    Args:
        state: the state file the batch is committed to.
    """

    def __init__(self, state: StateDB) -> None:
        self.state = state
        self._ops: list[BatchOp] = []
        self._marks: dict[tuple[str, str], Mark] = {}
        self._rowids: dict[tuple[str, str], int | None] = {}
        self._items: dict[str, Item] = {}  # recorded or completed here, by id
        # read-through copies of what the state file held when first asked (until commit)
        self._stored_marks: dict[tuple[str, str], tuple[Mark | None, int | None]] = {}
        self._stored_items: dict[str, Item] = {}
        # read ahead by :meth:`prefetch`: marks, and each session's stored items; valid
        # while the state file saw no write transaction since (_ahead_at)
        self._ahead_marks: dict[tuple[str, str], tuple[Mark | None, int | None]] = {}
        self._known: dict[tuple[str, str], list[Item]] = {}
        self._ahead_at = -1

    def __len__(self) -> int:
        """Writes waiting for :meth:`commit`."""
        return len(self._ops)

    # The batch stands in for each repository whose writes it defers, so a caller given a
    # :class:`StateDB` or a batch calls ``state.marks.get_mark(…)`` either way.

    @property
    def marks(self) -> StateBatch:
        """This batch, standing in for :attr:`StateDB.marks`."""
        return self

    @property
    def outbox(self) -> StateBatch:
        """This batch, standing in for :attr:`StateDB.outbox`."""
        return self

    @property
    def queue(self) -> StateBatch:
        """This batch, standing in for :attr:`StateDB.queue`."""
        return self

    # -- reads -----------------------------------------------------------------------
    # A mark read from the state file is kept until the commit (one read per session and
    # batch): the session is worked by this batch's thread alone meanwhile, and the commit's
    # writes never move a mark back whatever was read. An outbox row found is kept too; one
    # not found is looked up again (it may be recorded durably, outside the batch).

    def prefetch(self, source_id: str, session_ids: Sequence[str]) -> None:
        """Read the marks and outbox items of many sessions at once
        (:meth:`StateDB.sessions_state`), so that working them asks the state file nothing
        more until the commit.

        What was read ahead is used only while the state file saw no write transaction
        since (:attr:`StateDB.write_count`): a session another thread worked meanwhile
        (a ``maintain`` asked of the daemon) is looked up again.
        """
        if self._ahead_at != self.state.write_count:
            self._forget_ahead()
        want = [sid for sid in session_ids if (source_id, sid) not in self._known]
        if not want:
            return
        at = self.state.write_count
        marks, items = self.state.sessions_state(source_id, want)
        if not self._known:
            self._ahead_at = at
        elif at != self._ahead_at:  # a write came between the two reads: start over
            self._forget_ahead()
            self._ahead_at = at
        for sid in want:
            key = (source_id, sid)
            self._known[key] = []
            self._ahead_marks[key] = marks.get(sid, (None, None))
        for item in items:
            self._known[(item.source_id, item.session_id)].append(item)

    def _forget_ahead(self) -> None:
        self._ahead_marks.clear()
        self._known.clear()
        self._ahead_at = -1

    def _ahead(self, key: tuple[str, str]) -> list[Item] | None:
        """The session's stored items as read ahead, when that read is still true
        (nothing was written to the state file since); else ``None``."""
        if not self._known:
            return None
        if self._ahead_at != self.state.write_count:  # e.g. another thread's maintain
            self._forget_ahead()
            return None
        return self._known.get(key)

    def _stored_mark(self, key: tuple[str, str]) -> tuple[Mark | None, int | None]:
        got = self._stored_marks.get(key)
        if got is None:
            if self._ahead(key) is not None:
                got = self._stored_marks[key] = self._ahead_marks[key]
            else:
                got = self._stored_marks[key] = self.state.marks.get_mark_row(*key)
        return got

    def get_mark(self, source_id: str, session_id: str) -> Mark | None:
        """The session's mark as it will be once committed."""
        key = (source_id, session_id)
        got = self._marks.get(key)
        if got is None:
            return self._stored_mark(key)[0]
        return None if got == _NO_MARK else got

    def get_max_rowid(self, source_id: str, session_id: str) -> int | None:
        """The mark's ``max_rowid`` as it will be once committed."""
        key = (source_id, session_id)
        if key in self._rowids:
            return self._rowids[key]
        return self._stored_mark(key)[1]

    def get_item(self, item_id: str, session: tuple[str, str] | None = None
                 ) -> Item | None:
        """An outbox row as it will be once committed; ``session``: its ``(source id,
        session id)``, when known (a session read by :meth:`prefetch` is not asked
        again)."""
        got = self._items.get(item_id) or self._stored_items.get(item_id)
        ahead = self._ahead(session) if got is None and session is not None else None
        if ahead is not None:
            got = next((i for i in ahead if i.id == item_id), None)
        elif got is None:
            got = self.state.outbox.get_item(item_id)
            if got is not None:
                self._stored_items[item_id] = got
        return got

    def pending_items(self, source_id: str, session_id: str) -> list[Item]:
        """The session's items recorded but not stored, as they will be once committed."""
        known = self._ahead((source_id, session_id))
        if known is not None:
            out = {i.id: i for i in known if i.status == "extracted"}
        else:
            out = {i.id: i for i in self.state.outbox.pending_items(source_id, session_id)}
        for item in self._items.values():
            if item.source_id == source_id and item.session_id == session_id:
                if item.status == "extracted":
                    out[item.id] = item
                else:
                    out.pop(item.id, None)
        return sorted(out.values(), key=lambda i: i.last)

    # -- writes ----------------------------------------------------------------------

    def _move(self, source_id: str, session_id: str, mark: Mark,
              max_rowid: int | None) -> None:
        """The overlay of ``set_mark``: position and ``max_rowid`` only grow within one
        storage; another storage replaces both."""
        key = (source_id, session_id)
        old = self.get_mark(source_id, session_id)
        rowid = self.get_max_rowid(source_id, session_id) if old is not None else None
        if old is None or mark.storage != old.storage:
            self._marks[key], self._rowids[key] = mark, max_rowid
            return
        if mark.position > old.position:
            self._marks[key] = mark
        if max_rowid is not None and (rowid is None or max_rowid > rowid):
            self._rowids[key] = max_rowid

    def set_mark(self, source_id: str, session_id: str, mark: Mark, now: str,
                 max_rowid: int | None = None) -> None:
        """:meth:`~opencode_memoryd.state.items.MarkTable.set_mark`, deferred."""
        self._move(source_id, session_id, mark, max_rowid)
        self._ops.append(("mark", source_id, session_id, mark, now, max_rowid))

    def replace_mark(self, source_id: str, session_id: str, mark: Mark | None,
                     now: str) -> None:
        """:meth:`~opencode_memoryd.state.items.MarkTable.replace_mark`, deferred."""
        key = (source_id, session_id)
        self._marks[key] = mark if mark is not None else _NO_MARK
        self._rowids[key] = None
        self._ops.append(("replace_mark", source_id, session_id, mark, now))

    def record_item(self, item: Item, now: str, *, settles: str | None = None) -> None:
        """:meth:`~opencode_memoryd.state.items.OutboxTable.record_item`, deferred (so *not*
        durable on return: for results that are free to make again)."""
        if self._items.get(item.id) is None and self._stored_items.get(item.id) is None:
            # the caller looked it up just before (recording an id twice keeps the first)
            self._items[item.id] = replace(item, status="extracted")
        self._ops.append(("record", item, now, settles))

    def complete_item(self, item: Item, now: str) -> None:
        """:meth:`~opencode_memoryd.state.items.OutboxTable.complete_item`, deferred."""
        self._items[item.id] = replace(item, status="stored")
        rowid = item.result.get("max_rowid")
        self._move(item.source_id, item.session_id, Mark(item.storage, item.last),
                   None if rowid is None else int(rowid))
        self._ops.append(("complete", item, now))

    def queue_done(self, source_id: str, session_id: str, started_ms: int) -> None:
        """:meth:`~opencode_memoryd.state.queue.QueueTable.queue_done`, deferred (evaluated
        at commit time)."""
        self._ops.append(("queue_done", source_id, session_id, started_ms))

    # -- commit ----------------------------------------------------------------------

    def commit(self) -> int:
        """Write every deferred change in one light transaction and start empty; return
        how many writes were committed.

        Raises:
            DiskFullError: the disk is full (the batch is kept; nothing of it is written).
        """
        n = len(self._ops)
        if n:
            self.state.apply_batch(self._ops)
        self._ops = []
        self._marks.clear()
        self._rowids.clear()
        self._items.clear()
        self._stored_marks.clear()
        self._stored_items.clear()
        self._forget_ahead()
        return n
