"""Batched state writes, write groups, the work queue's due times and the inotify watcher,
against a real state file, a real EdgeStore and real files."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from opencode_memoryd.capture.batching import WriteGroup
from opencode_memoryd.models import STORAGE_MESSAGE, STORAGE_SESSION_MESSAGE, Mark, Memory
from opencode_memoryd.models import point_id as make_point_id
from opencode_memoryd.source import inotify
from opencode_memoryd.source.watcher import DbWatcher
from opencode_memoryd.state.batch import StateBatch
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.state.items import Item
from opencode_memoryd.store.edge import EdgeStore

SRC = "/tmp/opencode.db"
NOW = "2025-06-01T12:00:00.000Z"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state.db")
    yield db
    db.close()


def rows(state: StateDB, sql: str) -> list[tuple[object, ...]]:
    """Rows read through a separate connection: what another process sees."""
    with sqlite3.connect(state.path) as c:
        return c.execute(sql).fetchall()


def item(session: str, last: tuple[int, str], *, candidates: int = 0) -> Item:
    return Item(id=f"item-{session}-{last[1]}", source_id=SRC, session_id=session,
                first=(1, "msg_a"), last=last, project_key="p", project_root="/p",
                status="extracted", extractor="rules", model=None,
                result={"candidates": [{"content": f"fact {k}"} for k in range(candidates)],
                        "message_times": {}},
                tokens_in=0, tokens_out=0)


def test_a_batch_reads_its_own_writes_and_writes_nothing_before_commit(
        state: StateDB) -> None:
    state.marks.set_mark(SRC, "s1", Mark(STORAGE_MESSAGE, (5, "msg_e")), NOW)
    batch = StateBatch(state)
    batch.set_mark(SRC, "s1", Mark(STORAGE_MESSAGE, (7, "msg_g")), NOW)
    batch.set_mark(SRC, "s1", Mark(STORAGE_MESSAGE, (6, "msg_f")), NOW)  # never backwards
    assert batch.get_mark(SRC, "s1") == Mark(STORAGE_MESSAGE, (7, "msg_g"))
    batch.replace_mark(SRC, "s2", None, NOW)
    assert batch.get_mark(SRC, "s2") is None
    batch.set_mark(SRC, "s3", Mark(STORAGE_SESSION_MESSAGE, (2, "msg_b")), NOW)
    one = item("s4", (9, "msg_i"), candidates=1)
    batch.record_item(one, NOW)
    assert [i.id for i in batch.pending_items(SRC, "s4")] == [one.id]
    batch.complete_item(one, NOW)
    assert batch.pending_items(SRC, "s4") == []
    assert batch.get_item(one.id) is not None and batch.get_item(one.id).status == "stored"
    assert batch.get_mark(SRC, "s4") == Mark(STORAGE_MESSAGE, (9, "msg_i"))
    # nothing reached the file yet: a crash now means reading those turns again
    assert rows(state, "SELECT session_id, message_id FROM marks") == [("s1", "msg_e")]
    assert rows(state, "SELECT count(*) FROM items") == [(0,)]
    assert batch.commit() == 6
    assert dict(rows(state, "SELECT session_id, message_id FROM marks")) == {
        "s1": "msg_g", "s3": "msg_b", "s4": "msg_i"}
    assert rows(state, "SELECT id, status FROM items") == [(one.id, "stored")]
    assert len(batch) == 0 and batch.commit() == 0


def test_a_batch_is_all_or_nothing(state: StateDB) -> None:
    batch = StateBatch(state)
    batch.set_mark(SRC, "s1", Mark(STORAGE_MESSAGE, (7, "msg_g")), NOW)
    batch._ops.append(("no-such-write",))
    with pytest.raises(ValueError, match="no-such-write"):
        batch.commit()
    assert rows(state, "SELECT count(*) FROM marks") == [(0,)]


def test_queue_done_in_a_batch_keeps_a_session_that_changed_meanwhile(
        state: StateDB) -> None:
    state.queue.queue_touch_many(SRC, ["s1", "s2"], 1_000, 1.0, 60.0)
    batch = StateBatch(state)
    batch.queue_done(SRC, "s1", 2_000)
    batch.queue_done(SRC, "s2", 2_000)
    state.queue.queue_touch_many(SRC, ["s2"], 3_000, 1.0, 60.0)  # changed after it was started
    batch.commit()
    assert [sid for _, sid, _ in state.queue.queue_head(10)] == ["s2"]


def test_sessions_quiet_already_are_due_at_once_and_the_head_is_soonest_first(
        state: StateDB) -> None:
    now = 10_000_000
    state.queue.queue_touch_many(SRC, ["busy", "quiet", "old"], now, 60.0, 900.0,
                                 changed_ms={"quiet": now - 120_000, "old": now - 10_000_000})
    head = state.queue.queue_head(10)
    assert [sid for _, sid, _ in head] == ["old", "quiet", "busy"]
    due = {sid: at for _, sid, at in head}
    assert due["busy"] == now + 60_000
    assert due["quiet"] == now - 60_000 and due["old"] == now - 9_940_000  # due already
    # a later change only pushes the quiet period, up to the first change + max wait
    state.queue.queue_touch_many(SRC, ["busy"], now + 850_000, 60.0, 900.0)
    assert {sid: at for _, sid, at in state.queue.queue_head(10)}["busy"] == now + 900_000
    assert state.queue.queue_size() == 3 and len(state.queue.queue(limit=2)) == 2


class RecordingStore(EdgeStore):
    """The real embedded store, noting when it flushes."""

    def __init__(self, path: Path, events: list[str]) -> None:
        self.events = events
        super().__init__(path)

    def _flush(self) -> None:
        self.events.append("flush")
        super()._flush()


class RecordingState(StateDB):
    """The real state file, noting when a batch is committed."""

    def __init__(self, path: Path, events: list[str]) -> None:
        self.events = events
        super().__init__(path)

    def apply_batch(self, ops: object) -> None:  # type: ignore[override]
        self.events.append("state")
        super().apply_batch(ops)  # type: ignore[arg-type]


def memory(text: str) -> Memory:
    t = datetime(2025, 6, 1, tzinfo=UTC)
    return Memory(id=make_point_id("project", "p", "project", text), content=text,
                  type="project", scope="project", project_id="p", project_root="/p",
                  session_id="s1", message_ids=["m"], source="rules", created_at=t,
                  updated_at=t, session_ids=["s1"])


def test_a_write_group_flushes_the_store_before_the_marks_commit(tmp_path: Path) -> None:
    events: list[str] = []
    store = RecordingStore(tmp_path / "store", events)
    state = RecordingState(tmp_path / "state.db", events)
    try:
        with WriteGroup(state, store, flush_seconds=60) as group:
            store.upsert([memory("The API lives under /api/v2.")])
            group.batch.set_mark(SRC, "s1", Mark(STORAGE_MESSAGE, (1, "m")), NOW)
            group.note(SRC, "s1")
            assert events == []  # not flushed per upsert inside the group
            assert group.wrote_store and group.sessions == {(SRC, "s1")}
            group.commit_if_due(idle=True)  # the last flush is recent: not yet
            assert events == [] and group.seconds_until_due(idle=True) > 0
            group.commit()
            assert events == ["flush", "state"]
            assert group.sessions == set() and not group.wrote_store
            # without store writes, an idle group commits at once and flushes nothing
            group.batch.set_mark(SRC, "s2", Mark(STORAGE_MESSAGE, (1, "m")), NOW)
            group.note(SRC, "s2")
            group.commit_if_due(idle=True)
            assert events == ["flush", "state", "state"]
        assert store.count() == 1
        assert dict(rows(state, "SELECT session_id, message_id FROM marks")) == {
            "s1": "m", "s2": "m"}
    finally:
        store.close()
        state.close()


def test_writes_outside_a_batch_are_flushed_at_once(tmp_path: Path) -> None:
    events: list[str] = []
    store = RecordingStore(tmp_path / "store", events)
    try:
        store.upsert([memory("Deploys need a manual approval.")])
        assert events == ["flush"]
        with store.batch(), store.batch():  # nested: one flush at the outermost end
            store.upsert([memory("The dev database is PostgreSQL 16.")])
            store.delete([memory("Deploys need a manual approval.").id])
        assert events == ["flush", "flush"]
        with store.batch():  # nothing written: nothing flushed
            store.count()
        assert events == ["flush", "flush"]
    finally:
        store.close()


@pytest.mark.skipif(not inotify.available(), reason="inotify is Linux only")
def test_the_watcher_wakes_for_database_files_only_and_stops_at_once(
        tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    changes: list[float] = []
    failures: list[BaseException] = []
    changed = threading.Event()

    def on_change() -> None:
        changes.append(time.monotonic())
        changed.set()

    watcher = DbWatcher([db], on_change=on_change, on_failure=failures.append)
    assert watcher.start()
    try:
        time.sleep(0.1)
        (tmp_path / "notes.txt").write_text("unrelated")
        assert not changed.wait(0.3)
        Path(str(db) + "-wal").write_bytes(b"x")
        assert changed.wait(5)
        changed.clear()
        (tmp_path / "opencode-beta.db").write_bytes(b"")  # another channel's database
        assert changed.wait(5)
    finally:
        t = time.monotonic()
        watcher.stop()
        assert time.monotonic() - t < 1.5
    assert failures == []


def test_a_prefetch_answers_for_its_sessions_until_the_outbox_is_written(
        state: StateDB) -> None:
    """Marks and items read ahead for many sessions answer without asking the state file;
    a write transaction of another writer (e.g. another thread's durable answer) makes the
    batch ask again, so what it wrote is seen."""
    state.marks.set_mark(SRC, "s1", Mark(STORAGE_MESSAGE, (5, "msg_e")), NOW)
    state.outbox.record_item(item("s1", (6, "msg_f")), NOW)
    batch = StateBatch(state)
    batch.prefetch(SRC, ["s1", "s2", "s3"])
    asked: list[str] = []
    real_get_item, real_pending = state.outbox.get_item, state.outbox.pending_items
    state.outbox.get_item = (  # type: ignore[method-assign]
        lambda i: asked.append(i) or real_get_item(i))
    state.outbox.pending_items = (  # type: ignore[method-assign]
        lambda s, sid=None: asked.append(f"pending {sid}") or real_pending(s, sid))
    assert batch.get_mark(SRC, "s1") == Mark(STORAGE_MESSAGE, (5, "msg_e"))
    assert batch.get_mark(SRC, "s2") is None
    assert [i.id for i in batch.pending_items(SRC, "s1")] == ["item-s1-msg_f"]
    assert batch.get_item("item-s2-msg_b", (SRC, "s2")) is None
    assert asked == []  # all answered from the read-ahead
    state.outbox.record_item(item("s3", (2, "msg_b")), NOW)  # another writer, durably
    got = batch.get_item("item-s3-msg_b", (SRC, "s3"))
    assert got is not None and got.session_id == "s3"
    assert asked == ["item-s3-msg_b"]
    assert [i.id for i in batch.pending_items(SRC, "s3")] == ["item-s3-msg_b"]
