"""Applying, rolling forward and undoing a dream's writes, recorded in the state file.

Crash safety (redo log, as in write-ahead logging: Mohan et al., "ARIES", ACM TODS 1992,
reduced to whole-record redo of idempotent upserts): a dream is one ``dream_runs`` row of the
state file (:class:`~opencode_memoryd.state.StateDB`). Applying = (1) record the payloads of
every touched memory as they are (``before``) and as they will be (``after``), status
``applying``, one durable transaction; (2) upsert every ``after`` payload in batches
(survivors and merged memories first, tombstones last, so a fact is never hidden mid-way);
(3) status ``applied``. :meth:`RunWriter.roll_forward` finishes a run left ``applying``.
:meth:`RunWriter.restore` writes ``before`` back and deletes the memories the run created.

Callers must keep other writers of the scope (extraction) out while a dream applies (the
daemon's per-project lock); a dream refuses to apply when a touched memory changed while
it was planning (:meth:`RunWriter.changed_since`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Sequence
from typing import Any

from opencode_memoryd.dream.model import DreamResult, short_text
from opencode_memoryd.errors import DreamError, NotFoundError
from opencode_memoryd.models import Memory
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore

#: Environment variable naming a fault point (crash tests).
FAULT_ENV = "OPENCODE_MEMORYD_FAULT"
#: The fault point in the middle of applying a dream.
FAULT_MID_APPLY = "dream_mid_apply"
#: Memories per store upsert while applying a dream (each upsert is flushed to disk).
WRITE_BATCH = 256


def _fault_point(name: str) -> None:
    """Die here, as by ``kill -9``, when ``OPENCODE_MEMORYD_FAULT`` names this point (crash
    tests; no cleanup runs, exactly as with a real SIGKILL)."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def write_order(memories: Iterable[Memory]) -> list[Memory]:
    """``memories`` active first (survivors and merged ones), tombstones last, each part
    oldest first: the order in which writing never hides a fact."""
    return sorted(memories, key=lambda m: (not m.is_active, m.created_at, m.id))


class RunWriter:
    """Writes a dream run's memories to the store, as recorded in the state file.

    Args:
        store: the memory store.
        state: the state file (``dream_runs`` table).
    """

    def __init__(self, store: MemoryStore, state: StateDB) -> None:
        self.store = store
        self.state = state

    def changed_since(self, before: dict[str, dict[str, Any]], after: Sequence[Memory]) -> int:
        """How many of the memories in ``after`` differ in the store from ``before`` (the
        payloads planned on; a memory missing from ``before`` must not exist)."""
        ids = [m.id for m in after]
        now = {m.id: m.to_payload() for m in self.store.get(ids)}
        return sum(1 for i in ids if now.get(i) != before.get(i))

    def record(self, res: DreamResult, before: dict[str, dict[str, Any]],
               after: Sequence[Memory]) -> None:
        """Step 1 of applying: record run ``res.run_id`` as ``applying`` with the
        ``before`` payloads and the ``after`` memories, in one durable transaction.

        Raises:
            StateError: the run cannot be recorded (nothing was written).
        """
        self.state.runs.dream_applying(
            res.run_id, before=list(before.values()),
            after=[m.to_payload() for m in after], counts=res.counts, model=res.model,
            tokens_in=res.tokens_in, tokens_out=res.tokens_out, result=res.to_journal())

    def write(self, after: Sequence[Memory]) -> None:
        """Step 2 of applying: upsert ``after`` in batches of ``WRITE_BATCH``, the active
        memories (survivors and merged ones) first, then the tombstones, so no fact is
        hidden mid-way. The caller then marks the run ``applied`` (step 3).

        Raises:
            StoreError: a write failed; the run stays ``applying`` (roll it forward).
        """
        active = [m for m in after if m.is_active]
        retired = [m for m in after if not m.is_active]
        for part in (active, retired):
            for start in range(0, len(part), WRITE_BATCH):
                self.store.upsert(part[start:start + WRITE_BATCH])
            if part is active:
                _fault_point(FAULT_MID_APPLY)

    def roll_forward(self, row: dict[str, Any], now: str) -> int:
        """Finish a run left ``applying``: upsert every ``after`` payload again (idempotent),
        note the recovery in its recorded result, and mark it ``applied``.

        Returns:
            The number of memories written.
        """
        after = [Memory.from_payload(p) for p in row["after"]]
        for m in write_order(after):
            self.store.upsert([m])
        result = dict(row["result"] or {})
        if result:
            result["ended_at"] = now
            note = "completed by recovery after an interruption"
            result["reason"] = f"{result['reason']}; {note}" if result.get("reason") else note
        self.state.runs.dream_finish(row["id"], "applied", now=now, expect=("applying",),
                                     result=result or None)
        return len(after)

    def drifted(self, row: dict[str, Any]) -> int:
        """How many memories the run wrote differ in the store from what it wrote."""
        planned_after = {p["id"]: p for p in row["after"]}
        current = {m.id: m.to_payload() for m in self.store.get(list(planned_after))}
        return sum(1 for i, p in planned_after.items() if current.get(i) != p)

    def restore(self, row: dict[str, Any]) -> tuple[int, list[str]]:
        """Write the run's ``before`` payloads back (active memories first) and delete the
        memories it created (in ``after``, not in ``before``).

        Returns:
            (memories restored, ids deleted).
        """
        before = [Memory.from_payload(p) for p in row["before"]]
        before_ids = {m.id for m in before}
        created = [p["id"] for p in row["after"] if p["id"] not in before_ids]
        # active memories first, so no restored fact is hidden while undoing
        for m in write_order(before):
            self.store.upsert([m])
        if created:
            self.store.delete(created)
        return len(before), created


def undoable_run(state: StateDB, run_id: str) -> dict[str, Any]:
    """The ``dream_runs`` row of a run that may be undone.

    Raises:
        NotFoundError: no run has that id.
        DreamError: the run is a dry run, already undone, not applied (e.g. still
            ``applying``: recover first), or a later applied dream changed the same
            memories (undo that one first).
    """
    row = state.runs.dream_run(run_id)
    if row is None:
        raise NotFoundError(f"no dream run {run_id!r}")
    if row["dry_run"]:
        raise DreamError(f"dream run {run_id} was a dry run: it changed nothing to undo")
    if row["status"] == "undone":
        raise DreamError(f"dream run {run_id} is already undone (at {row['undone_at']})")
    if row["status"] not in ("applied", "undoing"):
        hint = "; run recovery first" if row["status"] == "applying" else ""
        raise DreamError(f"dream run {run_id} is {row['status']}: only an applied run "
                         f"can be undone{hint}")
    touched = {p["id"] for p in [*row["before"], *row["after"]]}
    for later in state.runs.dream_runs(statuses=("applying", "applied", "undoing"),
                                       newest_first=False):
        if later["seq"] <= row["seq"]:
            continue
        theirs = {p["id"] for p in [*later["before"], *later["after"]]}
        if theirs & touched:
            raise DreamError(f"dream run {later['id']} (later) changed memories of run "
                             f"{run_id}; undo {later['id']} first")
    return row


def undo_operations(row: dict[str, Any], deleted: Sequence[str]) -> list[dict[str, Any]]:
    """The journaled operations of an undo: ``restore`` of the run's ``before`` memories
    and ``delete`` of the memories it created."""
    planned_after = {p["id"]: p for p in row["after"]}
    return [
        {"op": "restore", "memory_ids": [p["id"] for p in row["before"]],
         "superseded_ids": [], "new_id": None,
         "texts": [short_text(p["content"]) for p in row["before"]], "new_text": None,
         "reason": "undo"},
        {"op": "delete", "memory_ids": list(deleted), "superseded_ids": [], "new_id": None,
         "texts": [short_text(planned_after[i]["content"]) for i in deleted],
         "new_text": None, "reason": "undo"},
    ]
